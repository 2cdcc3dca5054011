"""The helper threads behind ``cos_sin(threads=...)``: every job runs, failures surface after
all have finished, concurrent callers never wait on each other, and a forked child starts its own."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from ropekit.tables import workers


def test_every_job_runs_once() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def job(number: int) -> None:
        with lock:
            seen.append(number)

    workers.run_all([lambda number=number: job(number) for number in range(7)])  # type: ignore[misc]
    assert sorted(seen) == list(range(7))


def test_a_failing_helper_job_raises_after_the_others_finish() -> None:
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.05)
        finished.set()

    def broken() -> None:
        raise ValueError("slice 2 failed")

    with pytest.raises(ValueError, match="slice 2 failed"):
        workers.run_all([slow, broken])
    assert finished.is_set()
    workers.run_all([lambda: None, lambda: None])  # the helper is usable again


def test_the_first_failure_wins_and_the_caller_still_waits() -> None:
    finished = threading.Event()

    def caller_job() -> None:
        raise KeyError("caller")

    def helper_job() -> None:
        time.sleep(0.05)
        finished.set()

    with pytest.raises(KeyError, match="caller"):
        workers.run_all([caller_job, helper_job])
    assert finished.is_set()


def test_jobs_without_an_idle_helper_run_on_the_caller() -> None:
    names: list[str] = []
    jobs = [lambda: names.append(threading.current_thread().name) for _ in range(workers.available_cores() + 3)]
    workers.run_all(jobs)
    assert len(names) == len(jobs)
    assert names.count(threading.current_thread().name) >= 4  # the first job and the overflow


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_starts_its_own_helpers() -> None:
    workers.run_all([lambda: None, lambda: None])  # the parent has helpers
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            done: list[int] = []
            workers.run_all([lambda: done.append(1), lambda: done.append(2)])
            status = 0 if sorted(done) == [1, 2] else 1
        finally:
            os.write(write, bytes([status]))
            os._exit(status)
    os.close(write)
    _, code = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"\x00" and os.waitstatus_to_exitcode(code) == 0
    os.close(read)


def test_available_cores_is_positive() -> None:
    assert workers.available_cores() >= 1
    if sys.platform.startswith("linux"):
        assert workers.available_cores() == len(os.sched_getaffinity(0))


def test_an_interrupted_wait_still_waits_for_the_helper_and_returns_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the caller waits: the helper's slice still finishes before the interrupt is
    raised (it writes into the caller's buffer), and the helper goes back to the pool."""
    workers.run_all([lambda: None, lambda: None])  # a helper exists
    real_wait = workers._Helper.wait
    interrupts = iter([KeyboardInterrupt()])

    def interrupted_wait(self: workers._Helper) -> BaseException | None:
        pending = next(interrupts, None)
        if pending is not None:
            raise pending
        return real_wait(self)

    monkeypatch.setattr(workers._Helper, "wait", interrupted_wait)
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.05)
        finished.set()

    idle_before = len(workers._idle)
    with pytest.raises(KeyboardInterrupt):
        workers.run_all([lambda: None, slow])
    assert finished.is_set()
    assert len(workers._idle) == idle_before


def test_when_no_thread_can_start_the_caller_does_all_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "_idle", [])
    monkeypatch.setattr(workers, "_started", 0)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    names: list[str] = []
    workers.run_all([lambda: names.append(threading.current_thread().name) for _ in range(3)])
    assert names == [threading.current_thread().name] * 3
