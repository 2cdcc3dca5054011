"""cos/sin arrays that know what they are: :class:`CosSinArray`.

A cos/sin cache is only right when it is applied in the layout it was built in: a ``gptj``
(interleaved) cache applied as ``neox`` (rotate-half) rotates Llama-3.1-8B's queries 5.67 away
from the right result, and nothing in two plain float arrays can tell. So
:meth:`RopeTable.cos_sin <ropekit.RopeTable.cos_sin>` returns its two arrays as
:class:`CosSinArray`, an ``ndarray`` subclass carrying

- ``layout``: ``neox``, ``gptj`` or ``half`` (how the columns are arranged),
- ``part``: ``"cos"`` or ``"sin"``,
- ``attention_factor``: the factor already multiplied in,
- ``positions``: the positions of the rows (a ``range``, or a read-only int64 array),
- ``rope_type`` and ``layer_type`` of the table that made them,

and :func:`ropekit.apply_rotary` reads ``layout`` from them, refusing an explicit layout that
contradicts it and a sin passed as cos. Why a subclass rather than a result object holding two
plain arrays: the call every user writes is ``cos, sin = table.cos_sin(...)``, and the unpacked
arrays are what reach ``apply_rotary``, ``torch.from_numpy`` and an engine's buffers; a result
object's knowledge would be gone at the first unpacking. A subclass keeps it on the arrays,
costs one view per array (well under a microsecond), and is still an ``ndarray`` everywhere one
is accepted.

What survives derivation: ``layout`` and ``part`` describe the columns, so they are kept by
anything that keeps the columns (row slices, ``astype``, elementwise arithmetic) and dropped
(the result is a plain-described array, ``layout`` ``None``) by anything that changes the last
dimension (column slices, transposes, reshapes). ``attention_factor`` and ``positions`` describe
the array ``cos_sin`` returned and are ``None`` on anything derived from it (a row slice holds
other positions; ``2 * cos`` another factor). Pickling keeps all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["CosSinArray", "tag"]


class CosSinArray(np.ndarray[Any, np.dtype[Any]]):
    """A cos or sin array from :meth:`RopeTable.cos_sin <ropekit.RopeTable.cos_sin>`, carrying its
    ``layout``, ``part``, ``attention_factor``, ``positions``, ``rope_type`` and ``layer_type``
    (see :mod:`ropekit.tables.cache` for what survives slicing and arithmetic)."""

    _columns: tuple[int, int] | None
    """``(width, step)`` of the last axis the description holds for (``step`` in items)."""
    _described: tuple[str, str, str | None, str | None] | None
    """``(layout, part, rope_type, layer_type)``: what the columns are."""
    attention_factor: float | None
    positions: range | npt.NDArray[np.int64] | None

    def __array_finalize__(self, obj: Any) -> None:
        self._columns = getattr(obj, "_columns", None)
        self._described = getattr(obj, "_described", None)
        self.attention_factor = None
        self.positions = None

    def _holds(self) -> bool:
        """Whether the last axis is still the columns the description was made for: checked when
        asked, since numpy finalizes a transpose before it permutes the axes."""
        if self._columns is None or self.ndim < 1 or not self.itemsize:
            return False
        return (self.shape[-1], self.strides[-1] // self.itemsize) == self._columns

    def _field(self, index: int) -> str | None:
        return self._described[index] if self._described is not None and self._holds() else None

    @property
    def layout(self) -> str | None:
        """``neox``, ``gptj`` or ``half``; ``None`` once the columns were changed (a column slice, a transpose)."""
        return self._field(0)

    @property
    def part(self) -> str | None:
        """``cos`` or ``sin`` (``None`` once the columns were changed)."""
        return self._field(1)

    @property
    def rope_type(self) -> str | None:
        """The rope_type of the table that made the array."""
        return self._field(2)

    @property
    def layer_type(self) -> str | None:
        """The layer type of the table that made the array."""
        return self._field(3)

    def __reduce__(self) -> tuple[Any, ...]:
        reduced = super().__reduce__()
        assert isinstance(reduced, tuple)
        return reduced[0], reduced[1], (reduced[2], self._state())

    def __setstate__(self, state: Any) -> None:
        base, (self._columns, self._described, self.attention_factor, self.positions) = state
        super().__setstate__(base)

    def _state(self) -> tuple[Any, ...]:
        return self._columns, self._described, self.attention_factor, self.positions

    def __repr__(self) -> str:
        base = np.asarray(self).__repr__()
        if self.layout is None:  # derived past what it described: an array like any other
            return base
        return f"CosSinArray({self.part}, layout={self.layout!r}, {base})"


def _kept_positions(positions: Any) -> range | npt.NDArray[np.int64] | None:
    """The positions a result is at, kept so that a later change to the caller's list cannot alter them."""
    if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
        return range(int(positions))
    if isinstance(positions, range):
        return positions
    try:
        kept = np.array(positions, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return None
    kept.flags.writeable = False
    return kept


def tag(
    pair: tuple[npt.NDArray[Any], npt.NDArray[Any]],
    layout: str,
    *,
    attention_factor: float | None,
    positions: Any,
    rope_type: str | None = None,
    layer_type: str | None = None,
) -> tuple[CosSinArray, CosSinArray]:
    """``pair`` as two :class:`CosSinArray` views (no copy) describing what they hold."""
    kept = _kept_positions(positions)
    result = []
    for array, part in zip(pair, ("cos", "sin"), strict=True):
        view = array.view(CosSinArray)
        holds = array.ndim and array.itemsize
        view._columns = (array.shape[-1], array.strides[-1] // array.itemsize) if holds else None
        view._described = (layout, part, rope_type, layer_type)
        view.attention_factor = attention_factor
        view.positions = kept
        result.append(view)
    return result[0], result[1]
