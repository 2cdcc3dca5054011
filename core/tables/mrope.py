"""Multimodal RoPE (mrope): which position axis and which frequency feed each cos/sin column.

A multimodal model gives every token several positions (temporal, height, width: ``(3, seq)``
position ids) and its rotary module composes one cos/sin row from them: column ``c`` is
``cos(positions[axis[c]] * inv_freq[freq[c]])``. How the columns are split among the axes is the
model code's *composition*; the config only says the section sizes (``mrope_section``). The
compositions transformers' classes use (each one observed on the class's own rotary module by
``scripts/transformers_classes.py``):

- ``sections``: consecutive pairs, section ``i`` on axis ``i % 3`` (Qwen2-VL, Qwen2.5-VL, GLM-4V).
- ``interleaved``: pairs cycle T, H, W, the H and W cycles stopping after their section's count
  (Qwen3-VL, Qwen3.5, ``mrope_interleaved``).
- ``paired_hw``: the pairs of the first two sections alternate H, W, H, W (the two sections must
  be equal), the third section's pairs follow T (ERNIE-4.5-VL; its module stores ``inv_freq``
  pre-permuted so that, after its recomposition, frequencies are in the usual order).
- ``full_width``: the sections, doubled, cut the full rotate-half width, section ``i`` on axis
  ``i``: the two halves of one pair may follow different axes (HunYuan-VL's XD-RoPE; ``neox`` only).
- ``row_col``: two axes alternating pair by pair (NeoMMe).

Positions given as one row (``(seq,)``, text) stand for the same position on every axis, as
transformers broadcasts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from .axes import DIRECT, SMALL_TOKENS, AxisPart, Slots, fill_axes, run_slots, small_axes
from .fill import work_dtype
from .plan import BLOCK, Plan, checked_out
from .rotary import cos_sin, out_dtype
from .small import split

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "COMPOSITIONS", "Composition", "MropeMap", "axes_of", "describe_axes", "mrope_cos_sin", "section_problem",
    "small_runs",
    "split_positions",
]

Composition = Literal["sections", "interleaved", "paired_hw", "full_width", "row_col"]
COMPOSITIONS: tuple[str, ...] = ("sections", "interleaved", "paired_hw", "full_width", "row_col")


def axes_of(composition: str, section: Sequence[int]) -> int:
    """How many position axes ``composition`` reads (rows of its position ids)."""
    if composition == "row_col":
        return 2
    if composition == "full_width":
        return len(section)
    return 3


def section_problem(composition: str, section: Sequence[int], pairs: int) -> str | None:
    """Why ``section`` cannot compose ``pairs`` frequency pairs the ``composition`` way (``None``: it can)."""
    if composition == "row_col":
        return None if pairs % 2 == 0 else f"row/col alternation needs an even number of pairs, got {pairs}"
    if composition == "interleaved":
        return None if len(section) == 3 else f"interleaved sections need three entries (T, H, W), got {list(section)}"
    if sum(section) != pairs:
        return f"sections {list(section)} sum to {sum(section)}; they must sum to rotary_dim / 2 = {pairs}"
    if composition == "paired_hw" and (len(section) != 3 or section[0] != section[1]):
        return f"ERNIE-style sections pair H with W: expected three sections, the first two equal, got {list(section)}"
    return None


def _half_map(composition: str, section: Sequence[int], pairs: int) -> tuple[list[int], list[int]]:
    """``(axis, freq)`` per pair slot, for compositions where both members of a pair agree."""
    axis: list[int] = []
    freq: list[int] = []
    if composition == "sections":
        start = 0
        for index, size in enumerate(section):
            axis += [index % 3] * size
            freq += list(range(start, start + size))
            start += size
    elif composition == "interleaved":
        axis = [0] * pairs
        for dim, offset in ((1, 1), (2, 2)):
            for slot in range(offset, min(3 * section[dim], pairs), 3):
                axis[slot] = dim
        freq = list(range(pairs))
    elif composition == "paired_hw":
        axis = [1, 2] * section[0] + [0] * section[2]
        freq = list(range(pairs))
    elif composition == "row_col":
        axis = [slot % 2 for slot in range(pairs)]
        freq = list(range(pairs))
    else:
        raise ArgumentError("composition", f"unknown mrope composition {composition!r}; valid: "
                            f"{', '.join(COMPOSITIONS)}")
    return axis, freq


class MropeMap:
    """The column map of one table in one cache layout: ``axis[c]`` and ``freq[c]`` per column.

    ``identity`` is true when the frequencies are in the layout's usual order (only the axes
    differ from a text table), so 1-D positions need no gather.
    """

    __slots__ = ("_plan", "axes", "axis", "freq", "half", "identity", "layout")

    def __init__(self, composition: str, section: Sequence[int], pairs: int, layout: str) -> None:
        problem = section_problem(composition, section, pairs)
        if problem is not None:
            raise ArgumentError("mrope_section", problem)
        self.half: MropeMap | None = None
        """The same composition at one column per pair (``None``: a pair's halves differ, HunYuan)."""
        if composition == "full_width":
            if layout != "neox":
                raise ArgumentError("layout", f"HunYuan-style full-width sections cut the rotate-half width; a "
                                    f"{layout} cache cannot hold them (the two halves of a pair follow different "
                                    "axes); valid: neox")
            axis = [index for index, size in enumerate(section) for _ in range(2 * size)]
            freq = list(range(pairs)) * 2
        else:
            half_axis, half_freq = _half_map(composition, section, pairs)
            if layout == "neox":
                axis, freq = half_axis * 2, half_freq * 2
            elif layout == "gptj":
                axis = [a for a in half_axis for _ in range(2)]
                freq = [f for f in half_freq for _ in range(2)]
            else:
                axis, freq = half_axis, half_freq
        self.axes = axes_of(composition, section)
        self.axis = np.asarray(axis, dtype=np.intp)
        self.freq = np.asarray(freq, dtype=np.intp)
        self.layout = layout
        usual = {"neox": list(range(pairs)) * 2, "gptj": [f for f in range(pairs) for _ in range(2)],
                 "half": list(range(pairs))}[layout]
        self.identity = freq == usual
        if composition != "full_width":
            self.half = self if layout == "half" else MropeMap(composition, section, pairs, "half")
        self._plan: list[tuple[int, npt.NDArray[np.intp], list[tuple[Any, Any]]]] | None = None

    def plan_by_axis(self) -> list[tuple[int, npt.NDArray[np.intp], list[tuple[Any, Any]]]]:
        """Per axis: its distinct frequencies and the ``(column target, frequency source)``
        segments placing them (strided slices where possible); computed once per map."""
        if self._plan is None:
            self._plan = [(axis, frequencies, _segments(columns, where))
                          for axis, columns, frequencies, where in self.by_axis()]
        return self._plan

    def by_axis(self) -> list[tuple[int, npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]]:
        """Per axis that feeds some column: ``(axis, columns, frequencies, where)`` such that column
        ``columns[j]`` is frequency ``frequencies[where[j]]`` (``frequencies`` distinct, sorted)."""
        found = []
        for axis in range(self.axes):
            columns = np.flatnonzero(self.axis == axis)
            if columns.size:
                frequencies, where = np.unique(self.freq[columns], return_inverse=True)
                found.append((axis, columns, frequencies, where.reshape(-1)))
        return found


def split_positions(positions: Any, axes: int) -> tuple[npt.NDArray[np.int64] | None, tuple[int, ...]]:
    """Multimodal positions as ``(axes, n)`` int64 plus the leading shape of the result (``(seq,)``
    or ``(batch, seq)``); ``(None, ())`` when ``positions`` is not a multi-row array (a count, a
    range or 1-D positions: the text case)."""
    if isinstance(positions, (int, np.integer, range, bool, np.bool_)):
        return None, ()
    try:
        array = np.asarray(positions)
    except (TypeError, ValueError, OverflowError):
        return None, ()
    if array.ndim <= 1:
        return None, ()
    if array.ndim not in (2, 3) or array.shape[0] != axes:
        raise ArgumentError("positions", f"expected {axes} rows of positions, shape ({axes}, seq) or ({axes}, batch, "
                            f"seq), got shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise ArgumentTypeError("positions", f"expected integer positions, got dtype {array.dtype}")
    return array.reshape(axes, -1), tuple(array.shape[1:])


def mrope_cos_sin(
    inv_freq: npt.NDArray[np.float64],
    attention_factor: float,
    mapping: MropeMap,
    positions: Any,
    *,
    dtype: npt.DTypeLike,
    out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None,
    threads: int | None,
    plans: dict[Any, Any],
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """cos/sin of a multimodal table: each axis's columns computed by the text path (float64
    angles, one rounding) on that axis's positions, then placed in their columns (exact copies).

    ``positions``: ``(axes, seq)`` or ``(axes, batch, seq)`` gives ``(seq, width)`` or
    ``(batch, seq, width)``; a count, a range or 1-D positions (text) give ``(seq, width)``.
    ``plans`` caches the per-axis :class:`Plan` objects (the table keeps it).
    """
    if (type(positions) is np.ndarray and positions.dtype == _INT64 and positions.ndim in (2, 3)
            and positions.shape[0] == mapping.axes):  # int64 rows of positions: no conversion, no type checks
        small = small_runs(mapping, positions, dtype, out, plans)
        if small is not None:
            return small
        rows: npt.NDArray[np.int64] | None = positions.reshape(mapping.axes, -1)
        lead: tuple[int, ...] = positions.shape[1:]
    else:
        rows, lead = split_positions(positions, mapping.axes)
    full = plans.get("full")
    if full is None:
        full = plans["full"] = Plan(inv_freq, attention_factor)
        full.kept = None  # as a multimodal table's own plan: no kept rows (see RopeTable._plan)
    if rows is None:
        if mapping.identity:
            return cos_sin(full, 0.0, positions, dtype=dtype, layout=mapping.layout, out=out, threads=threads)
        half_cos, half_sin = cos_sin(full, 0.0, positions, dtype=dtype, layout="half", threads=threads)
        shape = (half_cos.shape[0], mapping.freq.shape[0])
        if out is None:
            return half_cos[:, mapping.freq], half_sin[:, mapping.freq]
        cos, sin = checked_out(out, shape, out_dtype(dtype))
        np.take(half_cos, mapping.freq, axis=1, out=cos)
        np.take(half_sin, mapping.freq, axis=1, out=sin)
        return cos, sin
    width = mapping.freq.shape[0]
    shape = (*lead, width)
    chosen = out_dtype(dtype)
    if out is None:
        both = np.empty((2, *shape), dtype=chosen)
        cos, sin = both[0], both[1]
    else:
        cos, sin = checked_out(out, shape, chosen)
    if rows.shape[1] == 0:  # no positions: no rows, as the text path gives (0, width)
        return cos, sin
    rows, lows, highs = _checked_rows(rows, full.limit)
    flat_cos, flat_sin = cos.reshape(-1, width), sin.reshape(-1, width)
    # a pair's two halves following different axes (HunYuan) are composed column by column;
    # otherwise each pair once, then split into the layout as a text row is
    composed, layout = (mapping, "half") if mapping.half is None else (mapping.half, mapping.layout)
    slots = plans.get(("slots", composed.layout))
    if slots is None:
        slots = plans[("slots", composed.layout)] = Slots.of(full, composed.axis, composed.freq)
        plans[("small", mapping.layout)] = (full, slots, layout)
    if small_axes(full, slots, rows, lows, highs, flat_cos, flat_sin, layout):
        return cos, sin
    fill_axes(_parts(inv_freq, attention_factor, composed, plans), rows, composed.freq.shape[0], flat_cos, flat_sin,
              layout, threads)
    return cos, sin


def small_runs(mapping: MropeMap, positions: npt.NDArray[np.int64], dtype: npt.DTypeLike,
                out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None,
                plans: dict[Any, Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """The decode step of a batch: at most :data:`SMALL_TOKENS` tokens of int64 positions whose every
    axis is a run of 5 to 256 positions (or, for float32 and float64 output, one position), the values
    :func:`small_axes` gives (each slot's run base row, kept per set of lows, times its offset row),
    without the general path's conversions and checks.
    ``None`` when the call is not such a one, or before the first multimodal call on this layout
    (which sets up what this path reads): the general path serves or refuses it."""
    known = plans.get(("small", mapping.layout))
    if known is None:
        return None
    rows = positions.reshape(mapping.axes, -1)
    tokens = rows.shape[1]
    if not 0 < tokens <= SMALL_TOKENS:
        return None
    full, slots, layout = known
    listed = rows.tolist()
    first = listed[0]
    same = listed.count(first) == len(listed)  # text tokens (every generated one): each axis at one position
    limit = full.limit
    chosen = _F32 if dtype is _F32_TYPE else out_dtype(dtype)
    # an axis at one position (an image's temporal axis, a row's height) is served directly from float64,
    # rounded once: exactly its run base row times offset row 0 (exp(0) = 1 + 0j), when the work dtype is
    # the output's (float16 and bfloat16 take the direct value from complex128 instead)
    single = chosen in (_F32, _F64)
    # lowest and highest of each axis (Python's sort on a few mostly ordered ints beats a min and a max),
    # checked as they are found: one pass over the axes
    lows: list[int] = []
    for row in (first,) if same else listed:
        ordered = sorted(row)
        low, high = ordered[0], ordered[-1]
        if low < 0 or high > limit or not (DIRECT < high - low + 1 <= BLOCK or (single and high == low)):
            return None
        lows.append(low)
    if same:
        lows *= len(listed)
    width = mapping.freq.shape[0]
    shape = (*positions.shape[1:], width)
    if out is None:
        both = np.empty((2, *shape), dtype=chosen)
        cos, sin = both[0], both[1]
    else:
        cos, sin = checked_out(out, shape, chosen)
    products = run_slots(full, slots, rows, lows, _C64 if chosen is _F32 else work_dtype(chosen), same=same)
    if len(shape) == 2:
        split(products, cos, sin, layout)
    else:
        split(products, cos.reshape(tokens, width), sin.reshape(tokens, width), layout)
    return cos, sin


_F32_TYPE, _F32, _F64, _C64 = np.float32, np.dtype(np.float32), np.dtype(np.float64), np.complex64


def _parts(inv_freq: npt.NDArray[np.float64], attention_factor: float, mapping: MropeMap,
           plans: dict[Any, Any]) -> list[AxisPart]:
    """Each axis of ``mapping`` with its plan (kept in ``plans``, one per axis's frequencies) and
    the segments placing its columns."""
    key = ("parts", mapping.layout)
    found: list[AxisPart] | None = plans.get(key)
    if found is None:
        found = []
        for axis, frequencies, segments in mapping.plan_by_axis():
            plan_key = ("axis", axis, mapping.layout, frequencies.tobytes())
            plan = plans.get(plan_key)
            if plan is None:
                plan = plans[plan_key] = Plan(inv_freq[frequencies], attention_factor)
            found.append(AxisPart(axis, plan, segments))
        plans[key] = found
    return found


_INT64 = np.dtype(np.int64)


def _checked_rows(rows: npt.NDArray[Any], limit: int) -> tuple[npt.NDArray[np.int64], list[int], list[int]]:
    """``rows`` as int64 once every position lies in ``[0, limit]`` (compared before the cast: a
    uint64 cannot wrap), with each row's lowest and highest position; else an error naming the
    positions given and their axis."""
    if rows.shape[1] <= SMALL_TOKENS:  # a decode step: Python's min and max on a few ints beat two reductions
        listed = rows.tolist()
        lows, highs = [min(row) for row in listed], [max(row) for row in listed]
    else:
        lows, highs = rows.min(axis=1).tolist(), rows.max(axis=1).tolist()
    for axis, (low, high) in enumerate(zip(lows, highs, strict=True)):
        if low < 0 or high > limit:
            raise ArgumentError("positions", f"positions must lie in [0, {limit}], got {low}..{high} in row {axis} "
                                f"(of {rows.shape[0]} axes)")
    return rows.astype(np.int64, copy=False), lows, highs


def _segments(columns: npt.NDArray[np.intp], where: npt.NDArray[np.intp]) -> list[tuple[Any, Any]]:
    """``(target, source)`` index pairs covering ``columns[j] <- where[j]``: strided slices where
    both advance evenly (a section, an interleaved cycle: a strided copy), else index arrays."""
    found: list[tuple[Any, Any]] = []
    start, count = 0, columns.shape[0]
    while start < count:
        stop = start + 1
        if stop < count and where[stop] == where[start] + 1:
            step = int(columns[stop] - columns[start])
            while (stop < count and step > 0 and columns[stop] - columns[stop - 1] == step
                   and where[stop] == where[stop - 1] + 1):
                stop += 1
        else:
            step = 1
        if stop - start > 1:
            found.append((slice(int(columns[start]), int(columns[stop - 1]) + 1, step),
                          slice(int(where[start]), int(where[stop - 1]) + 1)))
        else:
            found.append((slice(int(columns[start]), int(columns[start]) + 1), slice(int(where[start]),
                                                                                     int(where[start]) + 1)))
        start = stop
    if len(found) > 16:  # scattered columns: one gather beats many small copies
        return [(columns, where)]
    return found


def describe_axes(composition: str | None, section: Sequence[int], pairs: int, layout: str,
                  observed: Sequence[int], *, names: Sequence[str] = ()) -> str | None:
    """What a module whose columns follow the ``observed`` axes serves, in words, when that is not
    the declared composition (``None``: it is). Tried: text positions on every column, another
    composition of the same sections, the same composition with the sections reordered; columns
    on an axis the declaration does not have are named first (``names``: what each observed axis
    is, for such an axis)."""
    seen = np.asarray(observed)
    if composition is None:
        if seen.size and np.all(seen == 0):
            return None
        return f"multimodal sections over {int(seen.max()) + 1} axes where the declaration is a text table"
    declared = MropeMap(composition, section, pairs, layout)
    if seen.shape == declared.axis.shape and np.array_equal(seen, declared.axis):
        return None
    if seen.size and np.all(seen == 0):
        return ("text positions on every column: the temporal axis drives them all, so image and video tokens get "
                f"no height/width positions (declared: {composition} sections {list(section)})")
    if seen.shape == declared.axis.shape and seen.size and int(seen.max()) >= declared.axes:
        return _foreign_axes(composition, section, pairs, layout, seen, declared, names)
    import itertools

    for other in COMPOSITIONS:
        for order in dict.fromkeys(itertools.permutations(section)):
            if other == composition and list(order) == list(section):
                continue
            try:
                candidate = MropeMap(other, order, pairs, layout)
            except ArgumentError:
                continue
            if candidate.axis.shape == seen.shape and np.array_equal(candidate.axis, seen):
                if other == composition:
                    return f"sections {list(order)} where the declaration has {list(section)} ({composition})"
                return (f"{_named(other, order)} where the model's code composes "
                        f"{_named(composition, section)}")
    counts = {axis: int(np.sum(seen == axis)) for axis in sorted(set(seen.tolist()))}
    return (f"an unidentified composition of the axes (columns per axis: {counts}; declared: {composition} "
            f"{list(section)})")


_AXIS_NAMES = ("temporal", "height", "width")


def _foreign_axes(composition: str, section: Sequence[int], pairs: int, layout: str, seen: npt.NDArray[Any],
                  declared: MropeMap, names: Sequence[str]) -> str:
    """Columns on axes the declared composition does not have: which, where the model's code puts
    them, and what the other columns do."""
    parts = []
    for axis in sorted({int(a) for a in seen[seen >= declared.axes]}):
        columns = np.flatnonzero(seen == axis)
        owners = sorted({int(declared.axis[c]) for c in columns})
        name = names[axis] if axis < len(names) else f"position axis {axis}"
        wanted = " and ".join(_AXIS_NAMES[o] if o < len(_AXIS_NAMES) else f"axis {o}" for o in owners)
        label = "pairs" if layout == "half" else "columns"
        parts.append(f"{label} {columns.tolist()} follow {name} where the model's code gives them the {wanted} axis")
    rest = np.where(seen >= declared.axes, declared.axis, seen)
    other = describe_axes(composition, section, pairs, layout, [int(a) for a in rest])
    if other is not None:
        parts.append(f"and the other columns: {other}")
    return "; ".join(parts) + f" (declared: {_named(composition, section)})"


def _named(composition: str, section: Sequence[int]) -> str:
    """``composition`` sections in words: ``sections [8, 12, 12]``, ``interleaved sections [8, 12, 12]``."""
    return f"sections {list(section)}" if composition == "sections" else f"{composition} sections {list(section)}"
