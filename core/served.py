"""What a forward actually served: tables read out of an array file, an ONNX pack or a GGUF.

:func:`read_artifact` finds every RoPE table an artifact carries and returns them as
:class:`ServedTable` values, each saying where it was found and what it is: an ``inv_freq`` (with
the magnitude the engine multiplies cos/sin by, when known) or a cos/sin cache. Readers for ONNX
and GGUF live in :mod:`ropekit.onnx_served` and :mod:`ropekit.gguf_served` and need the optional
extras ``ropekit[onnx]`` / ``ropekit[gguf]``.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np

from .errors import ArgumentError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["ServedArtifact", "ServedTable", "check_regular_file", "read_artifact", "read_served"]

Kind = Literal["inv_freq", "cache"]
_RAW_DTYPES = {".f64": np.float64, ".f32": np.float32, ".f16": np.float16, ".bin": None, ".raw": None}
MAX_ARRAY_BYTES = 1 << 30
"""The largest served array read (a 2**20-position float32 cache of 128 pairs is 512 MiB)."""


@attrs.frozen(eq=False)
class ServedTable:
    """One table an artifact serves.

    ``kind`` is ``inv_freq`` (``values`` is the frequency table; ``magnitude`` the cos/sin
    multiplier when the artifact states it) or ``cache`` (``values`` is cos, ``sin`` the sin cache,
    rows are positions ``first_position, first_position + 1, ...``; ``layout`` says how columns map
    to pairs: ``half`` is one column per pair). ``layer_type`` is the layer type the artifact says
    it serves (``None``: any); ``regime`` is ``short``/``long`` for a longrope table; ``dtype`` the
    dtype it was stored in; ``where`` a one-line location inside the artifact.
    """

    where: str
    kind: Kind
    values: npt.NDArray[np.float64]
    dtype: str
    sin: npt.NDArray[np.float64] | None = None
    magnitude: float | None = None
    layout: str = "half"
    layer_type: str | None = None
    regime: str | None = None
    first_position: int = 0
    angles: str = "float32"
    """How the producer formed the angles: ``float32`` (tolerance grows with position) or ``exact``."""


@attrs.frozen
class ServedArtifact:
    """Everything read from one artifact: its tables, who produced it, and what its engine does
    at run time that the tables alone do not say (``rules``), plus findings about the file itself."""

    path: str
    kind: str
    tables: tuple[ServedTable, ...]
    producer: str = ""
    rules: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    engine: dict[str, Any] = attrs.field(factory=dict)


def check_regular_file(path: str, argument: str) -> os.stat_result:
    """``path``'s stat if it is a regular file (a FIFO or device is refused before it is opened)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ArgumentError(argument, f"{path}: no such file") from None
    except OSError as error:
        raise ArgumentError(argument, f"{path}: cannot read: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ArgumentError(argument, f"{path}: not a regular file")
    return info


def read_artifact(
    path: str | os.PathLike[str],
    *,
    dtype: str | None = None,
    width: int | None = None,
    sin: str | os.PathLike[str] | None = None,
    layout: str = "neox",
    n_ctx: int | None = None,
) -> ServedArtifact:
    """Every table in the artifact at ``path``: an ONNX model or pack directory, a ``.gguf``, a
    ``.safetensors`` state dict's ``*inv_freq`` tensors, or an array file (``.npy``, raw
    ``.f64``/``.f32``/``.f16``; with ``sin``, a cos/sin cache pair). Pickles are never unpickled.

    ``n_ctx`` is the context a llama.cpp server allocates (it picks longrope's factors by it).
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        from .onnx_served import read_onnx

        return read_onnx(name)
    suffix = os.path.splitext(name)[1].lower()
    if suffix == ".onnx":
        from .onnx_served import read_onnx

        return read_onnx(name)
    if suffix == ".gguf":
        from .gguf_served import read_gguf

        return read_gguf(name, n_ctx=n_ctx)
    if suffix == ".safetensors":
        from .safetensors_served import read_safetensors

        return read_safetensors(name)
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
        if suffix == ".npy":
            mapped = np.load(name, mmap_mode="r", allow_pickle=False)
            array = np.array(mapped)
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
    except (OSError, ValueError, TypeError, EOFError) as error:
        raise ArgumentError("served", f"{name}: cannot read: {error}") from None
    if array.ndim not in (1, 2) or array.size == 0 or not np.issubdtype(array.dtype, np.floating):
        raise ArgumentError("served", f"{name}: expected a 1-D inv_freq or a 2-D cos/sin cache of floats, "
                            f"got {array.dtype} {array.shape}")
    return np.asarray(array, dtype=np.float64)


def half_columns(values: npt.NDArray[np.float64], layout: str, pairs: int | None = None) -> npt.NDArray[np.float64]:
    """One column per pair from a cache in ``layout`` (``half`` is returned as is)."""
    if layout == "half":
        return values
    count = values.shape[1] // 2 if pairs is None else pairs
    return values[:, :count] if layout == "neox" else values[:, 0 : 2 * count : 2]
