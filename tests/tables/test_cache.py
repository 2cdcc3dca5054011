"""Answers that cannot be misused: cos/sin arrays that know their layout, ``table.apply``, one table
only where there is one, and the seq-len regime in ``gap`` and ``export``."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ropekit
from ropekit.tables.gap import gap_report

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "tests" / "data" / "configs" / "published"
LLAMA32 = ROOT / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"
LLAMA31_8B = PUBLISHED / "llama-3.1-8b.json"


def _reference(x: np.ndarray[Any, Any], inv_freq: np.ndarray[Any, Any], positions: Any, factor: float,
               layout: str) -> np.ndarray[Any, Any]:
    """transformers' rotation in float64: rotate-half (neox) or interleaved pairs (gptj)."""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angles) * factor, np.sin(angles) * factor
    dim = 2 * inv_freq.shape[0]
    rot, rest = x[..., :dim].astype(np.float64), x[..., dim:]
    if layout == "neox":
        half = dim // 2
        full_cos, full_sin = np.concatenate((cos, cos), -1), np.concatenate((sin, sin), -1)
        turned = np.concatenate((-rot[..., half:], rot[..., :half]), axis=-1)
    else:
        full_cos, full_sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        turned = np.stack((-rot[..., 1::2], rot[..., 0::2]), axis=-1).reshape(rot.shape)
    return np.concatenate((rot * full_cos + turned * full_sin, rest), axis=-1)


def _qk(rows: int, head_dim: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((4, rows, head_dim)).astype(np.float32),
            rng.standard_normal((2, rows, head_dim)).astype(np.float32))


def _described(array: Any) -> ropekit.CosSinArray:
    """``array`` as what numpy made of a CosSinArray (the stubs type it a plain ndarray)."""
    assert isinstance(array, ropekit.CosSinArray)
    return array


# --- a cache knows what it is ------------------------------------------------------------------

def test_cos_sin_arrays_carry_layout_factor_and_positions() -> None:
    table = ropekit.load(LLAMA31_8B).table
    cos, sin = table.cos_sin(range(4096, 4100), layout="gptj")
    assert isinstance(cos, ropekit.CosSinArray) and isinstance(cos, np.ndarray)
    assert (cos.layout, sin.layout, cos.part, sin.part) == ("gptj", "gptj", "cos", "sin")
    assert cos.attention_factor == table.attention_factor == 1.0
    assert cos.positions == range(4096, 4100) and (cos.rope_type, cos.layer_type) == ("llama3", "full_attention")
    listed = [9, 3, 70000]
    cos, _ = table.cos_sin(listed)
    listed[0] = 1  # the caller's list changing later does not change what the cache says it holds
    assert cos.positions.tolist() == [9, 3, 70000] and not cos.positions.flags.writeable  # type: ignore[union-attr]
    assert table.cos_sin(5)[0].positions == range(5) and table.cos_sin(5)[0].layout == "neox"


def test_what_survives_slicing_arithmetic_and_pickling() -> None:
    cos, _ = ropekit.load(LLAMA31_8B).table.cos_sin(range(10), layout="gptj")
    rows, again = _described(cos[2:5]), _described(cos[2:5][1:])
    assert rows.layout == again.layout == "gptj" and rows.part == "cos"  # views keep what the columns are
    assert rows.positions is None and rows.attention_factor is None  # ... not what the rows were
    # a new array or other columns describe nothing
    for made in (2 * cos, cos.astype(np.float16), cos[[1, 2]], cos[:, :64], cos.T, cos.reshape(20, 64)):
        assert _described(made).layout is None and _described(made).derived
    assert repr(cos[:, :3]).startswith("array(")  # and it prints as the plain array it is
    back = pickle.loads(pickle.dumps(cos))
    assert back.layout == "gptj" and back.positions == range(10) and np.array_equal(back, cos)
    sliced_back = pickle.loads(pickle.dumps(cos[1:3]))
    assert sliced_back.layout == "gptj" and sliced_back.positions is None


