"""Export a model's tables for native forwards: a JSON manifest, raw little-endian tables, .npy copies.

A native forward reads ``inv_freq`` (float64) and the attention factor, or ready cos/sin caches,
and needs no scheme code: whatever the rope_type, the numbers are the same shape. For
seq-len-dependent schemes the manifest states the rule and ``switch_at``, and carries the table
that applies past it (``seq_len`` = ``switch_at + 1``) or at lengths the caller asks for.

Layout of ``DIR``::

    manifest.json        per layer type: rope_type, params, dims, attention factor, rule, files
    manifest.txt         the same essentials as ``key value`` lines, for readers without JSON
    <NN>-<slug>.inv_freq.f64 / .npy               (and .seq<N>.f64 / .npy per extra length)
    <NN>-<slug>.cos.<f32|f16|f64> / .sin.* / .npy when --positions is given
    <NN>-<slug>.mrope_axis.i32 / .mrope_freq.i32 / .npy   for a multimodal table: per cos/sin column
                         (in the export's layout), the position axis and the inv_freq index it uses

File names never come from config text unchecked: ``NN`` numbers the layer types and ``slug`` keeps
at most 40 lowercase letters, digits and underscores of the name, so every name stays inside
``DIR``, is unique (also on case-insensitive file systems) and is short. The layer name itself is
data: in manifest.json as is, in manifest.txt percent-encoded so a line is always one record.

An export owns its folder: ``DIR`` must be absent, empty, or a previous ropekit export. The export
is built in a temporary sibling and moved into place, so a reader sees the old export or the new
one, never a mix, and nothing is ever written through a symlink.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

from .._version import __version__
from ..errors import ArgumentError
from ..tables.table import ModelRope, RopeTable

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..tables.rotary import CacheLayout

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_EXPORT_BYTES", "escape_name", "export", "file_stem"]

FORMAT = "ropekit-export"
FORMAT_VERSION = 1
_SUFFIX = {"float64": "f64", "float32": "f32", "float16": "f16", "int32": "i32"}
MAX_EXPORT_BYTES = 8 << 30
"""The most an export writes (cos/sin caches included); more is refused before anything is written."""


def file_stem(index: int, layer_type: str) -> str:
    """The file stem of the ``index``-th layer type: ``NN-slug``, safe on every file system."""
    slug = re.sub(r"[^a-z0-9_]+", "_", layer_type.lower()).strip("_")[:40] or "layer"
    return f"{index:02d}-{slug}"


def escape_name(name: str) -> str:
    """``name`` as one manifest.txt token: every byte outside ``[A-Za-z0-9_.-]`` percent-encoded."""
    return "".join(
        char if re.fullmatch(r"[A-Za-z0-9_.-]", char) else "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
        for char in name
    ) or "%00"


def _create(path: str) -> Any:
    """A new file for writing that is not, and cannot become, a symlink followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    return os.fdopen(os.open(path, flags, 0o666), "wb")  # as open() makes files: the umask decides


