"""``RopeTable.rows``: an engine's finished cos/sin rows, computed once; each call copies or
gathers rows that are exactly what ``cos_sin(range(count))`` gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ropekit

from ..support import CONFIGS

LLAMA = {"head_dim": 64, "rope_theta": 500000.0, "max_position_embeddings": 8192,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 1024}}


@pytest.fixture(scope="module")
def table() -> ropekit.RopeTable:
    return ropekit.load(LLAMA).table


@pytest.mark.parametrize("layout", ["neox", "gptj", "half"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_rows_are_the_tables_own_values_bit_for_bit(table: ropekit.RopeTable, layout: Any, dtype: type) -> None:
    rows = table.rows(3000, dtype=dtype, layout=layout)
    cos, sin = table.cos_sin(range(3000), dtype=dtype, layout=layout)
    assert (rows.count, rows.dtype, rows.layout) == (3000, np.dtype(dtype), layout)
    scattered = np.array([2999, 0, 17, 256, 255, 1024, 17], dtype=np.int64)
    cases: list[tuple[Any, Any]] = [(range(100, 2900), slice(100, 2900)), (range(2999, 10, -7), slice(2999, 10, -7)),
                                (scattered, scattered), (np.arange(500, 700), slice(500, 700)), (5, slice(0, 5)),
                                ([3, 1, 2], [3, 1, 2])]
    for positions, expected in cases:
        got_cos, got_sin = rows.cos_sin(positions)
        assert np.array_equal(got_cos, cos[expected]) and np.array_equal(got_sin, sin[expected])
        assert got_cos.flags.writeable and not np.shares_memory(got_cos, rows.cos_rows)


def test_rows_fill_out_buffers_and_check_them(table: ropekit.RopeTable) -> None:
    rows = table.rows(512)
    out = (np.empty((100, 64), np.float32), np.empty((100, 64), np.float32))
    cos, sin = rows.cos_sin(np.arange(200, 300), out=out)
    assert cos.base is out[0] and sin.base is out[1]
    assert np.array_equal(cos, table.cos_sin(range(512))[0][200:300])
    with pytest.raises(ropekit.ArgumentError, match=r"out\[0\]: expected float32 of shape \(99, 64\)"):
        rows.cos_sin(range(99), out=out)


def test_the_rows_themselves_are_read_only(table: ropekit.RopeTable) -> None:
    rows = table.rows(16)
    with pytest.raises(ValueError, match="read-only"):
        rows.cos_rows[0, 0] = 2.0


@pytest.mark.parametrize(("positions", "problem"), [
    (range(510, 513), r"range\(510, 513\) is outside the rows, which cover 0..511"),
    ([0, 512], "0..512 is outside the rows"),
    ([-1], "-1..-1 is outside the rows"),
    (513, "outside the rows"),
    (-3, r"expected a count of positions \(0 or more\)"),
    (np.zeros((2, 3), np.int64), r"expected one row of integers, got shape \(2, 3\)"),
    (np.array([0.5]), "expected one row of integers"),
])
def test_positions_outside_the_rows_are_refused(table: ropekit.RopeTable, positions: object, problem: str) -> None:
    rows = table.rows(512)
    with pytest.raises(ropekit.ArgumentError, match=problem) as caught:
        rows.cos_sin(positions)
    assert caught.value.argument == "positions"


@pytest.mark.parametrize("count", [0, -1, True, 2.0, 1 << 27])
def test_a_bad_count_is_refused(table: ropekit.RopeTable, count: object) -> None:
    with pytest.raises(ropekit.ArgumentError, match="expected a number of positions") as caught:
        table.rows(count)  # type: ignore[arg-type]
    assert caught.value.argument == "count"


def test_a_seq_len_dependent_table_holds_rows_only_as_far_as_it_holds() -> None:
    dynamic = ropekit.load({"head_dim": 64, "max_position_embeddings": 256,
                            "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}).table
    assert dynamic.rows(256).count == 256
    with pytest.raises(ropekit.ArgumentError, match=r"holds for sequences of up to 256 positions .* "
                       r"table.at\(seq_len\).rows"):
        dynamic.rows(257)
    longer = dynamic.at(1000)
    rows = longer.rows(1000)
    assert np.array_equal(rows.cos_sin(range(1000))[0], longer.cos_sin(range(1000))[0])


def test_multimodal_tables_have_no_rows() -> None:
    table = ropekit.load(CONFIGS / "published" / "qwen2.5-vl-7b-instruct.json").table
    with pytest.raises(ropekit.ArgumentError, match="3-axis positions"):
        table.rows(16)


def test_an_empty_request_gives_empty_rows(table: ropekit.RopeTable) -> None:
    rows = table.rows(16)
    for positions in (0, range(0), range(-3), range(5, 5), np.empty(0, np.int64)):
        cos, sin = rows.cos_sin(positions)
        assert cos.shape == sin.shape == (0, 64)