def test_apply_rotary_will_not_guess_the_layout_of_a_derived_cache() -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(4, table.head_dim)
    cos, sin = table.cos_sin(range(8), layout="gptj")
    with pytest.raises(ropekit.ArgumentError, match="no longer says its layout; state layout="):
        ropekit.apply_rotary(q, k, cos.astype(np.float16)[:4], sin.astype(np.float16)[:4])
    # row slices keep their layout, so the usual engine pattern needs nothing stated
    sliced = ropekit.apply_rotary(q, k, cos[4:8], sin[4:8])[0]
    np.testing.assert_allclose(sliced, _reference(q, table.inv_freq, range(4, 8), 1.0, "gptj"), atol=3e-5)
    with pytest.raises(ropekit.ArgumentError, match="contradicts the cache"):
        ropekit.apply_rotary(q, k, cos[4:8], sin[4:8], layout="neox")
    stated = ropekit.apply_rotary(q, k, cos[4:8] * 1.0, sin[4:8] * 1.0, layout="gptj")[0]
    np.testing.assert_allclose(stated, sliced, atol=1e-6)


def test_rows_hand_out_described_arrays_too() -> None:
    table = ropekit.load(LLAMA31_8B).table
    rows = table.rows(64, layout="gptj")
    cos, sin = rows.cos_sin(range(8, 12))
    assert (cos.layout, cos.part, sin.part, cos.attention_factor) == ("gptj", "cos", "sin", 1.0)
    assert cos.positions == range(8, 12) and cos.rope_type == "llama3"
    assert np.array_equal(cos, table.cos_sin(range(8, 12), layout="gptj")[0])


@pytest.mark.parametrize("layout", ["neox", "gptj"])
def test_apply_rotary_takes_the_layout_from_the_cache(layout: Literal["neox", "gptj"]) -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(16, table.head_dim)
    cos, sin = table.cos_sin(range(4096, 4112), layout=layout)
    q_rot, k_rot = ropekit.apply_rotary(q, k, cos, sin)  # no layout stated: the cache's
    positions = np.arange(4096, 4112)
    np.testing.assert_allclose(q_rot, _reference(q, table.inv_freq, positions, 1.0, layout), atol=3e-5)
    np.testing.assert_allclose(k_rot, _reference(k, table.inv_freq, positions, 1.0, layout), atol=3e-5)
    same, _ = ropekit.apply_rotary(q, k, cos, sin, layout=layout)  # the same layout, stated: allowed
    assert np.array_equal(same, q_rot)


def test_the_readme_misuse_raises_instead_of_rotating_wrongly() -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(16, table.head_dim)
    cos_buf, sin_buf = np.empty((16, 128), np.float32), np.empty((16, 128), np.float32)
    cos, sin = table.cos_sin(range(4096, 4112), layout="gptj", out=(cos_buf, sin_buf))
    assert np.shares_memory(cos, cos_buf) and cos.base is cos_buf
    with pytest.raises(ropekit.ArgumentError, match="layout='neox' contradicts the cache.*gptj") as caught:
        ropekit.apply_rotary(q, k, cos, sin, layout="neox")
    assert caught.value.argument == "layout"
    # what the misuse would have served: far from the right rotation (the issue measured 5.67)
    wrong = ropekit.apply_rotary(q, k, np.asarray(cos), np.asarray(sin), layout="neox")[0]
    right = ropekit.apply_rotary(q, k, cos, sin)[0]
    assert float(np.abs(wrong - right).max()) > 1.0


def test_swapped_or_mixed_caches_are_refused() -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(4, table.head_dim)
    cos, sin = table.cos_sin(4)
    with pytest.raises(ropekit.ArgumentError, match="is the sin of a cos/sin cache, passed as cos"):
        ropekit.apply_rotary(q, k, sin, cos)
    _, gptj_sin = table.cos_sin(4, layout="gptj")
    with pytest.raises(ropekit.ArgumentError, match="cos is a neox cache and sin a gptj one"):
        ropekit.apply_rotary(q, k, cos, gptj_sin)


def test_plain_arrays_keep_the_explicit_layout_default_neox() -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(4, table.head_dim)
    cos, sin = (np.asarray(part) for part in table.cos_sin(4, layout="gptj"))
    explicit = ropekit.apply_rotary(q, k, cos, sin, layout="gptj")[0]
    np.testing.assert_allclose(explicit, _reference(q, table.inv_freq, range(4), 1.0, "gptj"), atol=3e-5)
    neox_cos, neox_sin = (np.asarray(part) for part in table.cos_sin(4))
    default = ropekit.apply_rotary(q, k, neox_cos, neox_sin)[0]  # plain: neox, the caller's responsibility
    np.testing.assert_allclose(default, _reference(q, table.inv_freq, range(4), 1.0, "neox"), atol=3e-5)


