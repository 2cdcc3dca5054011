"""Finished rows a table keeps for positions it is asked for again (a serving engine's prefill).

Every request's first prefill chunk covers positions ``0 .. 4095`` again, and a long prompt's later
chunks the positions after them: the same rows, call after call. A plan keeps the finished cos/sin
rows of positions ``0 .. n - 1`` (per dtype and layout) once a second call has needed rows it did not
hold, and serves every later call inside them by copying (a run) or gathering (an array) its rows:
what an engine's own ``cos_sin_cache`` does, without the engine sizing it. Each value depends only on
its position (:func:`ropekit.tables.fill.span_products`), so a kept row is bit for bit what computing
it again gives: whether a call was served from kept rows cannot be seen in its result.

The memory is bounded: at most :func:`row_budget` bytes across every table of the process (default
32 MiB: 32,768 positions of a 128-wide float32 head), the rows of the table least recently served
dropped first to make room, and rows that would take most of the budget from other tables' are not
kept; positions past the budget are computed on every call. A one-off call (a table taken
:meth:`~ropekit.RopeTable.at` a new length for one forward) keeps nothing: rows are kept from the
second call that needs them, and freed with their table. A call grows the rows by at most a few
times its own positions (doubling aside): a few positions far out are computed, not paid for with
every row below them.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .plan import BLOCK

if TYPE_CHECKING:
    import numpy.typing as npt

    from .plan import Plan

__all__ = ["DEFAULT_ROW_BUDGET", "kept_bytes", "row_budget", "serve_kept", "set_row_budget"]

DEFAULT_ROW_BUDGET = 32 << 20
"""Bytes of finished rows the process keeps, across every table, unless :func:`set_row_budget` says
otherwise: 32,768 positions of a 128-wide float32 head, in one table or shared among several."""

_SPAN = 4
"""A call grows the rows by at most this many times its own positions (doubling aside): a few scattered
positions far out (a decode batch) are computed, not paid for with every row below them."""

_budget = [DEFAULT_ROW_BUDGET]
_grow = threading.Lock()  # growth is rare: one lock for every plan, never waited for
_trim = [False]  # a smaller budget set while rows were growing: trimmed when the growth ends
_held: OrderedDict[int, weakref.ref[_Kept]] = OrderedDict()  # every table's kept rows, least recently used first


def row_budget() -> int:
    """The most bytes of finished cos/sin rows the process keeps, across every table."""
    return _budget[0]


def set_row_budget(nbytes: int) -> int:
    """Keep at most ``nbytes`` of finished cos/sin rows across every table of the process (``0``:
    keep none; every call computes its rows). Returns the previous budget. Rows already kept past
    a smaller budget are dropped, least recently used first."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise ArgumentError("nbytes", f"expected a number of bytes (0 or more), got {nbytes!r}")
    previous, _budget[0] = _budget[0], int(nbytes)
    if _grow.acquire(blocking=False):
        try:
            _make_room(0, None)
        finally:
            _grow.release()
    else:  # rows are growing (on another thread, or on this one, interrupted): trimmed when that ends
        _trim[0] = True
    return previous


def kept_bytes() -> int:
    """Bytes of finished rows kept right now, across every table."""
    return sum(kept.nbytes for kept in _alive())


class _Kept:
    """The rows of positions ``0 .. count - 1`` (read-only, ``rows``: one tuple, replaced whole),
    and whether a call has needed rows they did not hold."""

    __slots__ = ("__weakref__", "missed", "rows")

    def __init__(self) -> None:
        self.rows: tuple[int, npt.NDArray[Any] | None, npt.NDArray[Any] | None] = (0, None, None)
        self.missed = False

    @property
    def nbytes(self) -> int:
        cos = self.rows[1]
        return 0 if cos is None else 2 * cos.nbytes


