"""Served tables stored as plain arrays: ``.npy`` files and raw little-endian ``.f64``/``.f32``/
``.f16`` dumps (an ``inv_freq``, or a cos/sin cache pair). Pickles are never unpickled."""

from __future__ import annotations

import os
import tokenize
from typing import TYPE_CHECKING

import numpy as np

from ....errors import ArgumentError
from ...served import MAX_ARRAY_BYTES, ServedArtifact, ServedTable, check_regular_file

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["read_array", "read_served"]

_RAW_DTYPES = {".f64": np.float64, ".f32": np.float32, ".f16": np.float16, ".bin": None, ".raw": None}


def read_array(
    name: str,
    *,
    dtype: str | None = None,
    width: int | None = None,
    sin: str | os.PathLike[str] | None = None,
    layout: str = "neox",
) -> ServedArtifact:
    """An array file as an artifact: a 1-D ``inv_freq``, or a 2-D cos cache (with ``sin``, its sin
    cache) whose columns are in ``layout``. Pickle suffixes are refused unless ``dtype`` says the
    file is raw values."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in (".bin", ".pt", ".pth", ".pkl", ".pickle") and dtype is None:
        raise ArgumentError("served", f"{name}: {suffix} files are not read (pickles are never unpickled); give "
                            "an .npy, a raw .f64/.f32/.f16 table, an ONNX pack or a .gguf")
    values = read_served(name, dtype=dtype, width=width)
    stored = _stored_dtype(name, dtype)
    if values.ndim == 1:
        if sin is not None:
            raise ArgumentError("sin", "a sin cache goes with a 2-D cos cache, not a 1-D inv_freq")
        return ServedArtifact(name, "array", (ServedTable(name, "inv_freq", values, stored, angles="exact"),))
    sin_values = read_served(os.fspath(sin), dtype=dtype, width=width) if sin is not None else None
    if sin_values is not None and sin_values.shape != values.shape:
        raise ArgumentError("sin", f"shape {sin_values.shape} differs from the cos cache's {values.shape}")
    if layout not in ("neox", "gptj", "half"):
        raise ArgumentError("layout", f"unknown layout {layout!r}; valid: neox, gptj, half")
    return ServedArtifact(name, "array", (ServedTable(name, "cache", values, stored, sin=sin_values, layout=layout),))


def _stored_dtype(name: str, dtype: str | None) -> str:
    if dtype:
        return dtype
    suffix = os.path.splitext(name)[1].lower()
    chosen = _RAW_DTYPES.get(suffix)
    if chosen is not None:
        return np.dtype(chosen).name
    if suffix == ".npy":
        try:
            return str(np.load(name, mmap_mode="r", allow_pickle=False).dtype)
        except (OSError, ValueError):
            return "float64"
    return "float64"


def read_served(
    path: str | os.PathLike[str], *, dtype: str | None = None, width: int | None = None
) -> npt.NDArray[np.float64]:
    """A served table from ``.npy`` or raw little-endian bytes (dtype from ``dtype`` or the
    ``.f64``/``.f32``/``.f16`` suffix); raw 2-D caches are reshaped to ``width`` columns.

    Empty, truncated, odd-sized, oversized and non-regular files are refused with an
    :class:`~ropekit.ArgumentError` naming ``served``; NaN and infinity are kept (an audit reports
    them as a mismatch).
    """
    name = os.fspath(path)
    suffix = os.path.splitext(name)[1].lower()
    chosen = np.dtype(dtype) if dtype else _RAW_DTYPES.get(suffix)
    if suffix != ".npy" and chosen is None:
        raise ArgumentError("served", f"{name}: raw file of unknown dtype; give its dtype (float64, float32, "
                            "float16) or use a .npy/.f64/.f32/.f16 file")
    info = check_regular_file(name, "served")
    if info.st_size == 0:
        raise ArgumentError("served", f"{name}: empty file")
    if info.st_size > MAX_ARRAY_BYTES:
        raise ArgumentError("served", f"{name}: {info.st_size} bytes; a served table is at most {MAX_ARRAY_BYTES}")
    try:
        if suffix == ".npy":  # numpy refuses a header over 10,000 bytes and a shape the file cannot hold; a shape
            with np.errstate(over="raise"):  # whose size overflows is an error here, not a warning
                array = np.load(name, mmap_mode="r", allow_pickle=False)
        else:
            assert chosen is not None
            item = np.dtype(chosen).itemsize
            if info.st_size % item:
                raise ArgumentError("served", f"{name}: {info.st_size} bytes is not a whole number of "
                                    f"{np.dtype(chosen).name} values ({item} bytes each); truncated or another dtype?")
            array = np.fromfile(name, dtype=np.dtype(chosen).newbyteorder("<"))
            if width and array.size > width:
                if array.size % width:
                    raise ArgumentError("served", f"{name}: {array.size} values are not whole rows of {width}")
                array = array.reshape(-1, width)
    except ArgumentError:
        raise
    except (OSError, ValueError, TypeError, EOFError, SyntaxError, tokenize.TokenError, FloatingPointError) as error:
        # numpy parses the .npy header's dict with the tokenizer: a broken header raises its errors
        raise ArgumentError("served", f"{name}: cannot read as an array file: {type(error).__name__}: {error}") \
            from None
    if array.ndim not in (1, 2) or array.size == 0 or not np.issubdtype(array.dtype, np.floating):
        raise ArgumentError("served", f"{name}: expected a 1-D inv_freq or a 2-D cos/sin cache of floats, "
                            f"got {array.dtype} {array.shape}")
    if isinstance(array, np.memmap):  # checked before it is copied: one copy, as float64, and the map let go
        return np.array(array, dtype=np.float64)
    return np.asarray(array, dtype=np.float64)
