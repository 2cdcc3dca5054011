"""Finished cos/sin rows for a serving engine: computed once, then copied or gathered per call.

An engine serves positions ``0 .. max_model_len - 1`` for the life of a model load and asks for a
few of them on every decode step and a few thousand on every prefill chunk. :class:`RopeRows`
holds the rows :meth:`RopeTable.cos_sin <ropekit.RopeTable.cos_sin>` gives for ``range(count)``
(those values, bit for bit, in one dtype and layout: a value depends only on its position, so any
other call gives the same bits), so that a call costs what copying its rows
costs: a contiguous run is one slice copy, scattered positions one gather. This is what engines'
own ``cos_sin_cache`` buffers are; the memory is ``2 * count * width * itemsize`` bytes (1 KiB per
position for a 128-wide float32 head).
"""

from __future__ import annotations

import operator
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from ..errors import ArgumentError, ArgumentTypeError
from .cache import CosSinArray, tag
from .plan import checked_out

__all__ = ["RopeRows"]

_RUN = 64
"""Above this many positions, an array of consecutive positions is copied as one slice."""


@attrs.frozen(eq=False)
class RopeRows:
    """The cos/sin rows of positions ``0 .. count - 1`` of one table (:meth:`RopeTable.rows
    <ropekit.RopeTable.rows>`), read-only, in ``dtype`` and ``layout``."""

    cos_rows: npt.NDArray[Any] = attrs.field(repr=False)
    sin_rows: npt.NDArray[Any] = attrs.field(repr=False)
    layout: str
    attention_factor: float | None = None
    rope_type: str | None = None
    layer_type: str | None = None

    @property
    def count(self) -> int:
        """How many positions the rows cover (``0 .. count - 1``)."""
        return int(self.cos_rows.shape[0])

    @property
    def dtype(self) -> np.dtype[Any]:
        """The rows' dtype."""
        return self.cos_rows.dtype

    def cos_sin(
        self, positions: Any, *, out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = None,
    ) -> tuple[CosSinArray, CosSinArray]:
        """``(cos, sin)`` at ``positions`` (a count ``N``, a ``range`` or integers, each below
        :attr:`count`), copied into ``out`` when given (two arrays of shape ``(N, width)`` in
        :attr:`dtype`), else into new arrays: never views of the rows. Positions outside the rows
        raise :class:`~ropekit.ArgumentError`; the values are ``table.cos_sin(range(count))``'s rows.
        Like the table's, the arrays are :class:`~ropekit.CosSinArray` carrying their layout."""
        return tag(self._cos_sin(positions, out), self.layout, self.attention_factor, positions, self.rope_type,
                   self.layer_type)

    def _cos_sin(
        self, positions: Any, out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None,
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        count = self.count
        if type(positions) is int or (isinstance(positions, (int, np.integer)) and not isinstance(positions, bool)):
            if positions < 0:
                raise ArgumentError("positions", f"expected a count of positions (0 or more), got {positions!r}")
            positions = range(operator.index(positions))
        if isinstance(positions, range):
            if not len(positions):
                return self._copy(slice(0, 0), 0, out)
            if len(positions) and (min(positions[0], positions[-1]) < 0 or max(positions[0], positions[-1]) >= count):
                raise ArgumentError("positions", f"{positions} is outside the rows, which cover 0..{count - 1}; "
                                    "take table.rows() with a larger count")
            if positions.step == 1:
                return self._copy(slice(positions.start, positions.stop), len(positions), out)
            positions = np.arange(positions.start, positions.stop, positions.step, dtype=np.int64)
        where = self._indices(positions)
        size = int(where.shape[0])
        if size > _RUN and int(where[-1]) - int(where[0]) == size - 1 and bool((np.diff(where) == 1).all()):
            start = int(where[0])  # a prefill chunk's positions, given as an array: one slice copy, not a gather
            return self._copy(slice(start, start + size), size, out)
        return self._copy(where, size, out)

    def _indices(self, positions: Any) -> npt.NDArray[np.intp]:
        if isinstance(positions, (str, bytes, float, bool)) or positions is None:
            raise ArgumentTypeError("positions", f"expected a count, a range or integers, got {positions!r}")
        where = np.asarray(positions)
        if where.ndim != 1 or where.dtype.kind not in "iu":
            if where.ndim == 1 and where.size == 0:
                return np.empty(0, dtype=np.intp)
            raise ArgumentError("positions", f"expected one row of integers, got shape {where.shape} of "
                                f"{where.dtype}")
        if where.size and (int(where.min()) < 0 or int(where.max()) >= self.count):
            raise ArgumentError("positions", f"{int(where.min())}..{int(where.max())} is outside the rows, which "
                                f"cover 0..{self.count - 1}; take table.rows() with a larger count")
        return where.astype(np.intp, copy=False)

    def _copy(self, where: slice | npt.NDArray[np.intp], count: int, out: tuple[Any, Any] | None,
              ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        width = self.cos_rows.shape[1]
        if out is None:
            cos = np.empty((count, width), dtype=self.dtype)
            sin = np.empty((count, width), dtype=self.dtype)
        else:
            cos, sin = checked_out(out, (count, width), self.dtype)
        if isinstance(where, slice):
            np.copyto(cos, self.cos_rows[where])
            np.copyto(sin, self.sin_rows[where])
        else:
            np.take(self.cos_rows, where, axis=0, out=cos)
            np.take(self.sin_rows, where, axis=0, out=sin)
        return cos, sin
