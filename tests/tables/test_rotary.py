"""cos/sin and the numpy reference rotation: transformers' values at small positions, float64
exactness at large ones, both layouts, partial rotary and the attention factor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import pytest

import ropekit
from ropekit.tables.plan import MAX_ANGLE, Plan, max_position
from ropekit.tables.rotary import cos_sin

from ..support import GOLDEN_FILE


@pytest.fixture(autouse=True)
def _computed_every_time() -> Iterator[None]:
    """These tests are about how rows are computed: no call here is served from kept rows
    (``ropekit.tables.kept``, tested in ``test_kept.py``)."""
    previous = ropekit.set_row_budget(0)
    yield
    ropekit.set_row_budget(previous)

GOLDEN = json.loads(GOLDEN_FILE.read_text())["rotary"]
LLAMA31_8B: dict[str, Any] = {
    "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def exact(table: ropekit.RopeTable, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    angles = positions.astype(np.float64)[:, None] * table.inv_freq[None, :]
    return np.cos(angles) * table.attention_factor, np.sin(angles) * table.attention_factor


def test_cos_sin_match_transformers_at_small_positions() -> None:
    table = ropekit.load(GOLDEN["config"]).table
    cos, sin = table.cos_sin(GOLDEN["positions"])
    np.testing.assert_allclose(cos, GOLDEN["neox"]["cos"], atol=2e-6)
    np.testing.assert_allclose(sin, GOLDEN["neox"]["sin"], atol=2e-6)


def test_apply_rotary_neox_matches_transformers() -> None:
    table = ropekit.load(GOLDEN["config"]).table
    cos, sin = table.cos_sin(GOLDEN["positions"], dtype=np.float64)
    q, k = np.array(GOLDEN["neox"]["q"]), np.array(GOLDEN["neox"]["k"])
    q_embed, k_embed = ropekit.apply_rotary(q, k, cos, sin)
    np.testing.assert_allclose(q_embed, GOLDEN["neox"]["q_embed"], atol=1e-5)
    np.testing.assert_allclose(k_embed, GOLDEN["neox"]["k_embed"], atol=1e-5)


def test_apply_rotary_gptj_partial_matches_transformers() -> None:
    spec = GOLDEN["gptj"]
    config = {"head_dim": spec["head_dim"], "rope_theta": spec["rope_theta"],
              "partial_rotary_factor": spec["rotary_dim"] / spec["head_dim"]}
    table = ropekit.load(config).table
    cos, sin = table.cos_sin(GOLDEN["positions"], dtype=np.float64, layout="gptj")
    q = np.array(GOLDEN["neox"]["q"])
    q_embed, _ = ropekit.apply_rotary(q, q, cos, sin, layout="gptj")
    np.testing.assert_allclose(q_embed, spec["q_embed"], atol=1e-5)
    np.testing.assert_array_equal(q_embed[..., spec["rotary_dim"]:], q[..., spec["rotary_dim"]:])


@pytest.mark.parametrize("layout", ["neox", "gptj"])
def test_float32_is_exact_to_5e7_up_to_2_pow_20(layout: Any) -> None:
    table = ropekit.load(LLAMA31_8B).table
    pairs = len(table.inv_freq)
    near_end = range((1 << 20) - 4096, 1 << 20)
    rng = np.random.default_rng(7)
    scattered = np.sort(rng.integers(0, 1 << 20, 4096))
    for positions in (near_end, scattered):
        cos, sin = table.cos_sin(positions, layout=layout)
        want_cos, want_sin = exact(table, np.asarray(positions))
        first, second = (slice(0, pairs), slice(pairs, None)) if layout == "neox" else (slice(0, None, 2),
                                                                                         slice(1, None, 2))
        for got, want in ((cos[:, first], want_cos), (cos[:, second], want_cos), (sin[:, first], want_sin),
                          (sin[:, second], want_sin)):
            assert np.abs(got - want).max() <= 3e-7


def test_contiguous_and_scattered_paths_agree() -> None:
    table = ropekit.load(LLAMA31_8B).table
    count = 3 * 256 * 8 + 77  # full chunks, a partial chunk and a tail
    fast = table.cos_sin(range(1000, 1000 + count), dtype=np.float64)
    slow = table.cos_sin(np.arange(1000, 1000 + count), dtype=np.float64)
    np.testing.assert_allclose(fast[0], slow[0], atol=1e-12)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-12)


def test_attention_factor_and_shapes() -> None:
    config = {"head_dim": 64, "partial_rotary_factor": 0.5, "max_position_embeddings": 32768,
              "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}}
    table = ropekit.load(config).table
    cos, sin = table.cos_sin(10)
    assert cos.shape == sin.shape == (10, 32)
    assert cos.dtype == np.float32
    np.testing.assert_allclose(cos[0], table.attention_factor, rtol=1e-7)  # position 0: cos = 1 * factor
    np.testing.assert_allclose(cos**2 + sin**2, table.attention_factor**2, rtol=1e-6)
    assert table.cos_sin(0)[0].shape == (0, 32)
    assert table.cos_sin(4, dtype=np.float16)[0].dtype == np.float16


def test_out_buffers_are_filled_and_checked() -> None:
    table = ropekit.load(LLAMA31_8B).table
    buffers = (np.zeros((600, 128), np.float32), np.zeros((600, 128), np.float32))
    cos, sin = table.cos_sin(600, out=buffers)
    assert cos.base is buffers[0] and sin.base is buffers[1]
    np.testing.assert_allclose(cos, table.cos_sin(600)[0], atol=0)
    with pytest.raises(ropekit.ArgumentError, match="out\\[0\\]"):
        table.cos_sin(600, out=(np.zeros((600, 64), np.float32), buffers[1]))


@pytest.mark.parametrize("bad", [-1, True, [0.5, 1.5], np.zeros((2, 2), np.int64)])
def test_bad_positions(bad: Any) -> None:
    with pytest.raises(ropekit.ArgumentError, match="positions"):
        ropekit.load(LLAMA31_8B).table.cos_sin(bad)


def test_bad_layout_and_dtype() -> None:
    table = ropekit.load(LLAMA31_8B).table
    with pytest.raises(ropekit.ArgumentError, match="layout"):
        table.cos_sin(4, layout="llama")  # type: ignore[arg-type]
    with pytest.raises(ropekit.ArgumentError, match="dtype"):
        table.cos_sin(4, dtype=np.int32)


def test_rotation_preserves_norms_and_depends_on_relative_position() -> None:
    table = ropekit.load(LLAMA31_8B).table
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(1, 128)), rng.normal(size=(1, 128))

    def score(p: int, r: int) -> float:
        cq, sq = table.cos_sin([p], dtype=np.float64)
        ck, sk = table.cos_sin([r], dtype=np.float64)
        rq, _ = ropekit.apply_rotary(q, q, cq, sq)
        rk, _ = ropekit.apply_rotary(k, k, ck, sk)
        assert np.linalg.norm(rq) == pytest.approx(np.linalg.norm(q), rel=1e-12)
        return float((rq * rk).sum())

    assert score(10, 3) == pytest.approx(score(100_007, 100_000), rel=1e-9)


# --- the accepted positions are exactly where the stated accuracy holds; misuse is refused --------


def test_accuracy_holds_at_the_bound_and_positions_past_it_are_refused() -> None:
    inv_freq = np.array([1.0, 0.5, 1e-3])
    limit = max_position(inv_freq)
    assert limit == int(MAX_ANGLE) - 1
    cos, sin = cos_sin(inv_freq, 1.0, range(limit - 511, limit + 1))
    exact = np.arange(limit - 511, limit + 1, dtype=np.longdouble)[:, None] * inv_freq.astype(np.longdouble)
    assert float(np.abs(cos[:, :3] - np.cos(exact)).max()) <= 5e-7
    assert float(np.abs(sin[:, :3] - np.sin(exact)).max()) <= 5e-7
    for bad in (range(limit, limit + 2), limit + 2, [limit + 1], np.array([2**63], dtype=np.uint64),
                np.array([2**64 - 1], dtype=np.uint64), [-1], range(-1, 3), -5):
        with pytest.raises(ropekit.ArgumentError, match="positions"):
            cos_sin(inv_freq, 1.0, bad)


@pytest.mark.parametrize("bad", [[0.5, 1.0], np.array([1.0]), "abc", True, [[1, 2]], [1, "2"]])
def test_non_integer_positions_are_refused(bad: Any) -> None:
    with pytest.raises(ropekit.ArgumentError, match="positions"):
        cos_sin(np.array([1.0]), 1.0, bad)


def test_out_buffers_are_validated() -> None:
    freq = np.array([1.0, 0.1])
    good = (np.empty((4, 4), np.float32), np.empty((4, 4), np.float32))
    cos, sin = cos_sin(freq, 1.0, 4, out=good)
    assert cos is good[0] and sin is good[1]
    shared = np.empty((4, 4), np.float32)
    readonly = np.empty((4, 4), np.float32)
    readonly.flags.writeable = False
    strided = np.empty((4, 8), np.float32)[:, ::2]
    for out, words in [((shared, shared), "overlap"), ((readonly, good[1]), "read-only"),
                       ((strided, good[1]), "C-contiguous"), ((good[0], np.empty((4, 4), np.float64)), "float32"),
                       ([good[0], good[1]], "pair"), ((good[0], "x"), "numpy array"),
                       ((np.empty((5, 4), np.float32), good[1]), "shape")]:
        with pytest.raises(ropekit.ArgumentError, match=words):
            cos_sin(freq, 1.0, 4, out=out)  # type: ignore[arg-type]


def test_dtypes_are_listed_and_bfloat16_needs_ml_dtypes() -> None:
    freq = np.array([1.0, 0.1])
    half, _ = cos_sin(freq, 1.0, 3, dtype=np.float16)
    assert half.dtype == np.float16
    with pytest.raises(ropekit.ArgumentError, match="valid: float16, float32, float64"):
        cos_sin(freq, 1.0, 3, dtype=np.int32)
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(ropekit.ArgumentError, match="ml_dtypes"):
            cos_sin(freq, 1.0, 3, dtype="bfloat16")
    else:  # pragma: no cover - only where ml_dtypes is installed
        assert cos_sin(freq, 1.0, 3, dtype="bfloat16")[0].dtype.name == "bfloat16"


def test_apply_rotary_checks_its_shapes() -> None:
    cos, sin = cos_sin(np.array([1.0, 0.1]), 1.0, 3)
    q = np.ones((2, 3, 8))
    ropekit.apply_rotary(q, q, cos, sin)
    cases: list[tuple[tuple[Any, ...], str]] = [
        ((np.ones((2, 4, 8)), q, cos, sin), "q"), ((q, np.ones((3, 2)), cos, sin), "k"),
        ((q, q, cos, sin[:2]), "cos"), ((q.tolist(), q, cos, sin), "numpy array")]
    for args, words in cases:
        with pytest.raises(ropekit.ArgumentError, match=words):
            ropekit.apply_rotary(*args)


def test_half_layout_and_threads() -> None:
    table = ropekit.load({"head_dim": 64, "rope_theta": 500000.0}).table
    half, half_sin = table.cos_sin(9000, layout="half")
    full, _ = table.cos_sin(9000, layout="neox")
    assert half.shape == (9000, 32)
    np.testing.assert_array_equal(half, full[:, :32])
    one = table.cos_sin(70000, threads=1)
    two = table.cos_sin(70000, threads=2)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])  # bit-identical
    q = np.random.default_rng(0).standard_normal((2, 16, 64))
    for pairing in ("neox", "gptj"):
        c, s = table.cos_sin(16, layout="half")
        fc, fs = table.cos_sin(16, layout=pairing)
        np.testing.assert_allclose(ropekit.apply_rotary(q, q, c, s, "half", pairing=pairing)[0],
                                   ropekit.apply_rotary(q, q, fc, fs, pairing)[0], rtol=1e-6)
    with pytest.raises(ropekit.ArgumentError, match="pairing"):
        ropekit.apply_rotary(q, q, half[:16], half_sin[:16], "half")
    with pytest.raises(ropekit.ArgumentError, match="threads"):
        table.cos_sin(4, threads=0)


def test_small_calls_reuse_the_tables_plan() -> None:
    table = ropekit.load({"head_dim": 64, "rope_theta": 500000.0}).table
    table.cos_sin(1)
    plan = table._plan()
    table.cos_sin(300)
    assert table._plan() is plan and plan._offsets  # built once, reused
    for start in (0, 5, 255, 256, 4097, 2**31):
        cos, _ = table.cos_sin(range(start, start + 3))
        exact = np.arange(start, start + 3, dtype=np.longdouble)[:, None] * table.inv_freq.astype(np.longdouble)
        assert float(np.abs(cos[:, :32] - np.cos(exact)).max()) <= 5e-7


def _columns(values: np.ndarray, layout: str, pairs: int) -> list[np.ndarray]:
    """Every copy of the per-pair values a cache of ``layout`` holds."""
    if layout == "neox":
        return [values[:, :pairs], values[:, pairs:]]
    if layout == "gptj":
        return [values[:, 0::2], values[:, 1::2]]
    return [values]


@pytest.mark.parametrize("pairs", [1, 3, 32, 40])
@pytest.mark.parametrize("layout", ["neox", "gptj", "half"])
def test_runs_are_exact_and_bit_identical_across_threads(pairs: int, layout: str) -> None:
    """Odd widths, starts inside a block and across 64-block groups, tails, and the bound; each
    run checked against long double and equal bit for bit with 1, 2 and 3 threads."""
    rng = np.random.default_rng(pairs)
    freq = 1.0 / 10000.0 ** (np.arange(pairs) / max(pairs, 1))
    freq[-1] *= rng.random()
    factor = 1.0 if pairs % 2 else 1.2
    plan = Plan(freq, factor)
    for start, count in [(0, 5), (7, 257), (16380, 17000), (2**31 - 40000, 3000), (2**32 - 300, 299)]:
        for dtype in (np.float32, np.float64):
            results = [cos_sin(plan, factor, range(start, start + count), dtype=dtype,
                                              layout=layout, threads=threads) for threads in (1, 2, 3, None)]
            for other in results[1:]:
                assert all(np.array_equal(a, b) for a, b in zip(results[0], other, strict=True))
            angles = np.arange(start, start + count, dtype=np.longdouble)[:, None] * freq.astype(np.longdouble)
            for values, want in zip(results[0], (np.cos(angles) * factor, np.sin(angles) * factor), strict=True):
                for copy in _columns(values, layout, pairs):
                    assert float(np.abs(copy - want).max()) <= 5e-7 * factor


@pytest.mark.parametrize("layout", ["neox", "gptj", "half"])
def test_scattered_positions_are_exact(layout: Literal["neox", "gptj", "half"]) -> None:
    table = ropekit.load(LLAMA31_8B).table
    pairs = len(table.inv_freq)
    rng = np.random.default_rng(3)
    for positions in (np.array([3, 1, 2, 9, 7]), rng.integers(0, 2**32 - 1, 3000), rng.integers(0, 70000, 3000),
                      np.arange(100, 9000)[::-3]):
        for dtype in (np.float32, np.float64, np.float16):
            cos, sin = table.cos_sin(positions, dtype=dtype, layout=layout)
            angles = positions.astype(np.longdouble)[:, None] * table.inv_freq.astype(np.longdouble)
            tolerance = 1e-3 if dtype == np.float16 else 5e-7 * table.attention_factor
            for values, want in ((cos, np.cos(angles)), (sin, np.sin(angles))):
                for copy in _columns(values, layout, pairs):
                    assert float(np.abs(copy - want * table.attention_factor).max()) <= tolerance


def test_misaligned_out_buffers_are_filled_exactly() -> None:
    """float32 buffers that start 4 bytes into an allocation (the integer views in the fast path
    are then misaligned) get the same bits as a fresh array."""
    table = ropekit.load(LLAMA31_8B).table
    for layout in ("neox", "gptj", "half"):
        width = table.rotary_dim // (2 if layout == "half" else 1)
        buffers = []
        for _ in range(2):
            raw = np.zeros(1000 * width * 4 + 4, np.uint8)
            buffers.append(np.frombuffer(raw[4:].data, dtype=np.float32).reshape(1000, width))
        table.cos_sin(1000, layout=layout, out=(buffers[0], buffers[1]))
        fresh = table.cos_sin(1000, layout=layout)
        assert np.array_equal(buffers[0], fresh[0]) and np.array_equal(buffers[1], fresh[1])


def test_concurrent_callers_get_their_own_results() -> None:
    """Callers on many threads at once, each asking for two threads: the helpers are shared, the
    scratch is per thread, and every caller gets exactly what it would alone."""
    from concurrent.futures import ThreadPoolExecutor

    table = ropekit.load(LLAMA31_8B).table
    starts = [0, 5000, 123457, 2**30, 77, 9999, 40000, 2**31]
    alone = [table.cos_sin(range(start, start + 9000), threads=1) for start in starts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda start: table.cos_sin(range(start, start + 9000), threads=2), starts))
    for (cos, sin), (want_cos, want_sin) in zip(together, alone, strict=True):
        assert np.array_equal(cos, want_cos) and np.array_equal(sin, want_sin)


def test_a_nested_call_on_the_same_thread_does_not_share_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call made while another is between its multiply and its store (a signal handler, a
    ``__del__``) gets its own work array."""
    from ropekit.tables import fill

    table = ropekit.load(LLAMA31_8B).table
    want = table.cos_sin(5000, threads=1)
    real_store = fill.store_chunk
    nested: list[int] = []

    def store_after_a_nested_call(*args: Any) -> None:
        if not nested:
            nested.append(1)
            table.cos_sin(range(777, 5777), threads=1)
        real_store(*args)

    monkeypatch.setattr(fill, "store_chunk", store_after_a_nested_call)
    got = table.cos_sin(5000, threads=1)
    assert nested and np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_foreign_byte_order_and_positions_past_int64_are_refused() -> None:
    foreign = np.dtype(np.float64).newbyteorder("S")
    with pytest.raises(ropekit.ArgumentError, match="byte order"):
        cos_sin(np.array([1.0, 0.1]), 1.0, 3, dtype=foreign)
    tiny = np.array([1e-12, 1e-13])  # the angle bound alone would allow positions past 2**63
    assert max_position(tiny) == 2**63 - 1
    with pytest.raises(ropekit.ArgumentError, match="positions must lie"):
        cos_sin(tiny, 1.0, np.array([2**63 + 7], dtype=np.uint64))


