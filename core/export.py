"""Export a model's tables for native forwards: a JSON manifest, raw little-endian tables, .npy copies.

A native forward reads ``inv_freq`` (float64) and the attention factor, or ready cos/sin caches,
and needs no scheme code: whatever the rope_type, the numbers are the same shape. For
seq-len-dependent schemes the manifest states the rule and ``switch_at``, and carries the table
that applies past it (``seq_len`` = ``switch_at + 1``) or at lengths the caller asks for.

Layout of ``DIR``::

    manifest.json        per layer type: rope_type, params, dims, attention factor, rule, files
    manifest.txt         the same essentials as ``key value`` lines, for readers without JSON
    <layer_type>.inv_freq.f64 / .npy               (and .seq<N>.f64 / .npy per extra length)
    <layer_type>.cos.<f32|f16|f64> / .sin.* / .npy when --positions is given
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from . import __version__
from .table import ModelRope, RopeTable

if TYPE_CHECKING:
    import numpy.typing as npt

    from .rotary import Layout

__all__ = ["FORMAT", "FORMAT_VERSION", "export"]

FORMAT = "ropekit-export"
FORMAT_VERSION = 1
_SUFFIX = {"float64": "f64", "float32": "f32", "float16": "f16"}


def _write(directory: str, stem: str, array: npt.NDArray[Any]) -> dict[str, Any]:
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    raw = f"{stem}.{_SUFFIX[array.dtype.name]}"
    data = np.ascontiguousarray(little).tobytes()
    with open(os.path.join(directory, raw), "wb") as handle:
        handle.write(data)
    np.save(os.path.join(directory, f"{stem}.npy"), little)
    return {
        "path": raw,
        "npy": f"{stem}.npy",
        "dtype": array.dtype.name,
        "byte_order": "little",
        "shape": list(array.shape),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _layer(
    directory: str, name: str, table: RopeTable, positions: int | None, dtype: npt.DTypeLike, layout: Layout | None,
    seq_lens: list[int],
) -> dict[str, Any]:
    layout = table.layout if layout is None else layout
    record: dict[str, Any] = {
        **table.to_json(inv_freq=False),
        "pairs": len(table.inv_freq),
        "seq_len_dependent": table.seq_len_dependent,
        "seq_len_rule": table.seq_len_rule or "independent of seq_len",
        "switch_at": table.switch_at,
        "layout": layout,
        "files": {"inv_freq": _write(directory, f"{name}.inv_freq", table.inv_freq)},
    }
    if positions:
        cos, sin = table.cos_sin(positions, dtype=dtype, layout=layout)
        record["files"]["cos"] = _write(directory, f"{name}.cos", cos)
        record["files"]["sin"] = _write(directory, f"{name}.sin", sin)
        record["cos_sin_positions"] = positions
    if table.seq_len_dependent:
        lengths = sorted(set(seq_lens) | ({table.switch_at + 1} if table.switch_at is not None else set()))
        record["beyond"] = [
            {
                "seq_len": length,
                "attention_factor": at.attention_factor,
                "files": {"inv_freq": _write(directory, f"{name}.inv_freq.seq{length}", at.inv_freq)},
            }
            for length in lengths
            for at in [table.at(length)]
        ]
    return record


def export(
    model: ModelRope,
    directory: str | os.PathLike[str],
    *,
    positions: int | None = None,
    dtype: npt.DTypeLike = np.float32,
    layout: Layout | None = None,
    seq_lens: list[int] | None = None,
) -> dict[str, Any]:
    """Write ``model``'s tables to ``directory`` (created if needed); returns the manifest.

    ``positions`` adds cos/sin caches for positions ``0..positions-1`` in ``dtype`` and
    ``layout`` (default: each table's own, neox unless the family fixes interleaved pairs);
    ``seq_lens`` adds tables of seq-len-dependent schemes at those lengths. Layer types without
    RoPE are listed as ``{"no_rope": true}`` and per-index NoPE layers as ``no_rope_layers``.
    """
    target = os.fspath(directory)
    os.makedirs(target, exist_ok=True)
    layers = {
        name: _layer(target, name, table, positions, dtype, layout, list(seq_lens or ()))
        for name, table in model.tables.items()
    }
    no_rope = {name: {"no_rope": True} for name in sorted(model.no_rope_types - set(model.tables))}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "ropekit_version": __version__,
        "source": model.source,
        "layer_types": list(model.layer_types),
        "layers": {**layers, **no_rope},
        "no_rope_layers": list(model.no_rope_layers),
    }
    with open(os.path.join(target, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2, allow_nan=False)
        handle.write("\n")
    with open(os.path.join(target, "manifest.txt"), "w", encoding="utf-8") as handle:
        handle.write(f"# {FORMAT} {FORMAT_VERSION}: one line per layer type; see manifest.json for everything\n")
        for name, layer in layers.items():
            fields = [
                f"layer {name}", f"rope_type {layer['rope_type']}", f"head_dim {layer['head_dim']}",
                f"rotary_dim {layer['rotary_dim']}", f"pairs {layer['pairs']}",
                f"attention_factor {layer['attention_factor']!r}", f"inv_freq {layer['files']['inv_freq']['path']}",
            ]
            if "cos" in layer["files"]:
                fields += [f"positions {layer['cos_sin_positions']}", f"cache_dtype {layer['files']['cos']['dtype']}",
                           f"layout {layer['layout']}", f"cos {layer['files']['cos']['path']}",
                           f"sin {layer['files']['sin']['path']}"]
            handle.write(" ".join(fields) + "\n")
        if no_rope or model.no_rope_layers:  # a comment: readers of the line format skip it
            handle.write(f"# no RoPE: layer types {' '.join(no_rope) or '-'}; layers "
                         f"{' '.join(map(str, model.no_rope_layers)) or '-'}\n")
    return manifest
