"""How :func:`ropekit.tables.rotary.cos_sin` computes its rows: complex products of float64 tables.

For a position ``p = 256 q + r``, ``exp(i p f) = exp(i 256 q f) * exp(i r f)``: block ``q``'s base
row times row ``r`` of the plan's offset table, both evaluated in float64 and rounded once to
complex64 (complex128 for float64 output), so each output pair costs one complex multiply instead
of two transcendentals, and each value depends only on its position (not on the call, the run's
start, the chunking or the threads that form it).
Base rows are themselves products of float64 unit-circle values (:func:`base_rows`), never of a
float32 angle. The products are split into cos and sin by integer casts that write the output
layout in the same pass (:func:`store_products`): numpy has no planar complex multiply, and a
strided copy of the real parts costs twice as much.

Work arrays are kept per thread (:func:`borrowed`, at most a few MiB each), so a call never
faults in fresh temporaries.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .plan import BLOCK, STEPS, Plan, unit_circle
from .workers import available_cores, run_all

if TYPE_CHECKING:
    import numpy.typing as npt


__all__ = ["base_rows", "borrowed", "direct_products", "fill_positions", "fill_run", "give_scratch",
           "position_products", "run_products", "span_products", "store_chunk", "take_scratch", "work_dtype"]

_CHUNK_PRODUCTS = 131072  # products per numpy call (1 MiB of complex64): fewer calls beat a smaller cache footprint
_ROWS_PER_THREAD = 2048  # the fewest positions a thread is given


_scratch = threading.local()


@contextlib.contextmanager
def borrowed(work: Any, size: int) -> Iterator[npt.NDArray[Any]]:
    """A flat work array of at least ``size`` elements, kept per thread and reused across calls
    and tables, so a call never faults in fresh temporaries. It is taken out of the thread's
    store while in use: a nested call on the same thread (a signal handler, a ``__del__``) gets
    a fresh one instead of overwriting it."""
    found = take_scratch(work, size)
    try:
        yield found
    finally:
        give_scratch(work, found)


def take_scratch(work: Any, size: int) -> npt.NDArray[Any]:
    """:func:`borrowed` without the context manager, for the hot paths: take the thread's work
    array of ``work`` (a numpy scalar type), at least ``size`` elements; hand it back with
    :func:`give_scratch` (not handing it back only costs a fresh one next time)."""
    try:
        store: dict[Any, npt.NDArray[Any]] = _scratch.store
    except AttributeError:
        store = _scratch.store = {}
    found = store.pop(work, None)
    if found is None or found.shape[0] < size:
        found = np.empty(size, dtype=work)
    return found


def give_scratch(work: Any, found: npt.NDArray[Any]) -> None:
    _scratch.store[work] = found


def fill_positions(plan: Plan, where: npt.NDArray[np.int64], cos: Any, sin: Any, layout: str) -> None:
    """Arbitrary positions: ``p = 256 q + r``, the product of block ``q``'s base row (one per
    distinct block, as in :func:`base_rows` from position 0) and offset row ``r``, gathered."""
    count = where.shape[0]
    work = work_dtype(cos.dtype)
    pairs = plan.freq.shape[0]
    size = min(count, _CHUNK_PRODUCTS // pairs + 1)
    block_size = size * pairs
    gptj32 = cos.dtype == np.float32 and layout == "gptj"
    # products (+ 1 spare, see store_products), two gathers, and gptj's integer temporary
    with borrowed(work, (4 if gptj32 else 3) * block_size + 1) as scratch:
        products = scratch[: block_size + 1]
        gathered = scratch[block_size + 1 : 3 * block_size + 1].reshape(2, size, pairs)
        temporary = scratch[3 * block_size + 1 : 4 * block_size + 1].view(np.uint64) if gptj32 else None
        for begin in range(0, count, size):
            chunk = where[begin : begin + size]
            n = chunk.shape[0]
            position_products(plan, chunk, products[: n * pairs].reshape(n, pairs), gathered[:, :n])
            store_chunk(products, n, pairs, cos[begin : begin + n], sin[begin : begin + n], layout, temporary)


def position_products(plan: Plan, where: npt.NDArray[np.int64], products: npt.NDArray[Any],
                      gathered: npt.NDArray[Any]) -> None:
    """``factor * exp(i p f)`` for each position ``p`` of ``where`` into ``products`` (``(n, pairs)``,
    the work dtype), through ``gathered`` (``(2, n, pairs)``, the same dtype): block ``p // 256``'s
    base row times offset row ``p % 256``. A value depends only on its position."""
    block, offset = np.divmod(where, BLOCK)
    blocks, which = _distinct(block)
    groups, group_of = _distinct(blocks // STEPS)
    far = unit_circle((BLOCK * STEPS * groups.astype(np.float64))[:, None] * plan.freq[None, :],
                      plan.factor, np.complex128)
    bases = (far[group_of] * plan.steps()[blocks % STEPS]).astype(products.dtype)
    np.take(bases, which, axis=0, out=gathered[0])
    np.take(plan.offsets(products.dtype.type), offset, axis=0, out=gathered[1])
    np.multiply(gathered[0], gathered[1], out=products)


def direct_products(plan: Plan, where: npt.NDArray[Any], work: Any) -> npt.NDArray[Any]:
    """``factor * exp(i p f)`` with each angle formed in float64 and evaluated directly, rounded
    once to ``work``: what a 3-axis axis of at most four positions serves (:mod:`ropekit.tables.axes`)."""
    return unit_circle(where.astype(np.float64)[:, None] * plan.freq[None, :], plan.factor, work)


def run_products(plan: Plan, start: int, first: int, count: int, products: npt.NDArray[Any]) -> None:
    """Rows ``256 * first .. 256 * first + count - 1`` of the run from ``start`` into ``products``
    (``(count, pairs)``, the work dtype): block ``k``'s base row (:func:`base_rows`) times the
    offset rows, bit for bit what :func:`fill_run` computes for those rows."""
    work = products.dtype.type
    offsets = plan.offsets(work)
    done = 0
    block = first
    while done < count:
        group = min(-(-(count - done) // BLOCK), STEPS - block % STEPS)  # blocks sharing one far row
        bases = base_rows(plan, start, block, group, work)
        rows = min(count - done, group * BLOCK)
        whole, tail = divmod(rows, BLOCK)
        if whole:
            np.multiply(bases[:whole, None, :], offsets,
                        out=products[done : done + whole * BLOCK].reshape(whole, BLOCK, -1))
        if tail:
            np.multiply(bases[whole], offsets[:tail], out=products[done + whole * BLOCK : done + rows])
        done += rows
        block += group


def _distinct(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(table, index)`` with ``table[index] == values``: the whole span when it is short (no
    sort), else the distinct values."""
    low, high = int(values.min()), int(values.max())
    if high - low <= 2 * values.shape[0] + 64:
        return np.arange(low, high + 1), values - low
    table, index = np.unique(values, return_inverse=True)
    return table, index.reshape(-1)