def test_a_half_cache_still_needs_the_pairing() -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(4, table.head_dim)
    cos, sin = table.cos_sin(4, layout="half")
    with pytest.raises(ropekit.ArgumentError, match="pairing"):
        ropekit.apply_rotary(q, k, cos, sin)
    rotated = ropekit.apply_rotary(q, k, cos, sin, pairing="gptj")[0]
    np.testing.assert_allclose(rotated, _reference(q, table.inv_freq, range(4), 1.0, "gptj"), atol=3e-5)


# --- table.apply: the documented path -----------------------------------------------------------

def test_apply_uses_the_tables_layout_and_attention_factor() -> None:
    config = json.loads((PUBLISHED / "gpt-oss-20b.json").read_text())  # yarn: attention factor 1.3466
    table = ropekit.load(config).for_layer(0)
    assert table is not None and table.attention_factor != 1.0
    q, k = _qk(8, table.head_dim)
    q_rot, _ = table.apply(q, k, [0, 5, 9, 100, 4000, 7, 8, 131071])
    want = _reference(q, table.inv_freq, [0, 5, 9, 100, 4000, 7, 8, 131071], table.attention_factor, "neox")
    np.testing.assert_allclose(q_rot, want, atol=5e-5)


def test_apply_takes_the_regime_the_positions_imply() -> None:
    table = ropekit.load(PUBLISHED / "phi-3.5-mini-instruct.json").table  # longrope, switches at 4096
    q, k = _qk(4, table.head_dim)
    short_positions, long_positions = [0, 1, 2, 4095], [0, 1, 2, 4096]
    short = table.apply(q, k, short_positions)[0]
    long = table.apply(q, k, long_positions)[0]
    at_long = table.at(4097)
    np.testing.assert_allclose(short, _reference(q, table.inv_freq, short_positions, table.attention_factor, "neox"),
                               atol=5e-5)
    np.testing.assert_allclose(long, _reference(q, at_long.inv_freq, long_positions, at_long.attention_factor,
                                                "neox"), atol=5e-5)
    assert not np.allclose(at_long.inv_freq, table.inv_freq)
    with pytest.raises(ropekit.ArgumentError, match="position 4096 lies past this table's seq_len 4000"):
        table.at(4000).apply(q, k, long_positions)
    with pytest.raises(ropekit.ArgumentError, match="shorter than the positions"):
        table.apply(q, k, long_positions, seq_len=100)
    np.testing.assert_array_equal(table.apply(q, k, short_positions, seq_len=8192)[0],
                                  table.at(8192).apply(q, k, short_positions)[0])


def test_apply_checks_its_arguments() -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(4, table.head_dim)
    with pytest.raises(ropekit.ArgumentError, match="3 positions for q of shape"):
        table.apply(q, k, [0, 1, 2])
    with pytest.raises(ropekit.ArgumentTypeError, match="seq_len"):
        table.apply(q, k, 4, seq_len="4")  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 1 << 20), min_size=1, max_size=24), st.sampled_from(["neox", "gptj"]))
def test_a_cache_applied_without_a_layout_always_rotates_as_built(
    positions: list[int], layout: Literal["neox", "gptj"],
) -> None:
    table = ropekit.load(LLAMA31_8B).table
    q, k = _qk(len(positions), table.head_dim)
    cos, sin = table.cos_sin(positions, layout=layout)
    rotated = ropekit.apply_rotary(q, k, cos, sin)[0]
    np.testing.assert_allclose(rotated, _reference(q, table.inv_freq, positions, 1.0, layout), atol=5e-5)


# --- one table only where there is one ----------------------------------------------------------

def test_table_refuses_a_model_whose_layers_use_several_tables_or_none() -> None:
    for name, shown in (("gemma-3-1b-it.json", "sliding_attention (default, theta 10000)"),
                        ("smollm3-3b.json", "layers 3, 7, 11"),
                        ("qwen3-next-80b-a3b-thinking.json", "linear_attention (no RoPE)")):
        model = ropekit.load(PUBLISHED / name)
        with pytest.raises(ropekit.LayerLookupError, match="for_layer") as caught:
            model.table  # noqa: B018 - the property raises
        assert shown in str(caught.value) and caught.value.argument == "table", name
        assert isinstance(caught.value, LookupError)


