"""Every bad-input class the README lists raises RopeConfigError naming the JSON path."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit

BASE: dict[str, Any] = {
    "hidden_size": 2048, "num_attention_heads": 32, "head_dim": 64, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}


def with_change(path: str, value: Any) -> dict[str, Any]:
    config = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    target = config
    for part in parents:
        target = target[part]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return config


@pytest.mark.parametrize(
    ("path", "value", "named", "words"),
    [
        ("rope_scaling.factor", KeyError, "rope_scaling.factor", "missing"),
        ("rope_scaling.low_freq_factor", KeyError, "rope_scaling.low_freq_factor", "missing"),
        ("rope_scaling.bogus", 1.0, "rope_scaling.bogus", "unknown key"),
        ("rope_scaling.factor", "32", "rope_scaling.factor", "expected a number"),
        ("rope_scaling.factor", True, "rope_scaling.factor", "expected a number"),
        ("rope_scaling.factor", float("nan"), "rope_scaling.factor", "finite"),
        ("rope_scaling.factor", float("inf"), "rope_scaling.factor", "finite"),
        ("rope_scaling.factor", 0.0, "rope_scaling.factor", ">= 1"),
        ("rope_scaling.factor", -2.0, "rope_scaling.factor", ">= 1"),
        ("rope_scaling.high_freq_factor", 0.5, "rope_scaling.high_freq_factor", ">= low_freq_factor"),
        ("rope_scaling.original_max_position_embeddings", 8192.5, "original_max_position_embeddings", "integer"),
        ("rope_theta", 0, "rope_theta", "(1, 1e+30]"),
        ("rope_theta", -10000.0, "rope_theta", "(1, 1e+30]"),
        ("rope_theta", 5e-324, "rope_theta", "(1, 1e+30]"),
        ("rope_theta", 10**400, "rope_theta", "401 digits"),
        ("rope_theta", False, "rope_theta", "expected a number"),
        ("rope_theta", float("nan"), "rope_theta", "finite"),
        ("partial_rotary_factor", 1.5, "partial_rotary_factor", "(0, 1]"),
        ("partial_rotary_factor", 0.0, "partial_rotary_factor", "(0, 1]"),
        ("partial_rotary_factor", 1e31, "partial_rotary_factor", "(0, 1]"),
        ("partial_rotary_factor", 0.3, "partial_rotary_factor", "even"),
        ("head_dim", 63, "head_dim", "even"),
        ("head_dim", -64, "head_dim", "positive integer"),
        ("rope_scaling.type", "yarn", "rope_scaling.type", "conflicts with rope_type"),
        ("rope_scaling.rope_type", KeyError, "rope_scaling.rope_type", "no rope_type"),
        ("rope_scaling.rope_type", 3, "rope_scaling.rope_type", "string"),
        ("rope_scaling", [1, 2], "rope_scaling", "expected an object"),
    ],
)
def test_bad_value_names_the_path(path: str, value: Any, named: str, words: str) -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(with_change(path, value))
    assert named in caught.value.path
    assert words in str(caught.value)


def test_unknown_rope_type_lists_registered_and_suggests() -> None:
    with pytest.raises(ropekit.UnknownRopeTypeError) as caught:
        ropekit.load(with_change("rope_scaling.rope_type", "lama3"))
    message = str(caught.value)
    assert caught.value.path == "rope_scaling.rope_type"
    assert "did you mean 'llama3'" in message
    assert "longrope" in message and "ropekit.schemes" in message


def test_unknown_rope_type_never_falls_back_to_plain() -> None:
    config = {"head_dim": 64, "rope_scaling": {"rope_type": "ntk_by_parts_v9", "factor": 4.0}}
    with pytest.raises(ropekit.UnknownRopeTypeError):
        ropekit.load(config)


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="did you mean 'low_freq_factor'") as caught:
        ropekit.load(with_change("rope_scaling.low_freq_factr", 1.0))
    assert caught.value.path == "rope_scaling.low_freq_factr"


def test_wrong_length_factor_list() -> None:
    config = {"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
              "original_max_position_embeddings": 4096,
              "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.0] * 47}}
    with pytest.raises(ropekit.RopeConfigError, match=r"one entry per rotary pair \(48") as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.long_factor"


def test_bad_list_element_names_its_index() -> None:
    factors = [1.0] * 48
    factors[7] = -1.0
    config = {"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
              "rope_scaling": {"type": "longrope", "short_factor": factors, "long_factor": [1.0] * 48,
                               "original_max_position_embeddings": 4096}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.short_factor[7]"


def test_conflicting_original_max_positions() -> None:
    config = with_change("original_max_position_embeddings", 4096)
    with pytest.raises(ropekit.RopeConfigError, match="conflicts with original_max_position_embeddings"):
        ropekit.load(config)


def test_rope_scaling_and_parameters_that_disagree() -> None:
    config = copy.deepcopy(BASE)
    config["rope_parameters"] = {**BASE["rope_scaling"], "factor": 8.0}
    with pytest.raises(ropekit.RopeConfigError, match="conflicts with rope_parameters") as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling"


def test_missing_geometry() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="head_dim, or hidden_size and num_attention_heads"):
        ropekit.load({"rope_theta": 10000.0})


def test_mrope_section_must_sum_to_pairs() -> None:
    config = {"head_dim": 128, "rope_scaling": {"type": "default", "mrope_section": [16, 24, 16]}}
    with pytest.raises(ropekit.RopeConfigError, match="must sum to rotary_dim / 2 = 64") as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.mrope_section"


def test_dynamic_needs_max_positions() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="missing: rope_type 'dynamic' needs it") as caught:
        ropekit.load({"head_dim": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})
    assert caught.value.path == "max_position_embeddings"  # blamed where the key belongs, not on factor


def test_scheme_checks_blame_keys_where_they_are() -> None:
    """A scheme's check may name a config key; the path is where the config states it."""
    config = {"text_config": {"head_dim": 16, "rope_theta": 1.0, "max_position_embeddings": 256,
                              "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 64}}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == "text_config.rope_theta"
    v5 = {"head_dim": 16, "max_position_embeddings": 256,
          "rope_parameters": {"rope_type": "yarn", "rope_theta": 1.0, "factor": 4.0,
                              "original_max_position_embeddings": 64}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(v5)
    assert caught.value.path == "rope_parameters.rope_theta"


def test_yarn_beta_order() -> None:
    config = {"head_dim": 64, "max_position_embeddings": 32768,
              "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 1.0, "beta_slow": 32.0,
                               "original_max_position_embeddings": 4096}}
    with pytest.raises(ropekit.RopeConfigError, match=">= beta_slow") as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.beta_fast"


def test_lenient_downgrades_only_unknown_keys() -> None:
    with pytest.warns(UserWarning, match=r"rope_scaling\.bogus: unknown key"):
        model = ropekit.load(with_change("rope_scaling.bogus", 1.0), strict=False)
    assert model.table.rope_type == "llama3"
    with pytest.raises(ropekit.RopeConfigError):
        ropekit.load(with_change("rope_scaling.factor", -1.0), strict=False)


def test_unreadable_sources(tmp_path: Path) -> None:
    with pytest.raises(ropekit.ConfigSourceError, match="no such file"):
        ropekit.load(tmp_path / "missing.json")
    with pytest.raises(ropekit.ConfigSourceError, match="no such file"):
        ropekit.load(tmp_path)  # a directory without config.json
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ropekit.ConfigSourceError, match="not valid JSON"):
        ropekit.load(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ropekit.ConfigSourceError, match="expected a JSON object"):
        ropekit.load(tmp_path)


def test_nan_in_a_file_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(BASE).replace('"factor": 32.0', '"factor": NaN'))
    with pytest.raises(ropekit.RopeConfigError, match="finite") as caught:
        ropekit.load(path)
    assert caught.value.path == "rope_scaling.factor"