def fill_run(plan: Plan, start: int, count: int, cos: Any, sin: Any, layout: str, threads: int | None) -> None:
    """Positions ``start .. start + count - 1``, on up to ``threads`` threads (``None``: the cores
    available) but at least 2048 positions each, in slices on block boundaries. Each value is
    :func:`span_products`', a function of its position alone, so the result depends neither on the
    run's start nor on the number of threads."""
    # at most the threads asked for (None: the cores), and no thread gets fewer than 2048
    # positions: below that, waking a helper costs more than it saves
    threads = max(1, min(available_cores() if threads is None else threads, count // _ROWS_PER_THREAD))
    if threads == 1:
        _fill_span(plan, start, count, cos, sin, layout)
        return
    plan.offsets(work_dtype(cos.dtype))  # built once, before the threads
    plan.steps()
    # slices end on block boundaries; the caller starts at once, a helper some 20 us later: the
    # caller's slice takes a block more
    first = start // BLOCK
    blocks = -(-(start + count) // BLOCK) - first
    per = max(1, (blocks - 1) // threads)
    sizes = [blocks - per * (threads - 1)] + [per] * (threads - 1)
    jobs = []
    low = start
    for size in sizes:
        first += size
        high = min(start + count, first * BLOCK)
        if high > low:
            jobs.append(functools.partial(_fill_span, plan, low, high - low, cos[low - start : high - start],
                                          sin[low - start : high - start], layout))
        low = high
    run_all(jobs)


def span_products(plan: Plan, low: int, count: int, products: npt.NDArray[Any]) -> None:
    """``factor * exp(i p f)`` for positions ``p = low .. low + count - 1`` into ``products``
    (``(count, pairs)``, the work dtype): block ``p // 256``'s base row (the one
    :func:`position_products` and the decode-step path form) times offset row ``p % 256``, so every
    value depends only on its position, whichever call, slice or thread forms it."""
    head = min(count, -low % BLOCK)
    if head:  # the rest of a block begun before low
        block = low // BLOCK
        base = base_rows(plan, 0, block, 1, products.dtype.type)[0]
        np.multiply(base, plan.offsets(products.dtype.type)[low % BLOCK : low % BLOCK + head], out=products[:head])
    if count > head:
        run_products(plan, 0, (low + head) // BLOCK, count - head, products[head:])


def base_rows(plan: Plan, start: int, first: int, blocks: int, work: Any) -> npt.NDArray[Any]:
    """``factor * exp(i (start + 256 k) f)`` for blocks ``k = first .. first + blocks - 1``, all
    in one group of 64 (``k // 64`` equal).

    Each row is ``(start_row * far) * steps[k % 64]`` in complex128, rounded once to ``work``:
    ``start_row`` and ``far`` (the group's ``exp(i 16384 (k // 64) f)``) are float64 cos/sin,
    ``steps`` is the plan's. As exact as evaluating each block's angle in float64, without a
    float64 cos/sin per block, and a function of ``(start, k)`` alone: slices agree bit for bit.
    The plan keeps the rows of the groups last asked for (:meth:`Plan.run_bases`).
    """
    group, near = divmod(first, STEPS)
    return plan.run_bases(start, group, work)[near : near + blocks]


def work_dtype(out: np.dtype[Any]) -> Any:
    return np.complex128 if out == np.float64 else np.complex64


def _store(values: npt.NDArray[Any], out: npt.NDArray[Any], layout: str) -> None:
    """Write ``values`` (..., pairs) into ``out`` in ``layout``, casting once.

    neox views a row as (2, pairs) and broadcasts the values into both halves in one pass; gptj
    writes the even and the odd columns (a (pairs, 2) broadcast is slower in numpy); half is the
    values themselves.
    """
    pairs = values.shape[-1]
    if layout == "neox":
        out.reshape(*out.shape[:-1], 2, pairs)[...] = values[..., None, :]
    elif layout == "gptj":
        out[..., 0::2] = values
        out[..., 1::2] = values
    else:
        out[...] = values


def _fill_span(plan: Plan, low: int, count: int, cos: Any, sin: Any, layout: str) -> None:
    """Positions ``low .. low + count - 1`` into ``cos`` and ``sin``.

    ``exp(i (base + r) f) = exp(i base f) * exp(i r f)``: one complex multiply per element, a
    block's base row times the plan's offset table, in chunks of about 128k products
    (:func:`span_products`) written straight into the outputs in their layout.
    """
    work = work_dtype(cos.dtype)
    pairs = plan.freq.shape[0]
    chunk_rows = max(1, min(STEPS, _CHUNK_PRODUCTS // (BLOCK * pairs))) * BLOCK
    chunk = chunk_rows * pairs
    gptj32 = cos.dtype == np.float32 and layout == "gptj"
    scratch = take_scratch(work, (2 if gptj32 else 1) * chunk + 1)  # + 1 spare: see store_products
    temporary = scratch[chunk + 1 : 2 * chunk + 1].view(np.uint64) if gptj32 else None
    for done in range(0, count, chunk_rows):
        rows = min(chunk_rows, count - done)
        span_products(plan, low + done, rows, scratch[: rows * pairs].reshape(rows, pairs))
        store_chunk(scratch, rows, pairs, cos[done : done + rows], sin[done : done + rows], layout, temporary)
    give_scratch(work, scratch)


def store_chunk(scratch: npt.NDArray[Any], rows: int, pairs: int, cos: Any, sin: Any, layout: str,
                 temporary: npt.NDArray[np.uint64] | None) -> None:
    if cos.dtype == np.float32:
        store_products(scratch, rows, pairs, cos, sin, layout, temporary)
    else:
        products = scratch[: rows * pairs].reshape(rows, pairs)
        _store(products.real, cos, layout)
        _store(products.imag, sin, layout)


_LITTLE_U8, _LITTLE_U4 = np.dtype("<u8"), np.dtype("<u4")
_LOW32, _TWICE = np.uint64(0xFFFFFFFF), np.uint64(0x100000001)


def store_products(scratch: npt.NDArray[np.complex64], rows: int, pairs: int, cos: Any, sin: Any, layout: str,
                    temporary: npt.NDArray[np.uint64] | None) -> None:
    """Split complex64 products into float32 cos and sin without strided copies.

    Each product is 8 bytes, ``(real, imag)``. Read as little-endian uint64, its low 32 bits are
    the real part's bits; read from 4 bytes further on (hence the scratch's spare element), the
    imaginary part's. An integer cast to little-endian uint32 then writes those bits in place,
    with the layout's broadcast in the same pass. On any host the bytes land as they were.
    """
    raw = scratch.view(np.uint8)
    real = np.ndarray((rows, pairs), _LITTLE_U8, raw, 0)
    if layout == "gptj":  # each output uint64 is the 32 bits twice: (bits & low32) * 0x100000001
        assert temporary is not None
        spare = temporary[: rows * pairs].reshape(rows, pairs)
        np.bitwise_and(real, _LOW32, out=spare)
        np.multiply(spare, _TWICE, out=cos.view(_LITTLE_U8))
        np.right_shift(real, np.uint64(32), out=spare)
        np.multiply(spare, _TWICE, out=sin.view(_LITTLE_U8))
        return
    imag = np.ndarray((rows, pairs), _LITTLE_U8, raw, 4)
    for target, bits in ((cos, real), (sin, imag)):
        view = target.view(_LITTLE_U4)
        if layout == "neox":
            np.copyto(view.reshape(rows, 2, pairs), bits[:, None, :], casting="unsafe")
        else:
            np.copyto(view, bits, casting="unsafe")