def test_a_model_of_one_table_still_answers_table() -> None:
    gpt_oss = ropekit.load(PUBLISHED / "gpt-oss-20b.json")  # sliding and full layers share one yarn table
    assert gpt_oss.table is gpt_oss.for_layer(0) is gpt_oss.for_layer(1)
    assert ropekit.load(LLAMA32).table.rope_type == "llama3"


def test_every_listed_layer_type_is_answered() -> None:
    gpt_oss = ropekit.load(PUBLISHED / "gpt-oss-20b.json")
    assert gpt_oss.listed_types == ("sliding_attention", "full_attention")
    assert gpt_oss["sliding_attention"] is gpt_oss["full_attention"] is gpt_oss.table
    document = gpt_oss.to_json()
    assert list(document["layers"]) == ["sliding_attention", "full_attention"]
    assert document["layers"]["sliding_attention"] == document["layers"]["full_attention"]
    assert list(gap_report(gpt_oss, (128,))["layers"]) == ["sliding_attention", "full_attention"]
    qwen3_next = ropekit.load(PUBLISHED / "qwen3-next-80b-a3b-thinking.json")
    assert qwen3_next["linear_attention"] is None and qwen3_next["full_attention"] is not None
    gemma = ropekit.load(PUBLISHED / "gemma-3-1b-it.json")
    assert gemma["sliding_attention"].geometry.theta == 10000.0  # type: ignore[union-attr]
    assert gemma["full_attention"].geometry.theta == 1000000.0  # type: ignore[union-attr]
    with pytest.raises(ropekit.LayerLookupError, match="'chunked_attention' is not a layer type of this model; it "
                       "has 'sliding_attention', 'full_attention'"):
        gemma["chunked_attention"]


def test_for_layer_checks_its_index() -> None:
    model = ropekit.load(PUBLISHED / "gemma-3-1b-it.json")
    count = len(model.layer_types)
    with pytest.raises(ropekit.LayerIndexError, match=f"layer {count} out of range"):
        model.for_layer(count)
    with pytest.raises(IndexError):  # still an IndexError for code that catches one
        model.for_layer(-1)
    with pytest.raises(ropekit.ArgumentTypeError, match="expected a layer index"):
        model.for_layer("0")  # type: ignore[arg-type]


# --- the seq-len regime in every answer ---------------------------------------------------------

def test_gap_takes_the_regime_of_the_largest_position() -> None:
    model = ropekit.load(PUBLISHED / "phi-3.5-mini-instruct.json")
    layer = gap_report(model, (131072,))["layers"]["full_attention"]
    assert layer["seq_len"] == 131073 and layer["switch_at"] == 4096 and "long_factor" in layer["seq_len_rule"]
    assert round(layer["positions"]["131072"]["max_angle_error"]) == 22575
    assert layer["positions"]["131072"]["pairs_over_0.1rad"] == 48
    short = gap_report(model, (131072,), seq_len=100)["layers"]["full_attention"]
    assert short["seq_len"] == 100 and round(short["positions"]["131072"]["max_angle_error"]) == 2897
    assert short["positions"]["131072"]["pairs_over_0.1rad"] == 47
    within = gap_report(model, (128, 4095))["layers"]["full_attention"]
    assert within["seq_len"] == 4096 and within["scaled_pairs"] == short["scaled_pairs"]


def test_export_caches_are_the_table_of_their_length(tmp_path: Path) -> None:
    from ropekit.tools.export import export

    model = ropekit.load(PUBLISHED / "phi-3.5-mini-instruct.json")
    manifest = export(model, tmp_path / "out", positions=5000)
    layer = manifest["layers"]["full_attention"]
    assert layer["files"]["cos"]["seq_len"] == 5000 and layer["switch_at"] == 4096
    cos = np.load(tmp_path / "out" / layer["files"]["cos"]["npy"])
    want = np.asarray(model.table.at(5000).cos_sin(5000)[0])
    assert np.array_equal(cos, want) and not np.array_equal(cos, np.asarray(model.table.cos_sin(5000)[0]))