def test_errors_form_one_hierarchy() -> None:
    assert issubclass(ropekit.UnknownRopeTypeError, ropekit.RopeConfigError)
    assert issubclass(ropekit.RopeConfigError, ropekit.RopekitError)
    assert issubclass(ropekit.RopeConfigError, ValueError)
    for error in (ropekit.PluginLoadError, ropekit.DuplicateSchemeError, ropekit.InvalidTableError,
                  ropekit.SchemeMismatchError, ropekit.PluginBlockedError, ropekit.SchemeDeclarationError):
        assert issubclass(error, ropekit.PluginError)
        assert issubclass(error, ropekit.RopekitError)


# Regressions found by tests/test_fuzz.py: each used to escape as a plugin fault or exhaust memory.
@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"head_dim": 8, "max_position_embeddings": 256,
          "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
                           "original_max_position_embeddings": 1}}, "rope_scaling.original_max_position_embeddings"),
        ({"head_dim": 16, "rope_theta": 1.0, "max_position_embeddings": 256,
          "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}},
         "rope_theta"),
        ({"num_hidden_layers": 339456928.0, "head_dim": 8}, "num_hidden_layers"),
        ({"head_dim": 8, "max_position_embeddings": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 1e300}},
         "rope_scaling.factor"),
        ({"head_dim": 8, "rope_scaling": {"rope_type": "linear", "factor": 5e-324}}, "rope_scaling.factor"),
        ({"head_dim": 8, "rope_theta": 1e300}, "rope_theta"),
        ({"head_dim": 18219869514374560}, "head_dim"),
    ],
)
def test_fuzz_regressions_are_config_errors(config: dict[str, Any], path: str) -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == path


def test_dynamic_large_factor_is_exactly_plain_at_load() -> None:
    config = {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 1e5}}
    table = ropekit.load(config).table
    np.testing.assert_array_equal(table.inv_freq, ropekit.plain_inv_freq(10000.0, 64))
    with pytest.raises(ropekit.ArgumentError, match=r"seq_len") as caught:
        table.at(1 << 41)
    assert not isinstance(caught.value, ropekit.RopeConfigError)  # a wrong argument, not a wrong config


def test_yarn_with_an_enormous_beta_still_builds() -> None:
    config = {"head_dim": 16, "max_position_embeddings": 256,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                               "beta_fast": 2.8e307}}
    table = ropekit.load(config).table
    assert np.all(np.isfinite(table.inv_freq))


def test_a_byte_order_mark_is_dropped_once(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(BASE).encode())
    assert ropekit.load(path).table.rope_type == "llama3"
    path.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf" + json.dumps(BASE).encode())  # a second one is not JSON
    with pytest.raises(ropekit.ConfigSourceError, match="not valid JSON"):
        ropekit.load(path)


def test_proportional_refuses_a_factor_that_rotates_no_pair() -> None:
    """Found by attack: a partial_rotary_factor rotating zero pairs served a table of zeros."""
    config = {"head_dim": 8, "partial_rotary_factor": 0.1, "rope_parameters": {"rope_type": "proportional"}}
    with pytest.raises(ropekit.RopeConfigError, match=r"rotates int\(0.1 \* head_dim 8 // 2\) = 0 pairs") as caught:
        ropekit.load(config)
    assert caught.value.path == "partial_rotary_factor"
    one_pair = ropekit.load({**config, "partial_rotary_factor": 0.25}).table.inv_freq
    assert one_pair.tolist() == [1.0, 0.0, 0.0, 0.0]