def _write(directory: str, stem: str, array: npt.NDArray[Any]) -> dict[str, Any]:
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    raw = f"{stem}.{_SUFFIX[array.dtype.name]}"
    data = np.ascontiguousarray(little).tobytes()
    with _create(os.path.join(directory, raw)) as handle:
        handle.write(data)
    with _create(os.path.join(directory, f"{stem}.npy")) as handle:
        np.save(handle, little)
    return {
        "path": raw,
        "npy": f"{stem}.npy",
        "dtype": array.dtype.name,
        "byte_order": "little",
        "shape": list(array.shape),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _layer(
    directory: str, stem: str, table: RopeTable, positions: int | None, dtype: npt.DTypeLike,
    layout: CacheLayout | None, seq_lens: list[int],
) -> dict[str, Any]:
    layout = table.layout if layout is None else layout
    record: dict[str, Any] = {
        **table.to_json(inv_freq=False),
        "pairs": len(table.inv_freq),
        "seq_len_dependent": table.seq_len_dependent,
        "seq_len_rule": table.seq_len_rule or "independent of seq_len",
        "switch_at": table.switch_at,
        "layout": layout,
        "files": {"inv_freq": _write(directory, f"{stem}.inv_freq", table.inv_freq)},
    }
    if table.mrope_composition is not None:
        mapping = table.mrope_map(layout)
        record["mrope"] = {
            "composition": table.mrope_composition, "section": list(table.mrope_section or ()), "axes": mapping.axes,
            "columns": int(mapping.axis.shape[0]),
            "rule": "cos[c] = cos(positions[axis[c]] * inv_freq[freq[c]]) * attention_factor, column c of the layout",
        }
        record["files"]["mrope_axis"] = _write(directory, f"{stem}.mrope_axis", mapping.axis.astype(np.int32))
        record["files"]["mrope_freq"] = _write(directory, f"{stem}.mrope_freq", mapping.freq.astype(np.int32))
    if positions:
        # the caches hold positions 0..N-1, so they are the table of a sequence of N positions (the
        # regime the largest position implies), not the load-time one, when the table depends on it
        regime = table.at(positions) if table.seq_len_dependent else table
        cos, sin = regime.cos_sin(positions, dtype=dtype, layout=layout)
        for part, values in (("cos", cos), ("sin", sin)):
            spec = _write(directory, f"{stem}.{part}", values)
            if table.seq_len_dependent:
                spec.update(seq_len=positions, attention_factor=regime.attention_factor)
            record["files"][part] = spec
        record["cos_sin_positions"] = positions
    if table.seq_len_dependent:
        lengths = sorted(set(seq_lens) | ({table.switch_at + 1} if table.switch_at is not None else set()))
        record["beyond"] = [
            {
                "seq_len": length,
                "attention_factor": at.attention_factor,
                "files": {"inv_freq": _write(directory, f"{stem}.inv_freq.seq{length}", at.inv_freq)},
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
    layout: CacheLayout | None = None,
    seq_lens: list[int] | None = None,
) -> dict[str, Any]:
    """Write ``model``'s tables to ``directory``; returns the manifest.

    ``positions`` adds cos/sin caches for positions ``0..positions-1`` in ``dtype`` and
    ``layout`` (default: each table's own, neox unless the family fixes interleaved pairs); for a
    seq-len-dependent table they are the table at ``seq_len = positions`` (the regime their largest
    position implies), and their file entries say so (``seq_len``, ``attention_factor``);
    ``seq_lens`` adds tables of seq-len-dependent schemes at those lengths. Layer types without
    RoPE are listed as ``{"no_rope": true}`` and per-index NoPE layers as ``no_rope_layers``.

    ``directory`` must be absent, empty, or a previous ropekit export (anything else raises
    :class:`~ropekit.ArgumentError`); the export appears there complete or not at all.
    """
    try:
        chosen = np.dtype(dtype)
    except TypeError:
        chosen = None
    if chosen is None or chosen.name not in _SUFFIX:
        raise ArgumentError("dtype", f"unsupported cache dtype {dtype!r}; valid: {', '.join(_SUFFIX)}")
    target = os.path.abspath(os.fspath(directory))
    _check_target(target)
    _check_size(model, positions, dtype)
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = _staging_folder(target)
    except OSError as error:
        raise ArgumentError("directory", f"{target}: cannot write there: {error.strerror or error}") from None
    try:
        manifest = _write_export(model, staging, positions, dtype, layout, list(seq_lens or ()))
        _replace(staging, target)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise ArgumentError("directory", f"{target}: cannot write there: {error.strerror or error}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _staging_folder(target: str) -> str:
    """A new, uniquely named folder beside ``target`` for the export to be written in, made with the
    mode the umask leaves of 0777, as ``mkdir`` makes any folder (``tempfile.mkdtemp`` makes 0700
    whatever the umask, and the folder becomes the export)."""
    parent, base = os.path.dirname(target), os.path.basename(target)
    for _ in range(100):
        path = os.path.join(parent, f".{base}.{secrets.token_hex(6)}.tmp")
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, "no unused staging folder name", parent)  # pragma: no cover


def _check_target(target: str) -> None:
    """``target`` is absent, an empty directory, or a previous ropekit export, and not a symlink."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as error:
        raise ArgumentError("directory", f"{target}: cannot inspect: {error.strerror or error}") from None
    if stat.S_ISLNK(info.st_mode):
        raise ArgumentError("directory", f"{target}: is a symlink; give a real directory (nothing is written through "
                            "symlinks)")
    if not stat.S_ISDIR(info.st_mode):
        raise ArgumentError("directory", f"{target}: exists and is not a directory")
    entries = os.listdir(target)
    if not entries:
        return
    try:
        with open(os.path.join(target, "manifest.json"), encoding="utf-8") as handle:
            previous = json.load(handle)
        if isinstance(previous, dict) and previous.get("format") == FORMAT:
            return
    except (OSError, ValueError):
        pass
    raise ArgumentError("directory", f"{target}: not empty and not a ropekit export; an export owns its folder "
                        "(give a new or empty directory)")


def _check_size(model: ModelRope, positions: int | None, dtype: npt.DTypeLike) -> None:
    if positions is None:
        return
    if isinstance(positions, bool) or not isinstance(positions, int) or positions < 1:
        raise ArgumentError("positions", f"expected a positive number of positions, got {positions!r}")
    width = np.dtype(dtype).itemsize
    total = sum(2 * positions * table.rotary_dim * width for table in model.tables.values())
    if total > MAX_EXPORT_BYTES:
        raise ArgumentError("positions", f"{positions} positions would write {total / 2**30:.1f} GiB of cos/sin caches "
                            f"(at most {MAX_EXPORT_BYTES / 2**30:.0f} GiB); export inv_freq and build caches in the "
                            "forward, or export fewer positions")


def _replace(staging: str, target: str) -> None:
    """Move ``staging`` to ``target``; a previous export is swapped out, then removed."""
    if not os.path.lexists(target):
        os.rename(staging, target)
        return
    retired = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.", suffix=".old", dir=os.path.dirname(target))
    os.rmdir(retired)
    os.rename(target, retired)
    os.rename(staging, target)
    shutil.rmtree(retired, ignore_errors=True)


def _write_export(
    model: ModelRope, target: str, positions: int | None, dtype: npt.DTypeLike, layout: CacheLayout | None,
    seq_lens: list[int],
) -> dict[str, Any]:
    layers: dict[str, Any] = {}
    for index, (name, table) in enumerate(model.tables.items()):
        layers[name] = _layer(target, file_stem(index, name), table, positions, dtype, layout, seq_lens)
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
    with _create(os.path.join(target, "manifest.txt")) as handle:
        lines = [f"# {FORMAT} {FORMAT_VERSION}: one line per layer type; see manifest.json for everything"]
        for name, layer in layers.items():
            fields = [
                f"layer {escape_name(name)}", f"rope_type {escape_name(layer['rope_type'])}",
                f"head_dim {layer['head_dim']}", f"rotary_dim {layer['rotary_dim']}", f"pairs {layer['pairs']}",
                f"attention_factor {layer['attention_factor']!r}", f"inv_freq {layer['files']['inv_freq']['path']}",
            ]
            if "query_scaling" in layer:
                fields += [f"query_scale_beta {layer['query_scaling']['beta']!r}",
                           f"query_scale_original {int(layer['query_scaling']['original_max_position_embeddings'])}"]
            if "mrope" in layer:
                fields += [] if "cos" in layer["files"] else [f"layout {layer['layout']}"]
                fields += [f"mrope_axes {layer['mrope']['axes']}",
                           f"mrope_columns {layer['mrope']['columns']}",
                           f"mrope_axis {layer['files']['mrope_axis']['path']}",
                           f"mrope_freq {layer['files']['mrope_freq']['path']}"]
            if "cos" in layer["files"]:
                fields += [f"positions {layer['cos_sin_positions']}", f"cache_dtype {layer['files']['cos']['dtype']}",
                           f"layout {layer['layout']}", f"cos {layer['files']['cos']['path']}",
                           f"sin {layer['files']['sin']['path']}"]
            lines.append(" ".join(fields))
        if no_rope or model.no_rope_layers:  # a comment: readers of the line format skip it
            lines.append(f"# no RoPE: layer types {' '.join(escape_name(n) for n in no_rope) or '-'}; layers "
                         f"{' '.join(map(str, model.no_rope_layers)) or '-'}")
        handle.write(("\n".join(lines) + "\n").encode("utf-8"))
    with _create(os.path.join(target, "manifest.json")) as handle:  # last: its presence marks a complete export
        handle.write((json.dumps(manifest, indent=2, allow_nan=False) + "\n").encode("utf-8"))
    return manifest
