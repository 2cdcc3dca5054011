"""How :func:`ropekit.tables.mrope.mrope_cos_sin` computes rows at multimodal positions.

A row's columns follow different position axes, but each column's value is still one complex
product ``factor * exp(i p f)``. Tokens are taken in chunks of :data:`CHUNK_TOKENS`; for each
chunk, each axis's products are formed from the text path's tables (:mod:`ropekit.tables.fill`),
gathered into one complex row of pairs per token, and that row is split once into the cache's
layout, exactly as a text row is. Every product is computed in the work dtype and only copied
afterwards, so the result does not depend on the chunking or the threads.

Which arithmetic an axis gets is decided once per call, from all of its positions: a *run* (its
positions span less than ``2 * count + 4096``) is a contiguous run from the axis's lowest position
(:func:`~ropekit.tables.fill.run_products`: base rows rounded from that position; a run of at most
four positions directly, :func:`~ropekit.tables.fill.direct_products`); otherwise each position on its
own (:func:`~ropekit.tables.fill.position_products`, the text path's arithmetic). These are the bits
3-axis positions have always had. The text path now rounds every position from its own block
(a value depends only on its position), so 1-D positions on a 3-axis table and the same positions
stacked on every axis agree within 2 float32 ulps, not always bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .fill import borrowed, direct_products, position_products, run_products, store_chunk, work_dtype
from .plan import BLOCK, Plan, unit_circle
from .small import split
from .workers import available_cores, run_all

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["CHUNK_TOKENS", "DIRECT", "KEPT_BASES", "SMALL_TOKENS", "AxisPart", "Slots", "fill_axes", "run_slots",
           "small_axes"]

CHUNK_TOKENS = 2048
"""Tokens per chunk: a chunk's row of pairs is 1 MiB of complex64 at 64 pairs, the text path's chunk size
(the kept scratch is about 2.6 MiB per thread in float32). Each chunk forms its axes' products over whole
blocks around its own positions, so smaller chunks form shared blocks again and make more numpy calls:
measured on image-heavy Qwen3-VL positions, one thread, 4096 tokens, 1024-token chunks took 975 us
(127 us of products), 2048 took 783 us (77 us), 4096 took 685 us; the bits do not depend on it."""
SMALL_TOKENS = 64
"""The most tokens :func:`small_axes` takes (a decode step, a few speculative tokens)."""
DIRECT = 4
"""The text path evaluates runs of this few positions directly (no tables)."""
_ROWS_PER_THREAD = 8192
"""The fewest tokens a thread is given: four times the text path's, since a chunk's per-axis numpy calls
are small and two threads contend for the GIL between them (measured on 2 cores, image-heavy Qwen2.5-VL
positions, two threads against one: 1.6x slower at 4096 tokens, 1.2x at 8192, 1.3x faster at 16384)."""


class AxisPart(NamedTuple):
    """One axis of a composition: its plan (the axis's distinct frequencies) and the
    ``(target, source)`` segments placing the plan's columns among the row's pair slots."""

    axis: int
    plan: Plan
    segments: Sequence[tuple[Any, Any]]


class _Mode(NamedTuple):
    part: AxisPart
    positions: npt.NDArray[np.int64]
    kind: str  # "run", "direct" or "scattered"
    low: int
    run_length: int


def _mode(part: AxisPart, positions: npt.NDArray[np.int64]) -> _Mode:
    low, high = int(positions.min()), int(positions.max())
    if high - low < 2 * positions.shape[0] + 4096:  # a run about as long as the positions
        count = high - low + 1
        return _Mode(part, positions, "direct" if count <= DIRECT else "run", low, count)
    return _Mode(part, positions, "direct" if positions.shape[0] <= DIRECT else "scattered", low, 0)


def fill_axes(
    parts: Sequence[AxisPart], rows: npt.NDArray[np.int64], slots: int, cos: npt.NDArray[Any],
    sin: npt.NDArray[Any], layout: str, threads: int | None,
) -> None:
    """``cos``/``sin`` (``(tokens, width)``, float32 or float64) at ``rows`` (``(axes, tokens)``),
    each token's ``slots`` pair slots composed from ``parts`` and split into ``layout``."""
    modes = [_mode(part, rows[part.axis]) for part in parts]
    tokens = rows.shape[1]
    wanted = max(1, min(available_cores() if threads is None else threads, tokens // _ROWS_PER_THREAD))
    if wanted == 1:
        _fill_tokens(modes, 0, tokens, slots, cos, sin, layout)
        return
    for mode in modes:  # built once, before the threads
        mode.part.plan.offsets(np.complex128 if cos.dtype == np.float64 else np.complex64)
        mode.part.plan.steps()
    per = -(-tokens // wanted)
    run_all([functools.partial(_fill_tokens, modes, low, min(tokens, low + per), slots, cos, sin, layout)
             for low in range(0, tokens, per)])


def _fill_tokens(modes: Sequence[_Mode], begin: int, end: int, slots: int, cos: npt.NDArray[Any],
                 sin: npt.NDArray[Any], layout: str) -> None:
    work = np.complex128 if cos.dtype == np.float64 else np.complex64
    # float16 and bfloat16 take a directly evaluated value from float64 in one rounding, as the
    # text path does: such rows are kept in complex128 (the other products widen exactly)
    wide = work is np.complex128 or (cos.dtype != np.float32 and any(mode.kind == "direct" for mode in modes))
    row_work = np.complex128 if wide else work
    widest = max(mode.part.plan.freq.shape[0] for mode in modes)
    size = CHUNK_TOKENS * slots
    gptj32 = cos.dtype == np.float32 and layout == "gptj"
    extra = size if gptj32 else 0  # gptj's integer temporary
    products = (4 * CHUNK_TOKENS + 2 * BLOCK) * widest  # one axis's products and its gathers
    with borrowed(row_work, size + 1 + extra + (products if row_work is work else 0)) as scratch:
        temporary = scratch[size + 1 : size + 1 + extra].view(np.uint64) if gptj32 else None
        if row_work is work:
            _chunks(modes, begin, end, slots, cos, sin, layout, scratch, scratch[size + 1 + extra :], temporary)
        else:
            with borrowed(work, products) as spare:
                _chunks(modes, begin, end, slots, cos, sin, layout, scratch, spare, temporary)


def _chunks(modes: Sequence[_Mode], begin: int, end: int, slots: int, cos: npt.NDArray[Any], sin: npt.NDArray[Any],
            layout: str, scratch: npt.NDArray[Any], spare: npt.NDArray[Any],
            temporary: npt.NDArray[np.uint64] | None) -> None:
    for low in range(begin, end, CHUNK_TOKENS):
        high = min(end, low + CHUNK_TOKENS)
        n = high - low
        row = scratch[: n * slots].reshape(n, slots)  # + 1 spare element after it: see store_products
        for mode in modes:
            _place(mode, low, high, row, spare)
        store_chunk(scratch, n, slots, cos[low:high], sin[low:high], layout, temporary)


def _place(mode: _Mode, low: int, high: int, row: npt.NDArray[Any], spare: npt.NDArray[Any]) -> None:
    """This axis's products for tokens ``low .. high - 1`` into their slots of ``row``, formed in
    ``spare``'s dtype (the text path's work dtype)."""
    plan = mode.part.plan
    pairs = plan.freq.shape[0]
    positions = mode.positions[low:high]
    n = positions.shape[0]
    if mode.kind == "run":
        relative = positions - mode.low
        first, last = int(relative.min()) // BLOCK, int(relative.max()) // BLOCK
        count = min(mode.run_length - first * BLOCK, (last - first + 1) * BLOCK)
        # the scratch, unless the chunk's positions are spread over more of the run than it holds
        used = count * pairs if count * pairs <= spare.shape[0] else 0
        products = spare[:used].reshape(count, pairs) if used else np.empty((count, pairs), dtype=spare.dtype)
        run_products(plan, mode.low, first, count, products)
        # each token's row of products, gathered whole (contiguous rows into a contiguous array: numpy's
        # fast take; a take into the slots' strided columns copies its source and its output once more),
        # then copied into the slots
        if used + n * pairs <= spare.shape[0]:
            gathered = spare[used : used + n * pairs].reshape(n, pairs)
        else:
            gathered = np.empty((n, pairs), dtype=spare.dtype)
        np.take(products, relative - first * BLOCK, axis=0, out=gathered, mode="clip")
        for target, source in mode.part.segments:
            row[:, target] = gathered[:, source]
        return
    if mode.kind == "direct":
        products = direct_products(plan, positions, row.dtype.type)
    else:
        products = spare[: n * pairs].reshape(n, pairs)
        operands = spare[n * pairs : 3 * n * pairs].reshape(2, n, pairs)
        position_products(plan, positions, products, operands)
    for target, source in mode.part.segments:
        row[:, target] = products[:, source]


class Slots(NamedTuple):
    """What :func:`small_axes` needs of one composition, computed once per table: each pair
    slot's ``axis`` and ``freq`` (index into the full table), the frequencies themselves, block 0's
    step row at them, and the run base rows already formed (:func:`run_slots`), keyed by the
    work dtype and each axis's lowest position."""

    axis: npt.NDArray[np.intp]
    freq: npt.NDArray[np.intp]
    frequencies: npt.NDArray[np.float64]
    step0: npt.NDArray[np.complex128]
    bases: dict[Any, tuple[npt.NDArray[Any], npt.NDArray[np.int64], npt.NDArray[Any]]] | None = None
    identity: bool = False
    """Slot ``s`` is frequency ``s`` of the full table (every composition at one column per pair)."""
    spread: dict[int, npt.NDArray[np.intp]] | None = None
    """Per token count ``n``: element ``[t, s]`` is ``(axis[s] * n + t) * pairs + freq[s]``, where slot
    ``s`` of token ``t`` finds its offset among the offset-table rows gathered at every axis's positions
    (:func:`run_slots`)."""

    @classmethod
    def of(cls, full: Plan, axis: npt.NDArray[np.intp], freq: npt.NDArray[np.intp]) -> Slots:
        identity = freq.shape[0] == full.freq.shape[0] and bool(np.all(freq == np.arange(freq.shape[0])))
        return cls(axis, freq, full.freq[freq], full.steps()[0, freq], {}, identity, {})


KEPT_BASES = 1024
"""How many run base rows (one per set of axis lows) a composition keeps: 512 KiB of complex64 at 64 slots."""


def small_axes(
    full: Plan, slots: Slots, rows: npt.NDArray[np.int64], lows: Sequence[int], highs: Sequence[int],
    cos: npt.NDArray[Any], sin: npt.NDArray[Any], layout: str,
) -> bool:
    """A few tokens whose every axis is a run inside one block or at most four positions: each
    slot's product formed at once over all slots, with the values :func:`fill_axes` gives (a run's
    base row ``factor * exp(i low f)`` times offset row ``p - low``; a short run directly), from the
    full table's ``full`` plan. ``False`` (nothing written) when the call is not such a one."""
    tokens = rows.shape[1]
    if tokens > SMALL_TOKENS:
        return False
    direct = []
    for low, high in zip(lows, highs, strict=True):
        count = high - low + 1
        if count > BLOCK:  # past one block: the general path (a run of at most 256 is always a run)
            return False
        direct.append(count <= DIRECT)
    work = work_dtype(cos.dtype)
    axis = slots.axis
    if not any(direct):
        products = run_slots(full, slots, rows, lows, work)
    else:
        wide = work is np.complex128 or cos.dtype != np.float32  # float16 / bfloat16: one rounding from float64
        products = unit_circle(rows[axis].T.astype(np.float64) * slots.frequencies, full.factor,
                               np.complex128 if wide else work)
        if not all(direct):
            runs = ~np.asarray(direct)[axis]
            products[:, runs] = run_slots(full, Slots(axis[runs], slots.freq[runs], slots.frequencies[runs],
                                                       slots.step0[runs]), rows, lows, work)
    split(products, cos, sin, layout)
    return True


def run_slots(full: Plan, slots: Slots, rows: npt.NDArray[np.int64], lows: Sequence[int],
              work: Any, *, same: bool = False) -> npt.NDArray[Any]:
    """Run slots inside their run's first block: ``factor * exp(i low f)`` (times block 0's step
    row, as :func:`~ropekit.tables.fill.base_rows` forms it) times offset row ``p - low``.
    ``same``: every row of ``rows`` is the same (text tokens), so each token's offsets are one
    row of the offset table (the same operands, so the same bits).

    The base row depends only on the axes' lows: it is kept in ``slots.bases`` (when given), so a
    call at lows seen before forms no float64 cos/sin (the bits are those of forming it afresh)."""
    axis = slots.axis
    key = (work, *lows)
    kept = slots.bases
    found = None if kept is None else kept.get(key)
    if found is None:
        slot_low = np.asarray(lows, dtype=np.int64)[axis]
        base = (unit_circle(slot_low * slots.frequencies, full.factor, np.complex128) * slots.step0).astype(work)
        found = (base, np.asarray(lows, dtype=np.int64)[:, None], full.offsets(work))
        if kept is not None:
            if len(kept) >= KEPT_BASES:
                kept.clear()
            kept[key] = found
    base, low_column, offsets = found
    products: npt.NDArray[Any]
    if same and slots.identity:  # every axis at the same positions (text tokens): whole offset rows
        products = offsets.take(rows[0] - lows[0], 0)
    else:
        tokens = rows.shape[1]
        spread = None if slots.spread is None else slots.spread.get(tokens)
        if spread is None:
            spread = (axis[None, :] * tokens + np.arange(tokens)[:, None]) * offsets.shape[1] + slots.freq[None, :]
            if slots.spread is not None:  # at most SMALL_TOKENS entries
                slots.spread[tokens] = spread
        # offset row p - low at every axis's positions (whole rows: numpy's cheap gather), then each
        # slot's element from its own axis's row (the same values as one element gather per slot)
        gathered = offsets.take((rows - low_column).reshape(-1), 0)
        products = gathered.reshape(-1).take(spread)
    np.multiply(base, products, out=products)  # base first, as the text path
    return products
