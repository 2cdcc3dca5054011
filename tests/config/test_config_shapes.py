"""The config shapes found in the wild load, and load to the right tables."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit

from ..support import SEED_CONFIG


def plain(theta: float, rotary_dim: int) -> np.ndarray:
    return np.array([theta ** (-2 * i / rotary_dim) for i in range(rotary_dim // 2)])


def test_path_directory_and_mapping_agree(tmp_path: Path) -> None:
    config = json.loads(SEED_CONFIG.read_text())
    (tmp_path / "config.json").write_text(SEED_CONFIG.read_text())
    tables = [ropekit.load(source).table for source in (config, SEED_CONFIG, str(SEED_CONFIG), tmp_path)]
    for table in tables[1:]:
        np.testing.assert_array_equal(table.inv_freq, tables[0].inv_freq)
    assert ropekit.load(tmp_path).source.endswith("config.json")


def test_callers_mapping_is_not_mutated() -> None:
    config = json.loads(SEED_CONFIG.read_text())
    before = copy.deepcopy(config)
    ropekit.load(config)
    assert config == before


def test_flat_config_has_one_full_attention_type() -> None:
    model = ropekit.load(SEED_CONFIG)
    assert list(model.tables) == ["full_attention"]
    assert model.layer_types == ("full_attention",) * 16
    assert model.for_layer(15) is model.table
    with pytest.raises(IndexError):
        model.for_layer(16)


@pytest.mark.parametrize("scaling", [None, {}])
def test_null_or_empty_scaling_is_plain(scaling: Any) -> None:
    table = ropekit.load({"head_dim": 64, "rope_theta": 10000.0, "rope_scaling": scaling}).table
    assert table.rope_type == "default"
    np.testing.assert_allclose(table.inv_freq, plain(10000.0, 64), rtol=1e-15)


def test_missing_theta_defaults_to_10000() -> None:
    table = ropekit.load({"hidden_size": 512, "num_attention_heads": 8}).table
    np.testing.assert_allclose(table.inv_freq, plain(10000.0, 64), rtol=1e-15)


def test_v5_rope_parameters_carry_theta_and_win_over_top_level() -> None:
    config = {"head_dim": 64, "rope_theta": 10000.0,
              "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
    table = ropekit.load(config).table
    assert table.geometry.theta == 500000.0 and table.to_json()["params"]["rope_theta"] == 500000.0
    np.testing.assert_allclose(table.inv_freq, plain(500000.0, 64), rtol=1e-15)


def test_legacy_type_key_and_agreeing_rope_type() -> None:
    block = {"type": "linear", "rope_type": "linear", "factor": 2.0}
    table = ropekit.load({"head_dim": 32, "rope_scaling": block}).table
    np.testing.assert_allclose(table.inv_freq, plain(10000.0, 32) / 2, rtol=1e-15)


def test_su_alias_is_longrope() -> None:
    base = {"hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
            "original_max_position_embeddings": 4096}
    block = {"short_factor": [1.5] * 32, "long_factor": [4.0] * 32}
    su = ropekit.load({**base, "rope_scaling": {"type": "su", **block}}).table
    longrope = ropekit.load({**base, "rope_scaling": {"type": "longrope", **block}}).table
    assert su.rope_type == longrope.rope_type == "longrope"
    np.testing.assert_array_equal(su.inv_freq, longrope.inv_freq)
    np.testing.assert_allclose(su.at(4097).inv_freq, plain(10000.0, 64) / 4.0, rtol=1e-15)


def test_longrope_switches_exactly_after_original_length() -> None:
    config = {"hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 32, "long_factor": [8.0] * 32,
                               "original_max_position_embeddings": 4096}}
    table = ropekit.load(config).table
    assert table.seq_len_dependent and "long_factor when seq_len > original" in table.seq_len_rule
    np.testing.assert_array_equal(table.inv_freq, table.at(4096).inv_freq)
    np.testing.assert_allclose(table.at(4097).inv_freq, table.inv_freq / 8, rtol=1e-15)
    assert table.at(4097).seq_len == 4097
    assert table.attention_factor == pytest.approx(np.sqrt(1 + np.log(4) / np.log(4096)))


def test_text_config_is_read_with_its_path() -> None:
    text: dict[str, Any] = {"hidden_size": 2048, "num_attention_heads": 16, "rope_theta": 1000000.0,
            "rope_scaling": {"rope_type": "linear", "factor": -1.0}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({"model_type": "llava", "text_config": text, "vision_config": {"hidden_size": 1}})
    assert caught.value.path == "text_config.rope_scaling.factor"
    text["rope_scaling"]["factor"] = 2.0
    table = ropekit.load({"text_config": text}).table
    np.testing.assert_allclose(table.inv_freq, plain(1e6, 128) / 2, rtol=1e-15)


def test_nested_per_layer_parameters() -> None:
    config = {"head_dim": 128, "num_hidden_layers": 4,
              "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
              "rope_parameters": {
                  "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    model = ropekit.load(config)
    assert model.layer_types[3] == "full_attention"
    first, fourth = model.for_layer(0), model.for_layer(3)
    assert first is not None and fourth is not None
    assert first.rope_type == "default"
    np.testing.assert_allclose(fourth.inv_freq, plain(1e6, 128) / 8, rtol=1e-15)
    np.testing.assert_allclose(model.rotating_table("sliding_attention").inv_freq, plain(1e4, 128), rtol=1e-15)


def test_nested_error_path_names_the_layer_type() -> None:
    config = {"head_dim": 128, "rope_parameters": {"full_attention": {"rope_type": "linear"},
                                                   "sliding_attention": {"rope_type": "default"}}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_parameters.full_attention.factor"


def test_gemma3_local_base_freq_derives_layer_types() -> None:
    config = {"head_dim": 256, "num_hidden_layers": 12, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
              "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    model = ropekit.load(config)
    assert model.layer_types.count("full_attention") == 2 and model.layer_types[5] == "full_attention"
    np.testing.assert_allclose(model.rotating_table("sliding_attention").inv_freq, plain(1e4, 256), rtol=1e-15)
    np.testing.assert_allclose(model.rotating_table("full_attention").inv_freq, plain(1e6, 256) / 8, rtol=1e-15)


def test_geometry_keys() -> None:
    neox = ropekit.load({"hidden_size": 2048, "num_attention_heads": 16, "rotary_pct": 0.25,
                         "rotary_emb_base": 10000}).table
    assert (neox.head_dim, neox.rotary_dim) == (128, 32)
    deepseek = ropekit.load({"hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
                             "qk_nope_head_dim": 128}).table
    assert deepseek.rotary_dim == 64
    qwen3 = ropekit.load({"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128}).table
    assert qwen3.rotary_dim == 128


def test_proportional_is_not_partial_rotary() -> None:
    config = {"head_dim": 256, "global_head_dim": 512, "num_hidden_layers": 2,
              "layer_types": ["sliding_attention", "full_attention"],
              "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                     "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    table = ropekit.load(config).rotating_table("full_attention")
    assert len(table.inv_freq) == 256 and table.rotary_dim == 512
    np.testing.assert_allclose(table.inv_freq[:64], [1e6 ** (-2 * i / 512) for i in range(64)], rtol=1e-15)
    assert np.all(table.inv_freq[64:] == 0)


def test_tables_per_layer_type_without_a_layer_plan_are_refused_at_load() -> None:
    """No crash after load: tables per layer type, and neither layer_types nor a layer count to place
    them by, is refused when loaded, not at the first ``for_layer``."""
    config = {"head_dim": 128, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                                   "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    with pytest.raises(ropekit.RopeConfigError, match="which layers use which") as caught:
        ropekit.load(config)
    assert caught.value.path == "num_hidden_layers"


def test_tables_are_read_only_float64() -> None:
    table = ropekit.load(SEED_CONFIG).table
    assert table.inv_freq.dtype == np.float64
    with pytest.raises(ValueError, match="read-only"):
        table.inv_freq[0] = 1.0


def test_explicit_values_are_never_overwritten_by_defaults() -> None:
    config = {"head_dim": 64, "max_position_embeddings": 65536,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 8.0, "truncate": False,
                               "attention_factor": 0.5, "original_max_position_embeddings": 8192}}
    params = ropekit.load(config).table.params
    assert (params["beta_fast"], params["beta_slow"], params["truncate"]) == (8.0, 1.0, False)
    assert ropekit.load(config).table.attention_factor == 0.5


def test_mrope_alias_and_sections_are_exposed() -> None:
    config = {"hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1e6,
              "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    table = ropekit.load(config).table
    assert table.rope_type == "default"
    assert table.mrope_section == (16, 24, 24) and table.mrope_interleaved is False
    assert table.to_json()["mrope_section"] == [16, 24, 24]


@pytest.mark.parametrize("key", ["mrope_interleaved", "interleaved"])
def test_mrope_interleaved_and_its_synonym(key: str) -> None:
    config: dict[str, Any] = {"head_dim": 128, "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], key: True}}
    assert ropekit.load(config).table.mrope_interleaved is True
    config["rope_scaling"].update({"mrope_interleaved": True, "interleaved": False})
    with pytest.raises(ropekit.RopeConfigError, match="conflicts with mrope_interleaved") as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.interleaved"


def test_phimoe_mscale_is_the_attention_factor_in_its_regime() -> None:
    config = {"hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
              "original_max_position_embeddings": 4096,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 32, "long_factor": [2.0] * 32,
                               "short_mscale": 1.1, "long_mscale": 1.3}}
    table = ropekit.load(config).table
    assert (table.attention_factor, table.at(4096).attention_factor, table.at(4097).attention_factor) == (1.1, 1.1, 1.3)


def test_mla_rotary_dim_with_and_without_partial_factor() -> None:
    deepseek = {"hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128}
    assert ropekit.load(deepseek).table.rotary_dim == 64
    mistral4: dict[str, Any] = {**deepseek, "qk_nope_head_dim": 64, "rope_parameters": {"rope_type": "default",
                                                                       "partial_rotary_factor": 0.5}}
    table = ropekit.load(mistral4).table
    # the factor over the whole 128-channel head names the 64-channel rope sub-head after the unrotated one:
    # served as the table's head, as DeepSeek's (issue #31: a table over 128 would rotate channels 0..63)
    assert (table.head_dim, table.rotary_dim) == (64, 64)
    mistral4["rope_parameters"]["partial_rotary_factor"] = 0.25
    with pytest.raises(ropekit.RopeConfigError, match="qk_rope_head_dim is 64") as caught:
        ropekit.load(mistral4)
    assert caught.value.path == "rope_parameters.partial_rotary_factor"


def test_layers_without_rope_are_named() -> None:
    config = {"head_dim": 64, "layer_types": ["conv", "sliding_attention", "full_attention"],
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    model = ropekit.load(config)
    third = model.for_layer(2)
    assert third is not None and third.geometry.theta == 1e6
    assert model.for_layer(0) is None  # a conv layer applies no RoPE: no table, never a guessed one
    assert model.to_json()["layers"]["conv"] == {"no_rope": True}


def test_flat_config_reports_declared_layer_types() -> None:
    config = {"head_dim": 256, "partial_rotary_factor": 0.25, "rope_theta": 1e7, "num_hidden_layers": 4,
              "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
    model = ropekit.load(config)
    assert list(model.tables) == ["full_attention"]
    assert model.layer_types == ("linear_attention",) * 3 + ("full_attention",)
    assert model.for_layer(3) is model.rotating_table()