def serve_kept(plan: Plan, where: tuple[int, int] | npt.NDArray[np.int64], count: int, dtype: np.dtype[Any],
               layout: str, cos: npt.NDArray[Any], sin: npt.NDArray[Any], threads: int | None) -> bool:
    """Fill ``cos``/``sin`` from the plan's kept rows (growing them on a repeated miss within the
    budget) and say so; ``False``: the caller computes the rows itself."""
    end = where[0] + count if isinstance(where, tuple) else int(where.max()) + 1
    key = (dtype, layout)
    store = plan.kept
    assert store is not None
    kept = store.get(key)
    if kept is None:
        kept = store.setdefault(key, _Kept())
    held, rows_cos, rows_sin = kept.rows
    if end > held:
        width = cos.shape[1]
        most = _budget[0] // (2 * width * dtype.itemsize) // BLOCK * BLOCK
        if end > most or end - held > _SPAN * count:  # past the budget, or many more rows than the call's
            return False
        if not kept.missed:
            kept.missed = True  # the first call to need rows they do not hold computes its own
            return False
        wanted = min(most, max(2 * held, -(-end // BLOCK) * BLOCK))
        if not _extend(plan, kept, wanted, dtype, layout, width, threads):
            return False
        held, rows_cos, rows_sin = kept.rows
        if end > held:  # dropped meanwhile for another table's rows
            return False
    elif next(reversed(_held), None) != id(kept):
        with contextlib.suppress(KeyError):  # dropped meanwhile: still served from the rows read above
            _held.move_to_end(id(kept))
    assert rows_cos is not None and rows_sin is not None
    if isinstance(where, tuple):
        np.copyto(cos, rows_cos[where[0] : end])
        np.copyto(sin, rows_sin[where[0] : end])
    else:  # positions were checked against the bound: clip never clips, and does not buffer ``out``
        np.take(rows_cos, where, axis=0, out=cos, mode="clip")
        np.take(rows_sin, where, axis=0, out=sin, mode="clip")
    return True


def _extend(plan: Plan, kept: _Kept, count: int, dtype: np.dtype[Any], layout: str, width: int,
            threads: int | None) -> bool:
    """Rows ``0 .. count - 1``: the kept ones copied, the rest computed, published together, other
    tables' rows dropped (least recently used first) to stay within the budget. ``False`` (the
    caller computes its own rows) when another call is growing rows right now (another thread, or
    the call this one interrupts: a signal handler, a ``__del__``), when the budget has shrunk below
    the rows, or when they would take most of the budget from rows other tables hold (two such
    tables would drop each other's rows on every call)."""
    from .fill import fill_run

    if not _grow.acquire(blocking=False):
        return False
    try:
        if _trim[0]:
            _trim[0] = False
            _make_room(0, None)
        have, old_cos, old_sin = kept.rows
        if count <= have:  # another thread grew them meanwhile
            return True
        nbytes = 2 * count * width * dtype.itemsize
        others = kept_bytes() - kept.nbytes
        if nbytes > _budget[0] or (others + nbytes > _budget[0] and 2 * nbytes > _budget[0]):
            return False
        _make_room(nbytes - kept.nbytes, kept)
        both = np.empty((2, count, width), dtype=dtype)
        if have:
            assert old_cos is not None and old_sin is not None
            np.copyto(both[0, :have], old_cos)
            np.copyto(both[1, :have], old_sin)
        fill_run(plan, have, count - have, both[0, have:], both[1, have:], layout, threads)
        both.flags.writeable = False
        kept.rows = (count, both[0], both[1])
        _held[id(kept)] = weakref.ref(kept)
        _held.move_to_end(id(kept))
        return True
    finally:
        if _trim[0]:  # the budget shrank while these rows grew
            _trim[0] = False
            _make_room(0, None)
        _grow.release()


def _alive() -> list[_Kept]:
    return [kept for kept in (ref() for ref in list(_held.values())) if kept is not None]


def _make_room(more: int, keep: _Kept | None) -> None:
    """Drop other tables' rows, least recently used first, until ``more`` bytes fit the budget;
    forget the rows of tables freed since (``_grow`` held)."""
    for key, ref in list(_held.items()):
        found = ref()
        if found is None or id(found) != key:
            _held.pop(key, None)
    total = kept_bytes() + more
    for kept in _alive():
        if total <= _budget[0]:
            return
        if kept is keep:
            continue
        total -= kept.nbytes
        kept.rows = (0, None, None)
        kept.missed = False  # kept again only once two calls need them again
        _held.pop(id(kept), None)
