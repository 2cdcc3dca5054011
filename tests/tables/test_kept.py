"""Finished rows a table keeps (ropekit.tables.kept): invisible in the values, bounded in memory."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import ropekit

from .test_rotary import LLAMA31_8B, exact


@pytest.fixture
def budget() -> Iterator[None]:
    """The default budget, with no rows kept by earlier tests' tables (the budget is the process's),
    restored afterwards."""
    previous = ropekit.set_row_budget(0)  # drops every kept row
    ropekit.set_row_budget(previous)
    yield
    ropekit.set_row_budget(previous)


def _fresh() -> ropekit.RopeTable:
    return ropekit.load(LLAMA31_8B).table


def _kept_counts(table: ropekit.RopeTable) -> dict[Any, int]:
    store = table._plan().kept
    assert store is not None
    return {key: kept.rows[0] for key, kept in store.items()}


def _computed(table: ropekit.RopeTable, positions: Any, **options: Any) -> tuple[Any, Any]:
    """``table.cos_sin`` on a copy of ``table`` that keeps no rows: every row computed."""
    bare = ropekit.RopeTable(table.layer_type, table.rope_type, table.params, table.geometry, table.inv_freq,
                             table.attention_factor, layout=table.layout)
    bare._plan().kept = None
    return bare.cos_sin(positions, **options)


@pytest.mark.parametrize("layout", ["neox", "gptj", "half"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_kept_rows_give_the_bits_computing_gives(layout: Any, dtype: Any, budget: None) -> None:
    """Every call twice on one table (the second from kept rows) against a table that keeps none."""
    table, bare = _fresh(), _fresh()
    rng = np.random.default_rng(3)
    requests: list[Any] = [range(4096), 300, range(777, 5000), np.arange(1000, 1300),
                           np.sort(rng.integers(0, 9000, 500)), rng.integers(0, 9000, 200), range(8000, 9000)]
    for _ in range(2):
        for positions in requests:
            got = table.cos_sin(positions, dtype=dtype, layout=layout)
            want = _computed(bare, positions, dtype=dtype, layout=layout)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert max(_kept_counts(table).values()) >= 4096  # the second pass was served from kept rows


def test_rows_are_kept_from_the_second_call_that_needs_them(budget: None) -> None:
    table = _fresh()
    table.cos_sin(range(1000, 1500))
    assert set(_kept_counts(table).values()) <= {0}  # a one-off call keeps nothing
    table.cos_sin(range(200, 1500))
    (count,) = _kept_counts(table).values()
    assert count >= 1500 and count % 256 == 0  # the highest position either call needed
    out = (np.zeros((500, 128), np.float32), np.zeros((500, 128), np.float32))
    filled = table.cos_sin(range(1000, 1500), out=out)
    assert (filled[0] is out[0] or filled[0].base is out[0])
    want_cos, want_sin = exact(table, np.arange(1000, 1500))
    assert np.abs(out[0][:, :64] - want_cos).max() <= 5e-7 and np.abs(out[1][:, 64:] - want_sin).max() <= 5e-7


def test_the_budget_bounds_what_is_kept(budget: None) -> None:
    ropekit.set_row_budget(1024 * 1024)  # 4 blocks of float32 neox rows (1 KiB a position)
    table = _fresh()
    for _ in range(3):
        far = table.cos_sin(range(2000, 2100))  # past the budget: computed every time
    assert set(_kept_counts(table).values()) <= {0}
    for _ in range(2):
        near = table.cos_sin(range(100, 900))
    assert _kept_counts(table) == {(np.dtype(np.float32), "neox"): 1024}
    assert np.array_equal(far[0], _computed(_fresh(), range(2000, 2100))[0])
    assert np.array_equal(near[1], _computed(_fresh(), range(100, 900))[1])
    ropekit.set_row_budget(0)
    assert np.array_equal(table.cos_sin(range(100, 900))[0], near[0])


def test_a_value_depends_only_on_its_position() -> None:
    """Runs from any start, on one thread or two, and scattered positions agree bit for bit."""
    table = _fresh()
    whole = _computed(table, range(9000), dtype=np.float64, threads=1)
    for start in (1, 255, 257, 4097, 5000):
        for threads in (1, 2):
            part = _computed(table, range(start, 9000), dtype=np.float64, threads=threads)
            assert np.array_equal(part[0], whole[0][start:]) and np.array_equal(part[1], whole[1][start:])
    scattered = _computed(table, np.arange(3, 9000, 7), dtype=np.float64)
    assert np.array_equal(scattered[0], whole[0][3::7])


def test_concurrent_callers_growing_the_rows_get_their_own_values(budget: None) -> None:
    table = _fresh()
    want = _computed(_fresh(), range(12000))
    failures: list[str] = []

    def caller(start: int) -> None:
        for step in range(6):
            low = (start + 1500 * step) % 10000
            cos, sin = table.cos_sin(range(low, low + 2000))
            if not (np.array_equal(cos, want[0][low : low + 2000]) and np.array_equal(sin, want[1][low : low + 2000])):
                failures.append(f"{low}")

    threads = [threading.Thread(target=caller, args=(start,)) for start in (0, 333, 4444)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_multimodal_tables_keep_no_rows(budget: None) -> None:
    config = {"model_type": "qwen2_5_vl_text", "hidden_size": 3584, "num_attention_heads": 28,
              "max_position_embeddings": 128000,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}}
    table = ropekit.load(config).table
    for _ in range(3):
        table.cos_sin(range(500))
    assert table._plan().kept is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "16MiB", None])
def test_a_bad_budget_is_refused_by_name(bad: Any, budget: None) -> None:
    with pytest.raises(ropekit.ArgumentError, match="nbytes"):
        ropekit.set_row_budget(bad)


def test_the_budget_is_read_and_set(budget: None) -> None:
    from ropekit.tables.kept import DEFAULT_ROW_BUDGET

    assert ropekit.row_budget() == DEFAULT_ROW_BUDGET == 32 << 20
    assert ropekit.set_row_budget(1 << 20) == DEFAULT_ROW_BUDGET
    assert ropekit.row_budget() == 1 << 20


def test_the_budget_is_shared_by_every_table_least_recently_served_dropped_first(budget: None) -> None:
    from ropekit.tables.kept import kept_bytes

    ropekit.set_row_budget(3 << 19)  # three sets of rows of 512 KiB: 512 positions of cos and sin each
    tables = [_fresh() for _ in range(4)]
    for table in tables[:3]:
        for _ in range(2):
            table.cos_sin(300)
    assert [max(_kept_counts(t).values(), default=0) for t in tables] == [512, 512, 512, 0]
    tables[0].cos_sin(300)  # served: now the most recent
    for _ in range(2):
        tables[3].cos_sin(300)
    assert [max(_kept_counts(t).values(), default=0) for t in tables] == [512, 0, 512, 512]
    assert kept_bytes() <= 3 << 19
    want = _computed(_fresh(), 300)
    for table in tables:
        got = table.cos_sin(300)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    del tables, table
    import gc

    gc.collect()
    ropekit.set_row_budget(3 << 19)  # forgets freed tables' rows
    assert kept_bytes() == 0
    ropekit.set_row_budget(0)


def test_a_few_positions_far_out_keep_no_rows_below_them(budget: None) -> None:
    """A decode batch past the rows held is computed: keeping would compute every row below it."""
    from ropekit.tables.kept import kept_bytes

    main = _fresh()
    for _ in range(2):
        main.cos_sin(4096)
    before = kept_bytes()
    step = _fresh()
    far = np.arange(29_900, 30_000)
    for _ in range(3):
        got = step.cos_sin(far)
    assert kept_bytes() == before and set(_kept_counts(step).values()) <= {0}
    assert max(_kept_counts(main).values()) >= 4096
    assert np.array_equal(got[0], _computed(_fresh(), far)[0])


def test_rows_taking_most_of_the_budget_do_not_drop_another_tables(budget: None) -> None:
    """Two tables that each need more than half the budget would drop each other's rows on every call."""
    ropekit.set_row_budget(3 << 20)
    first, second = _fresh(), _fresh()
    for _ in range(2):
        first.cos_sin(2048)  # 2 MiB
    for _ in range(3):
        got = second.cos_sin(2048)
    assert max(_kept_counts(first).values()) == 2048 and set(_kept_counts(second).values()) <= {0}
    assert np.array_equal(got[1], _computed(_fresh(), 2048)[1])


def test_a_smaller_budget_set_while_rows_grow_is_honoured_without_waiting(
        budget: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``set_row_budget`` from inside a growth (a signal handler, a ``__del__``, another thread) neither
    waits for the growth nor leaves rows past the new budget."""
    from ropekit.tables import fill
    from ropekit.tables.kept import kept_bytes

    real = fill.fill_run
    calls: list[int] = []

    def interrupted(*args: Any, **kwargs: Any) -> None:
        calls.append(ropekit.set_row_budget(1 << 20))
        real(*args, **kwargs)

    table = _fresh()
    table.cos_sin(range(4000))
    monkeypatch.setattr(fill, "fill_run", interrupted)
    got = table.cos_sin(range(4000))
    monkeypatch.setattr(fill, "fill_run", real)
    assert calls and kept_bytes() <= 1 << 20
    assert np.array_equal(got[0], _computed(_fresh(), range(4000))[0])
