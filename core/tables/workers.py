"""Helper threads for :func:`ropekit.tables.rotary.cos_sin`, started on first use and kept.

numpy releases the GIL inside its loops, so slices of one cos/sin call run in parallel on
threads. Starting a thread costs tens of microseconds, a good part of a 4096-position call, so
the helpers persist (idle, they sleep on a lock). The calling thread always computes the first
slice itself, and a slice no idle helper can take runs on the caller too: a call never waits
behind another call. A forked child does not inherit the helpers; it starts its own.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence

__all__ = ["available_cores", "run_all"]


@functools.cache
def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports one), read once
    per process."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


class _Helper:
    """One persistent daemon thread that runs one job at a time."""

    def __init__(self) -> None:
        self._start = threading.Lock()
        self._finish = threading.Lock()
        self._start.acquire()
        self._finish.acquire()
        self._job: Callable[[], None] | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._loop, name="ropekit-cos-sin", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._start.acquire()
            job, self._job = self._job, None
            try:
                if job is not None:
                    job()
            except BaseException as error:  # handed to the caller by wait()
                self.error = error
            self._finish.release()

    def begin(self, job: Callable[[], None]) -> None:
        self.error = None
        self._job = job
        self._start.release()

    def wait(self) -> BaseException | None:
        # a timed wait sees the release sooner than an untimed one (measured on a 2-core VM: 2 us
        # against 10-30 us); it wakes at most once a millisecond while the helper works
        while not self._finish.acquire(timeout=0.001):
            pass
        return self.error


_lock = threading.Lock()
_idle: list[_Helper] = []
_owner = os.getpid()
_started = 0


def _forget_helpers() -> None:
    """In a forked child: the parent's helper threads do not exist here, and ``_lock`` may have
    been held by one of its threads at the fork."""
    global _lock, _owner, _started
    _lock, _owner, _started = threading.Lock(), os.getpid(), 0
    _idle.clear()
    available_cores.cache_clear()  # a child may be given other cores


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def _take(wanted: int) -> list[_Helper]:
    """Up to ``wanted`` idle helpers, starting new ones while fewer than ``cores - 1`` exist."""
    global _started
    if _owner != os.getpid():  # a fork without the hook above
        _forget_helpers()
    with _lock:
        taken = [_idle.pop() for _ in range(min(wanted, len(_idle)))]
        while len(taken) < wanted and _started < available_cores() - 1:
            try:
                helper = _Helper()
            except RuntimeError:  # no thread can be started here: the caller does the work
                break
            _started += 1
            taken.append(helper)
        return taken


def _give_back(helpers: list[_Helper]) -> None:
    with _lock:
        if _owner == os.getpid():
            _idle.extend(helpers)


def run_all(jobs: Sequence[Callable[[], None]]) -> None:
    """Run every job: the first on the calling thread, the rest on idle helpers or, when none is
    free, on the calling thread too. Re-raise the first exception once every job has finished:
    no job is left writing into a caller's buffer, even when the wait itself is interrupted
    (Ctrl-C), and every helper goes back to the pool."""
    helpers = _take(len(jobs) - 1) if len(jobs) > 1 else []
    for helper, job in zip(helpers, jobs[1:], strict=False):
        helper.begin(job)
    failure: BaseException | None = None
    for job in [jobs[0], *jobs[1 + len(helpers) :]]:
        try:
            job()
        except BaseException as caught:  # re-raised below, after the helpers finish
            failure = failure or caught
    interrupted: BaseException | None = None
    for helper in helpers:
        while True:
            try:
                error = helper.wait()
                break
            except BaseException as caught:  # a KeyboardInterrupt here: keep waiting, raise it after
                interrupted = interrupted or caught
        failure = failure or error
    _give_back(helpers)
    if interrupted is not None:
        raise interrupted
    if failure is not None:
        raise failure
