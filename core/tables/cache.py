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

What survives derivation: ``layout``, ``part``, ``rope_type`` and ``layer_type`` describe the
columns, and are kept by every view that keeps them (row slices, ``.view()``), found on the array the
view was made from; a view that changes the last axis (a column slice, a transpose, a reshape of it) and
anything that makes a new array (arithmetic, ``astype``, a fancy-indexed copy) describes nothing, and
:func:`ropekit.apply_rotary` refuses to guess a layout for it (state one). ``attention_factor`` and
``positions`` describe the array ``cos_sin`` returned and are ``None`` on anything made from it (a row
slice holds other positions; ``2 * cos`` another factor). Pickling keeps them. Why no
``__array_finalize__``: numpy calls a Python one on every view and result, and a decode step's two
views would pay it (about 0.4 us of a 7 us call).
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

    _meta: tuple[int, int, str, str, str | None, str | None] | None = None
    """``(width, step, layout, part, rope_type, layer_type)``: what the columns are, and the last axis's
    width and step (in items) the description holds for. Shared by arrays derived from this one."""
    _origin: tuple[float | None, Any] | None = None
    """``(attention_factor, positions as given or snapshotted)``: set on the array ``cos_sin`` returned only."""

    # No __array_finalize__: numpy calls a Python one on every view, slice and result (2.5k instructions
    # each, a decode step's tag makes two). A view or slice keeps its base, the described array, and
    # _field finds the description there; anything else (arithmetic, astype, a fancy-indexed copy) is
    # a CosSinArray that describes nothing, which apply_rotary refuses to guess a layout for.

    def _described(self) -> tuple[int, int, str, str, str | None, str | None] | None:
        """The description of this array or of the described array it is a view of."""
        found: CosSinArray | None = self
        while found is not None:
            meta = found.__dict__.get("_meta")
            if meta is not None:
                return meta  # type: ignore[no-any-return]
            base = found.base
            found = base if isinstance(base, CosSinArray) else None
        return None

    def _field(self, index: int) -> Any:
        """Field ``index`` of the description, if the last axis is still the columns it was made for
        (a column slice, a transpose or a reshape changes them)."""
        meta = self._described()
        if meta is None or self.ndim < 1 or not self.itemsize:
            return None
        if self.shape[-1] != meta[0] or self.strides[-1] // self.itemsize != meta[1]:
            return None
        return meta[index]

    @property
    def derived(self) -> bool:
        """Whether this array came from a described cache but no longer says what it is (arithmetic,
        ``astype``, a copy, changed columns): :func:`ropekit.apply_rotary` then needs an explicit layout."""
        return self.layout is None

    @property
    def layout(self) -> str | None:
        """``neox``, ``gptj`` or ``half``; ``None`` once the columns were changed (a column slice, a transpose)."""
        layout: str | None = self._field(2)
        return layout

    @property
    def part(self) -> str | None:
        """``cos`` or ``sin`` (``None`` once the columns were changed)."""
        part: str | None = self._field(3)
        return part

    @property
    def rope_type(self) -> str | None:
        """The rope_type of the table that made the array."""
        rope_type: str | None = self._field(4)
        return rope_type

    @property
    def layer_type(self) -> str | None:
        """The layer type of the table that made the array."""
        layer_type: str | None = self._field(5)
        return layer_type

    @property
    def attention_factor(self) -> float | None:
        """The factor multiplied into the values (``None`` on an array derived from the one ``cos_sin`` returned)."""
        return self._origin[0] if self._origin is not None else None

    @property
    def positions(self) -> range | npt.NDArray[np.int64] | None:
        """The positions of the rows: a ``range``, or a read-only int64 array (``None`` on a derived array)."""
        if self._origin is None:
            return None
        given = self._origin[1]
        if given is None or isinstance(given, range):
            return given
        array = np.array(given, dtype=np.int64)
        array.flags.writeable = False
        return array

    def __reduce__(self) -> tuple[Any, ...]:
        reduced = super().__reduce__()
        assert isinstance(reduced, tuple)
        meta = self._described() if self.layout is not None else None
        return reduced[0], reduced[1], (reduced[2], meta, self._origin)

    def __setstate__(self, state: Any) -> None:
        base, self._meta, self._origin = state
        super().__setstate__(base)

    def __repr__(self) -> str:
        base = np.asarray(self).__repr__()
        if self.layout is None:  # derived past what it described: an array like any other
            return base
        return f"CosSinArray({self.part}, layout={self.layout!r}, {base})"


def _snapshot(positions: Any) -> Any:
    """The positions a result is at, kept so that a later change to the caller's list or array cannot
    alter them (cheaply: a tuple or a copy; made an array only when asked for)."""
    kind = type(positions)
    if kind is int or kind is range:
        return range(positions) if kind is int else positions
    if kind is list or kind is tuple:
        return tuple(positions)
    if kind is np.ndarray:
        return positions.copy()
    if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
        return range(int(positions))
    try:
        return np.array(positions, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return None


def tag(
    pair: tuple[npt.NDArray[Any], npt.NDArray[Any]],
    layout: str,
    attention_factor: float | None,
    positions: Any,
    rope_type: str | None = None,
    layer_type: str | None = None,
) -> tuple[CosSinArray, CosSinArray]:
    """``pair`` (two C-contiguous arrays, as every cos/sin path makes or checks them) as two
    :class:`CosSinArray` views, no copy, describing what they hold. On every call's path: kept lean."""
    first, second = pair
    kind = type(positions)
    kept = positions.copy() if kind is np.ndarray else positions if kind is range else _snapshot(positions)
    origin = (attention_factor, kept)
    width = first.shape[-1] if first.ndim else 0
    # out= buffers that are CosSinArray (an earlier result) are described in place: they hold these values
    # now; a plain array is viewed (a view of a plain array keeps the description for its own slices:
    # numpy makes a slice's base the first view up the chain that is not of the slice's own type)
    cos = first if type(first) is CosSinArray else first.view(CosSinArray)
    cos._meta = (width, 1, layout, "cos", rope_type, layer_type)
    cos._origin = origin
    sin = second if type(second) is CosSinArray else second.view(CosSinArray)
    sin._meta = (width, 1, layout, "sin", rope_type, layer_type)
    sin._origin = origin
    return cos, sin
