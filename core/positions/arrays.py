"""The array arguments of :func:`ropekit.position_ids`, checked and normalised.

Every problem raises :class:`~ropekit.ArgumentError` (a wrong value or shape) or
:class:`~ropekit.ArgumentTypeError` (a wrong type or dtype) naming the argument and what would be
valid; nothing here lets a numpy error through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["LARGEST", "grid", "input_ids", "mask", "seconds", "token_types"]

LARGEST = 1 << 62
"""No grid side, duration product or position may reach this (int64 arithmetic stays exact below it)."""


def _array(value: Any, name: str, expected: str) -> npt.NDArray[Any]:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as error:  # ragged nesting, unconvertible objects
        raise ArgumentTypeError(name, f"expected {expected}: {error}") from None
    return array


def _integers(value: Any, name: str, expected: str) -> npt.NDArray[Any]:
    array = _array(value, name, expected)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise ArgumentTypeError(name, f"expected {expected}, got dtype {array.dtype} shape {array.shape}")
    return array


def input_ids(value: Any) -> npt.NDArray[Any]:
    """``input_ids`` as a ``(batch, seq)`` integer array with at least one row and one column."""
    expected = "a (batch, seq) integer array (pad rows to one length and give attention_mask)"
    array = _integers(value, "input_ids", expected)
    if array.ndim != 2:
        hint = "; for one sequence give input_ids[None]" if array.ndim == 1 else ""
        raise ArgumentError("input_ids", f"expected {expected}, got shape {array.shape}{hint}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ArgumentError("input_ids", f"expected at least one row and one token, got shape {array.shape}")
    return array


def mask(value: Any, shape: tuple[int, ...]) -> npt.NDArray[np.bool_]:
    """``attention_mask`` as booleans of ``shape`` (``None``: every token kept); every row keeps a token."""
    if value is None:
        return np.ones(shape, dtype=np.bool_)
    expected = f"a {shape} array of 0/1 or booleans, like input_ids"
    array = _array(value, "attention_mask", expected)
    if array.shape != shape:
        raise ArgumentError("attention_mask", f"expected shape {shape} (that of input_ids), got {array.shape}")
    if array.dtype != np.bool_:
        if not np.issubdtype(array.dtype, np.integer):
            raise ArgumentTypeError("attention_mask", f"expected {expected}, got dtype {array.dtype}")
        if ((array != 0) & (array != 1)).any():
            values = np.unique(array).tolist()
            raise ArgumentError("attention_mask", f"expected only 0 and 1, got values {values}")
    kept = array.astype(np.bool_)
    empty = np.flatnonzero(~kept.any(axis=1))
    if empty.size:
        raise ArgumentError("attention_mask", f"row {int(empty[0])} masks every token; each row needs at least one")
    return kept


def token_types(value: Any, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """``mm_token_type_ids`` as int64 of ``shape``, each 0 (text), 1 (image) or 2 (video)."""
    expected = f"a {shape} integer array like input_ids: 0 text, 1 image, 2 video"
    array = _integers(value, "mm_token_type_ids", expected)
    if array.shape != shape:
        raise ArgumentError("mm_token_type_ids", f"expected shape {shape} (that of input_ids), got {array.shape}")
    bad = (array < 0) | (array > 2)
    if bad.any():
        row, column = (int(index) for index in np.argwhere(bad)[0])
        raise ArgumentError("mm_token_type_ids", f"expected 0 (text), 1 (image) or 2 (video), got "
                            f"{array[row, column]} at [{row}, {column}] (audio, 3, has no rule here)")
    return array.astype(np.int64)


def grid(value: Any, name: str) -> npt.NDArray[np.int64]:
    """``image_grid_thw`` / ``video_grid_thw`` as an ``(n, 3)`` int64 array of positive (t, h, w)."""
    expected = "an (n, 3) integer array of (t, h, w) rows, one per image or video"
    if value is None:
        return np.zeros((0, 3), dtype=np.int64)
    array = _integers(value, name, expected)
    if array.size == 0 and array.ndim in (1, 2) and array.shape[0] == 0:
        return np.zeros((0, 3), dtype=np.int64)  # no images (or videos)
    if array.ndim != 2 or array.shape[1] != 3:
        raise ArgumentError(name, f"expected {expected}, got shape {array.shape}")
    if array.size and (array.min() < 1 or array.max() >= LARGEST):
        row = int(np.argwhere((array < 1) | (array >= LARGEST))[0][0])
        raise ArgumentError(name, f"row {row} is {tuple(array[row].tolist())}; t, h and w must be positive")
    return array.astype(np.int64)


def seconds(value: Any, count: int) -> npt.NDArray[Any]:
    """``second_per_grid_ts``: ``count`` finite non-negative durations, in the dtype transformers
    computes with. A list or tuple is read as Python numbers are by torch (floats: float32, the
    processor's tensor; integers: int64); an array keeps its dtype (float32, float64 or integer)."""
    name = "second_per_grid_ts"
    expected = f"{count} non-negative seconds, one per row of video_grid_thw"
    if isinstance(value, (list, tuple)):
        if any(isinstance(item, (bool, np.bool_)) for item in value):
            raise ArgumentTypeError(name, f"expected {expected}, got a bool")
        python_floats = any(isinstance(item, float) for item in value)
        array = _array(value, name, expected)
        if python_floats and array.dtype == np.float64:
            with np.errstate(over="ignore"):
                narrowed = array.astype(np.float32)
            if np.isfinite(array).all() and not np.isfinite(narrowed).all():
                raise ArgumentError(name, f"{array.tolist()} overflows float32, the dtype a list is read in; "
                                    "give a float64 array")
            array = narrowed
        elif array.size == 0:
            array = array.astype(np.int64)
    else:
        array = _array(value, name, expected)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer) or array.dtype in (np.float32,
                                                                                                np.float64)):
        raise ArgumentTypeError(name, f"expected {expected} (float32, float64 or integers), got dtype {array.dtype}")
    if array.ndim != 1 or array.shape[0] != count:
        raise ArgumentError(name, f"expected {expected}, got shape {array.shape}")
    if array.size and not (np.isfinite(array).all() and (array >= 0).all()):
        raise ArgumentError(name, f"expected {expected}, got {array.tolist()}")
    return array
