"""The ``inv_freq`` tensors a safetensors checkpoint carries, for ``ropekit audit --served``.

Read with safetensors' numpy API (no torch): only tensors named ``*inv_freq`` are loaded, one
:class:`~ropekit.artifacts.served.ServedTable` each. ``{layer_type}_inv_freq`` (transformers' multi-type
rotary modules) names the layer type; ``original_inv_freq`` and ``long_inv_freq`` copies are
skipped. Needs ``pip install "ropekit[safetensors]"``. Pickled ``.bin``/``.pt`` state dicts are
never read.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ....errors import ArgumentError, MissingDependencyError
from ...served import MAX_ARRAY_BYTES, ServedArtifact, ServedTable, check_regular_file

__all__ = ["read_safetensors"]

_SKIPPED = ("original_inv_freq", "long_inv_freq")
_MAX_TABLES = 4096
"""The most ``inv_freq`` tensors read from one file (a model has one per layer at most; each is a table kept)."""


def _layer_type(name: str) -> str | None:
    """``model.rotary_emb.sliding_attention_inv_freq`` -> ``sliding_attention``; ``...inv_freq`` -> None."""
    last = name.rsplit(".", 1)[-1]
    return last[: -len("_inv_freq")] if last.endswith("_inv_freq") and last != "_inv_freq" else None


def read_safetensors(path: str | os.PathLike[str]) -> ServedArtifact:
    """Every ``*inv_freq`` tensor in the safetensors file at ``path``, as a served artifact.

    A file without one gives an artifact with no tables (the audit verdict ``no_table``: transformers
    does not save its non-persistent ``inv_freq`` buffers, so most checkpoints carry none).
    Unreadable, oversized or malformed files raise :class:`~ropekit.ArgumentError` naming
    ``served``; a 2-D or non-float ``inv_freq`` is refused the same way.
    """
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:
        raise MissingDependencyError('reading .safetensors needs safetensors: pip install "ropekit[safetensors]"') \
            from None
    name = os.fspath(path)
    check_regular_file(name, "served")
    tables: list[ServedTable] = []
    header: dict[str, Any] = {}  # the JSON header, parsed once if a bfloat16 table needs its offsets
    try:
        with safe_open(name, framework="numpy") as handle:
            metadata: dict[str, Any] = handle.metadata() or {}
            for key in sorted(handle.keys()):
                if not key.endswith("inv_freq") or key.endswith(_SKIPPED):
                    continue
                if len(tables) == _MAX_TABLES:
                    raise ArgumentError("served", f"{name}: tensor {key!r}: more than {_MAX_TABLES} inv_freq tensors "
                                        "(a model has one per layer at most)")
                view = handle.get_slice(key)
                dtype, shape = str(view.get_dtype()).lower(), tuple(view.get_shape())
                if len(shape) != 1 or not shape[0]:
                    raise ArgumentError("served", f"{name}: tensor {key!r} has shape {list(shape)}; an inv_freq is 1-D")
                if dtype not in ("f64", "f32", "f16", "bf16"):
                    raise ArgumentError("served", f"{name}: tensor {key!r} is {dtype}; an inv_freq is a float tensor")
                if shape[0] * 8 > MAX_ARRAY_BYTES:
                    raise ArgumentError("served", f"{name}: tensor {key!r} has {shape[0]} entries")
                values = _values(handle, name, key, dtype, header)
                stored = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype]
                tables.append(ServedTable(f"{name}:{key}", "inv_freq", values, stored, layer_type=_layer_type(key),
                                          angles="exact"))
    except ArgumentError:
        raise
    except (SafetensorError, OSError, ValueError, TypeError, KeyError) as error:
        raise ArgumentError("served", f"{name}: cannot read as safetensors: {error}") from None
    producer = str(metadata.get("format", "")) if metadata else ""
    return ServedArtifact(name, "safetensors", tuple(tables), producer=f"safetensors ({producer})" if producer
                          else "safetensors")


def _values(handle: Any, name: str, key: str, dtype: str, header: dict[str, Any],
            ) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The tensor as float64; bfloat16 (which numpy lacks) is widened from its raw 16-bit words (the header
    ``safe_open`` checked, parsed here once into ``header``; sizes checked again against the file as it is now)."""
    if dtype != "bf16":
        return np.asarray(handle.get_tensor(key), dtype=np.float64)
    with open(name, "rb") as stream:  # the format: u64 header size, JSON header, then the data buffer
        file_size = os.fstat(stream.fileno()).st_size
        size = int.from_bytes(stream.read(8), "little")
        if not header:
            if 8 + size > file_size:
                raise ArgumentError("served", f"{name}: a header of {size} bytes in a file of {file_size}")
            header.update(size=size, tensors=json.loads(stream.read(size)))
        begin, end = (int(offset) for offset in header["tensors"][key]["data_offsets"])
        start = 8 + int(header["size"]) + begin
        if not 0 <= begin <= end or start + (end - begin) > file_size:
            raise ArgumentError("served", f"{name}: tensor {key!r}: data_offsets [{begin}, {end}] run past the end "
                                f"({file_size} bytes)")
        stream.seek(start)
        widened = np.frombuffer(stream.read(end - begin), dtype="<u2").astype(np.uint32)
    widened <<= 16
    return widened.view(np.float32).astype(np.float64)