def test_huge_ranges_are_argument_errors_not_overflows() -> None:
    """Found by attack: ``cos_sin(range(2**70))`` raised OverflowError from ``len()``."""
    table = ropekit.load({"head_dim": 8, "rope_theta": 1e4}).table
    for positions in (range(2**70), range(0, 2**70, 2), range(-5, 2**70, 7), range(2**70, 2**71)):
        with pytest.raises(ropekit.ArgumentError, match=r"positions must lie in \[0, 4294967295\]"):
            table.cos_sin(positions)
    cos, _ = table.cos_sin(range(10, 0, -1))
    np.testing.assert_allclose(cos[:, 0], np.cos(np.arange(10, 0, -1)), atol=5e-7)


def test_a_table_cannot_be_made_writeable() -> None:
    """Found by attack: ``inv_freq.setflags(write=True)`` succeeded on a plain read-only array."""
    model = ropekit.load({"head_dim": 8, "max_position_embeddings": 16,
                          "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    for inv_freq in (model.table.inv_freq, model.table.at(64).inv_freq):
        assert not inv_freq.flags.writeable
        with pytest.raises(ValueError, match="WRITEABLE"):
            inv_freq.setflags(write=True)


@pytest.mark.parametrize("layout", ["neox", "gptj", "half"])
def test_decode_step_calls_are_the_general_paths_values(layout: Literal["neox", "gptj", "half"]) -> None:
    """Up to 64 positions as a count, a range, a list, a tuple or an integer array (the decode-step
    path) give, bit for bit, what the general path gives for the same positions among many: a
    value depends only on its position."""
    table = ropekit.load(LLAMA31_8B).table
    rng = np.random.default_rng(11)
    for trial in range(40):
        many = rng.integers(0, 2**32 - 1, 300) if trial % 2 else np.arange(300) + int(rng.integers(0, 2**24))
        for dtype in (np.float32, np.float64, np.float16):
            want_cos, want_sin = table.cos_sin(many, dtype=dtype, layout=layout)  # > 64: the general path
            count = int(rng.integers(1, 65))
            part = many[:count]
            kinds: list[Any] = [part, part.astype(np.uint32) if part.max() < 2**32 else part, part.tolist(),
                                tuple(part.tolist())]
            if trial % 2 == 0:
                kinds.append(range(int(part[0]), int(part[0]) + count))
            for positions in kinds:
                cos, sin = table.cos_sin(positions, dtype=dtype, layout=layout)
                assert np.array_equal(cos, want_cos[:count]) and np.array_equal(sin, want_sin[:count])
            out = (np.empty_like(want_cos[:count]), np.empty_like(want_sin[:count]))
            filled = table.cos_sin(part, dtype=dtype, layout=layout, out=out)
            assert (filled[0] is out[0] or filled[0].base is out[0]) and np.array_equal(out[0], want_cos[:count])
    assert np.array_equal(table.cos_sin(16)[0], table.cos_sin(np.arange(16))[0])


def test_decode_step_path_refuses_what_the_general_path_refuses() -> None:
    table = ropekit.load(LLAMA31_8B).table
    for positions, words in [([1, -2], "positions must lie"), ([0.5, 1.0], "integer"), ([True, False], "integer"),
                             (np.array([2**33]), "positions must lie"), (range(-1, 3), "positions must lie")]:
        with pytest.raises((ropekit.ArgumentError, ropekit.ArgumentTypeError), match=words):
            table.cos_sin(positions)
    with pytest.raises(ropekit.ArgumentError, match="threads"):
        table.cos_sin(3, threads=0)
    with pytest.raises(ropekit.ArgumentError, match="layout"):
        table.cos_sin(3, layout="rows")  # type: ignore[arg-type]
    with pytest.raises(ropekit.ArgumentError, match="out"):
        table.cos_sin(3, out=(np.empty((3, 128), np.float32), np.empty((4, 128), np.float32)))


def test_a_plan_keeps_a_bounded_number_of_block_rows() -> None:
    from ropekit.tables.plan import KEPT_BLOCKS

    table = ropekit.load(LLAMA31_8B).table
    for step in range(0, 256 * (KEPT_BLOCKS + 5), 256):
        table.cos_sin([step])
    assert 0 < len(table._plan()._blocks) <= KEPT_BLOCKS


def test_kept_run_base_rows_give_the_bits_of_fresh_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs repeated from one start (every request's first prefill chunk) reuse the plan's base rows
    (:meth:`Plan.run_bases`): the values are those of a fresh plan, whatever groups were kept or
    dropped in between, and within 5e-7 of float64."""
    from ropekit.tables import plan as plan_module

    table = ropekit.load(LLAMA31_8B).table
    runs = [(0, 4096), (0, 256), (100_003, 300), (16_384 * 3 - 700, 1500), (2**31, 5000), (0, 20_000)]
    for layout in ("neox", "gptj", "half"):
        for dtype in (np.float32, np.float64):
            kept = Plan(table.inv_freq, table.attention_factor)
            for _ in range(2):  # the second time from the kept rows
                for start, count in runs:
                    fresh = Plan(table.inv_freq, table.attention_factor)
                    want = cos_sin(fresh, 0.0, range(start, start + count), dtype=dtype, layout=layout, threads=1)
                    got = cos_sin(kept, 0.0, range(start, start + count), dtype=dtype, layout=layout)
                    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    with monkeypatch.context() as patched:
        patched.setattr(plan_module, "KEPT_GROUPS", 2)  # dropped and rebuilt between calls
        small = Plan(table.inv_freq, table.attention_factor)
        for start, count in runs * 2:
            cos, sin = cos_sin(small, 0.0, range(start, start + count))
            want_cos, want_sin = exact(table, np.arange(start, start + count))
            assert len(small._runs) <= 2
            assert np.abs(cos[:, :64] - want_cos).max() <= 5e-7 and np.abs(sin[:, :64] - want_sin).max() <= 5e-7
            other_cos, other_sin = cos_sin(Plan(table.inv_freq, table.attention_factor), 0.0,
                                           range(start, start + count))
            assert np.array_equal(cos, other_cos) and np.array_equal(sin, other_sin)
