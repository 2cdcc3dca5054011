"""The built-in family declarations (``plugins/families/``): each family's published configs give
the table its own remote code computes (numpy ports in ``scripts/family_reference.py``, the code
quoted in ``tests/data/configs/published/REMOTE_CODE.md``), each declaration passes the conformance
suite a third party's would, and what the code refuses is refused by name."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit import Registry
from ropekit.testing import check_family

from ..support import CONFIGS, load_script

FAMILIES = CONFIGS / "families"
REFERENCE: dict[str, Any] = json.loads((FAMILIES / "reference.json").read_text(encoding="utf-8"))
BUILTIN = Registry(read_env=False).families
BUILTIN_TYPES = sorted(name for name in BUILTIN.names() if (owner := BUILTIN.owner(name)) and
                       owner.distribution == "ropekit")
WRAPPERS = sorted(name for name in BUILTIN_TYPES if (family := BUILTIN.family(name)) and family.language_model)
REFUSING = sorted(name for name in BUILTIN_TYPES if (family := BUILTIN.family(name)) and (family.unserved or
                                                                                           family.no_rope))
ROTATING = sorted(set(BUILTIN_TYPES) - set(WRAPPERS) - set(REFUSING))
CASES = sorted(name for name in REFERENCE
               if json.loads((FAMILIES / name.split("@")[0]).read_text()).get("model_type") in BUILTIN_TYPES)

EXPECTED_WARNINGS = {
    # MiMo's config states use_mrope false; Qwen2's code reads no such key, and false is what is served
    "mimo-7b-base.json": [r"^use_mrope: not read by ropekit; its value False states what ropekit serves"],
}


def _load(name: str) -> ropekit.ModelRope:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ropekit.load(FAMILIES / name)
    expected = EXPECTED_WARNINGS.get(name, [])
    messages = [str(warning.message) for warning in caught]
    assert len(messages) == len(expected), messages
    for message, pattern in zip(messages, expected, strict=True):
        assert re.search(pattern, message), message
    return model


NO_PUBLISHED_CONFIG = {
    "solar": "no Solar config.json copy was found (find_string '\"model_type\": \"solar\"' finds only other projects)",
    "ling-v2": "no verbatim Ling 2.0 config.json: only the vendor's exporter template (Ling-V2@af8837e "
               "tools/convert_dcp_to_safetensors.py:190-229) and shrunk test fixtures",
    "pangu_ultra_moe": "no openPangu-Ultra-MoE config.json copy was found (its keys are known from the config class)",
    "step3_text": "no Step-3 config.json copy was found; only its configuration class",
    "telechat3": "no TeleChat3 config.json copy was found; only its configuration class",
    "nanbeige": "no Nanbeige config.json copy was found; only its configuration class",
    "llama_bidirec": "no llama_bidirec config.json copy was found (vLLM's registry and config class only)",
    "iquestloopcoder": "only third-party copies of IQuest-Coder's config.json (an MLX port's and a Swift test's)",
    "minicpmo": "no MiniCPM-o config.json copy was found; only its configuration classes",
    "longcat_flash_ngram": "no LongCat-Flash-Lite config.json copy was found; its keys are LongcatFlashConfig's",
    "minimax_m3_text": "a vLLM name: published MiniMax-M3 configs are minimax_m3_vl with this as text_config",
    "mimo_v2": "no verbatim MiMo-V2.5/V2.6 config.json; its keys from test fixtures quoting it (GPTQModel, a C++ port)",
    "k2_horizon": "no verbatim K2-Horizon config.json; an MLX adapter's 'released config contract' and test fixtures",
    "new": "no verbatim GTE config.json; its keys from copies quoting gte-base-en-v1.5 and gte-multilingual-base",
    "minimax_m3_mtp": "a vLLM name for a standalone MTP head's config (one MiniMax-M3 text layer)",
    "TeleFLM": "no Tele-FLM config.json copy was found (only its model card)",
    "k3_dspark": "vLLM's own draft model for Kimi-K3: no published config.json was found",
}
"""Rotating built-in families served without a published config to check: each says what was searched."""


def test_every_builtin_family_that_rotates_has_a_config_checked_against_its_code() -> None:
    checked = {json.loads((FAMILIES / name.split("@")[0]).read_text())["model_type"] for name in CASES}
    assert set(ROTATING) - checked == set(NO_PUBLISHED_CONFIG)


@pytest.mark.parametrize("name", CASES)
def test_a_published_config_gets_the_table_its_own_code_computes(name: str) -> None:
    file, _, at = name.partition("@seq_len=")
    expected = REFERENCE[name]
    model = _load(file)
    table = model.rotating_table().at(int(at)) if at else model.rotating_table()
    np.testing.assert_allclose(table.inv_freq, expected["inv_freq"], rtol=1e-12, atol=0)
    assert (table.rotary_dim, table.layout) == (expected["rotary_dim"], expected["layout"])
    assert table.attention_factor == pytest.approx(expected["attention_factor"], rel=1e-12)


@pytest.mark.parametrize("model_type", BUILTIN_TYPES)
def test_every_builtin_declaration_passes_the_conformance_suite(model_type: str) -> None:
    checked = check_family(model_type, registry=Registry(read_env=False))
    assert checked[:2] == ["entry_point", "declaration"]
    assert len(checked) > 2 or model_type in REFUSING  # at least one example ran, unless every config is refused


@pytest.mark.parametrize("model_type", REFUSING)
def test_a_family_whose_rule_no_scheme_expresses_is_refused_naming_it(model_type: str) -> None:
    family = BUILTIN.family(model_type)
    assert family is not None
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({"model_type": model_type, "hidden_size": 64, "num_attention_heads": 2})
    assert caught.value.path == "model_type" and (family.unserved or family.no_rope) in str(caught.value)


def test_telechat2s_published_config_is_refused_naming_its_stepped_ntk() -> None:
    with pytest.raises(ropekit.RopeConfigError, match=r"alpha = 2 \*\* ceil\(log2\(len / base_seqlen\) \+ 1\) - 1"):
        ropekit.load(FAMILIES / "telechat2-115b.json")


@pytest.mark.parametrize("model_type", BUILTIN_TYPES)
def test_every_builtin_declaration_names_the_code_it_was_checked_against(model_type: str) -> None:
    family = BUILTIN.family(model_type)
    assert family is not None and family.code and family.model_type == model_type


def test_internlm2_refuses_a_scaling_type_its_code_raises_for() -> None:
    config = json.loads((FAMILIES / "internlm2_5-7b-chat.json").read_text())
    config["rope_scaling"] = {"type": "yarn", "factor": 2.0}
    with pytest.raises(ropekit.RopeConfigError, match=r"'yarn' is not a rope_type internlm2's code .* applies as "
                       r"ropekit has checked it; it applies default, dynamic, linear") as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.type"


def test_a_config_without_model_type_is_identified_by_its_architectures() -> None:
    config = json.loads((FAMILIES / "internlm2_5-7b-chat.json").read_text())
    del config["model_type"]
    model = ropekit.load(config)
    np.testing.assert_allclose(model.table.inv_freq, REFERENCE["internlm2_5-7b-chat.json"]["inv_freq"], rtol=1e-12)
    assert model.table.rope_type == "dynamic"


def test_architectures_naming_no_declared_family_stay_unknown() -> None:
    with pytest.raises(ropekit.UnknownModelTypeError, match="auto_map"):
        ropekit.load({"architectures": ["AcmeForCausalLM"], "auto_map": {"AutoConfig": "x.Y"}, "hidden_size": 64,
                      "num_attention_heads": 1})


@pytest.mark.parametrize("model_type", WRAPPERS)
def test_a_wrapper_serves_its_language_model_naming_the_full_path(model_type: str) -> None:
    family = BUILTIN.family(model_type)
    assert family is not None
    key = family.language_model
    inner = {"model_type": "internlm2", "hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e6}
    table = ropekit.load({"model_type": model_type, key: inner}).table
    np.testing.assert_allclose(table.inv_freq, 1e6 ** -(np.arange(0, 32, 2) / 32), rtol=1e-15)
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({"model_type": model_type, key: {**inner, "rope_scaling": {"type": "yarn", "factor": 2.0}}})
    assert caught.value.path == f"{key}.rope_scaling.type"
    with pytest.raises(ropekit.RopeConfigError, match=f"builds its language model from {key!r}") as missing:
        ropekit.load({"model_type": model_type})
    assert missing.value.path == key
    with pytest.raises(ropekit.RopeConfigError, match="never reads its own top-level 'rope_theta'"):
        ropekit.load({"model_type": model_type, key: inner, "rope_theta": 5e5})


def test_a_layer_list_says_which_layers_apply_no_rope() -> None:
    blocks: list[dict[str, Any]] = [
        {"attention": {"no_op": False, "replace_with_linear": False}},
        {"attention": {"no_op": True, "replace_with_linear": False}},
        {"attention": {"no_op": False, "replace_with_linear": True}},
        {"attention": {"n_heads_in_group": 8}}]
    config = {"model_type": "nemotron-nas", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 4,
              "rope_theta": 5e5, "block_configs": blocks}
    model = ropekit.load(config)
    assert [model.for_layer(index) is not None for index in range(4)] == [True, False, False, True]
    assert model.to_json()["no_rope_layers"] == [1, 2]
    with pytest.raises(ropekit.RopeConfigError, match="lists 3 layers, but the model has 4") as caught:
        ropekit.load({**config, "block_configs": blocks[:3]})
    assert caught.value.path == "block_configs"
    with pytest.raises(ropekit.RopeConfigError, match="cannot tell which layers rotate"):
        ropekit.load({key: value for key, value in config.items() if key != "block_configs"})


def test_phi_msft_serves_its_rotary_dim_and_refuses_a_base_its_code_ignores() -> None:
    config = json.loads((FAMILIES / "phixtral-4x2_8.json").read_text())
    with pytest.raises(ropekit.RopeConfigError, match="phi-msft's code ignores it") as caught:
        ropekit.load({**config, "rope_theta": 5e5})
    assert caught.value.path == "rope_theta"
    flashy = ropekit.load({**config, "flash_rotary": True}).table  # a fused kernel of the same rotation
    assert flashy.rotary_dim == 32 and flashy.head_dim == 80


def test_minicpm4_longrope_uses_the_factor_set_of_its_cache_at_every_length() -> None:
    long = [1.0 + index for index in range(16)]
    config = {"model_type": "minicpm", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 65536,
              "rope_theta": 10000.0, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 16,
                                                      "long_factor": long, "original_max_position_embeddings": 32768}}
    table = ropekit.load(config).table
    plain = 1e4 ** -(np.arange(0, 32, 2) / 32)
    assert table.rope_type == "minicpm_longrope"
    for length in (None, 1, 32768, 65536, 100000):  # the long factors at every length: max > original
        at = table if length is None else table.at(length)
        np.testing.assert_allclose(at.inv_freq, plain / np.array(long), rtol=1e-15)
        assert at.attention_factor == pytest.approx((1 + np.log(2) / np.log(32768)) ** 0.5, rel=1e-15)
    equal = ropekit.load({**config, "max_position_embeddings": 32768}).table  # the cache's length is the original
    np.testing.assert_allclose(equal.inv_freq, plain, rtol=1e-15)
    assert equal.attention_factor == 1.0 and equal.switch_at == 32768
    past = equal.at(32769)  # the cache rebuilt for a longer sequence: the long factors, the multiplier kept
    np.testing.assert_allclose(past.inv_freq, plain / np.array(long), rtol=1e-15)
    assert past.attention_factor == 1.0
    with pytest.raises(ropekit.ArgumentError, match="holds for sequences of up to 32768"):
        equal.rows(32769)


def test_internlms_2023_rotary_object_is_read_as_its_code_reads_it() -> None:
    config = json.loads((FAMILIES / "internlm-20b.json").read_text())
    assert config["rotary"] == {"base": 10000, "type": "dynamic"}  # internlm-20b as published
    table = ropekit.load(config).table
    assert (table.rope_type, table.params["factor"], table.geometry.theta) == ("dynamic", 1.0, 10000.0)
    origin = ropekit.load({**config, "rotary": {"base": 50000, "type": "origin"}}).table
    assert origin.rope_type == "default" and origin.geometry.theta == 50000.0


@pytest.mark.parametrize(("rotary", "path", "match"), [
    ({"base": 10000, "type": "linear"}, "rotary.type", "applies 'origin'"),
    ({"base": 10000, "type": "dynamic", "scaling_factor": 0.5}, "rotary.scaling_factor", "from 1 to 1e6"),
    ({"base": "10000", "type": "dynamic"}, "rotary.base", "a number above 1"),
    ({"base": 10000, "type": "dynamic", "alpha": 2}, "rotary.alpha", "not read by InternLM's code"),
])
def test_a_rotary_object_internlms_code_would_not_run_is_refused(rotary: dict[str, Any], path: str,
                                                                 match: str) -> None:
    config = {**json.loads((FAMILIES / "internlm-20b.json").read_text()), "rotary": rotary}
    with pytest.raises(ropekit.RopeConfigError, match=match) as caught:
        ropekit.load(config)
    assert caught.value.path == path


def test_a_rotary_object_beside_the_2024_keys_or_in_another_family_is_refused() -> None:
    config = json.loads((FAMILIES / "internlm-20b.json").read_text())
    with pytest.raises(ropekit.RopeConfigError, match="stated beside rope_theta") as caught:
        ropekit.load({**config, "rope_theta": 10000.0})
    assert caught.value.path == "rotary"
    with pytest.raises(ropekit.RopeConfigError, match="read for model_type 'internlm' only") as other:
        ropekit.load({"model_type": "internlm2", "hidden_size": 64, "num_attention_heads": 2,
                      "rotary": {"base": 10000, "type": "dynamic"}})
    assert other.value.path == "rotary"


@pytest.mark.parametrize(("model_type", "kind", "match"), [
    ("internlm", "linear", "raises ValueError"),
    ("phi3_v", "yarn", "own YaRN variant"),
    ("orion", "linear", "applies as ropekit has checked it; it applies default"),
    ("phi-msft", "linear", "applies as ropekit has checked it; it applies default"),
])
def test_a_scaling_its_code_does_not_apply_is_refused_by_name(model_type: str, kind: str, match: str) -> None:
    config = {"model_type": model_type, "hidden_size": 64, "num_attention_heads": 2, "n_embd": 64, "n_head": 2,
              "rope_scaling": {"type": kind, "factor": 2.0}}
    with pytest.raises(ropekit.RopeConfigError, match=match) as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.type"


@pytest.mark.parametrize("name", ["llama-3_3-nemotron-super-49b-v1.json", "llama-3_1-nemotron-ultra-253b-v1.json"])
def test_published_decilm_configs_rotate_exactly_the_layers_that_have_attention(name: str) -> None:
    config = json.loads((FAMILIES / name).read_text())
    without = [index for index, block in enumerate(config["block_configs"])
               if block["attention"]["no_op"] or block["attention"]["replace_with_linear"]]
    model = ropekit.load(config)
    assert list(model.no_rope_layers) == without and 0 < len(without) < config["num_hidden_layers"]
    assert [model.for_layer(index) is None for index in range(config["num_hidden_layers"])] == [
        index in without for index in range(config["num_hidden_layers"])]


@pytest.mark.parametrize("key", ["head_dim", "partial_rotary_factor", "rotary_dim"])
@pytest.mark.parametrize("model_type", ["internlm2", "internlm", "minicpm", "deepseek", "phi3_v", "orion"])
def test_a_width_key_the_familys_code_does_not_read_is_ignored_and_named(model_type: str, key: str) -> None:
    config = {"model_type": model_type, "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 1e6,
              key: {"head_dim": 64, "partial_rotary_factor": 0.5, "rotary_dim": 64}[key]}
    with pytest.warns(UserWarning, match=f"^{key}: {model_type}'s code does not read it"):
        table = ropekit.load(config).table
    assert (table.head_dim, table.rotary_dim) == (128, 128)  # the code rotates hidden_size // num_attention_heads


def test_architectures_that_are_not_names_are_refused_by_path_not_crashed_on() -> None:
    with pytest.raises(ropekit.RopeConfigError, match=r"^architectures\[0\]: expected a class name \(a string\)"):
        ropekit.load({"hidden_size": 64, "num_attention_heads": 4, "architectures": [{"a": 1}, ["X"]], "auto_map": {}})


def test_architectures_of_two_families_are_refused_naming_both() -> None:
    with pytest.raises(ropekit.PluginError, match=r"families internlm2 \(ropekit\), minicpm \(ropekit\)"):
        ropekit.load({"architectures": ["InternLM2ForCausalLM", "MiniCPMForCausalLM"], "hidden_size": 64,
                      "num_attention_heads": 2})


@pytest.mark.parametrize(("attention", "path"), [
    ({"no_op": "true"}, "block_configs[1].attention.no_op"),
    (None, "block_configs[1].attention"),
    ([1], "block_configs[1].attention"),
])
def test_a_layer_entry_the_familys_code_cannot_read_is_refused_naming_it(attention: object, path: str) -> None:
    config = {"model_type": "nemotron-nas", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
              "block_configs": [{"attention": {"no_op": False}}, {"attention": attention}]}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == path


@pytest.mark.parametrize(("fields", "match"), [
    ({"rope_types": "dynamic"}, None),  # one name, not its letters
    ({"architectures": None}, "architectures must be a list of names"),
    ({"schemes": {"longrope": "no such scheme!"}}, "schemes must map rope_type names"),
    ({"language_model": "llm_config", "fixed_theta": 10000.0}, "a wrapper .* applies no RoPE of its own"),
    ({"unread_keys": ["rope_theta"]}, "unread_keys may name"),
])
def test_family_declarations_are_checked(fields: dict[str, Any], match: str | None) -> None:
    if match is None:
        assert ropekit.ModelFamily("x", "doc", **fields).rope_types == frozenset({"dynamic"})
        return
    with pytest.raises(ropekit.DeclarationError, match=match):
        ropekit.ModelFamily("x", "doc", **fields)


@pytest.mark.parametrize("block", [
    {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},  # Ling's README, for vLLM users
    {"type": "yarn", "factor": 4.0},  # the code's own original length, 4096
    {"type": "yarn", "factor": 4.0, "mscale": 0.707},  # transformers' yarn would ignore a lone mscale
    {"type": "yarn", "factor": 8.0, "mscale": 1.0, "mscale_all_dim": 0.5, "beta_fast": 16, "beta_slow": 2},
])
def test_ling_v1s_yarn_is_deepseek_v2s_as_its_code_computes_it(block: dict[str, Any]) -> None:
    config = {**json.loads((FAMILIES / "ling-lite-chat.json").read_text()), "rope_scaling": block}
    expected = load_script("family_reference").bailing_v1_yarn(config)
    table = ropekit.load(config).table
    assert table.rope_type == "deepseek_yarn"
    np.testing.assert_allclose(table.inv_freq, expected.inv_freq, rtol=1e-12, atol=0)
    assert table.attention_factor == pytest.approx(expected.attention_factor, rel=1e-12)


def test_one_model_type_two_codes_architectures_decide_or_the_config_is_refused_naming_them() -> None:
    ling = json.loads((FAMILIES / "ling-lite-chat.json").read_text())
    assert (ling["model_type"], ling["architectures"]) == ("bailing_moe", ["BailingMoeForCausalLM"])
    with pytest.warns(UserWarning, match="partial_rotary_factor: bailing_moe's code does not read it"):
        v1 = ropekit.load({**ling, "partial_rotary_factor": 0.5})  # Ling v1's code rotates the whole head
    assert v1.table.rotary_dim == 128
    v2 = ropekit.load({**ling, "architectures": ["BailingMoeV2ForCausalLM"], "head_dim": 128,
                       "partial_rotary_factor": 0.5})  # Ling 2.0's exporter writes model_type bailing_moe
    assert (v2.table.rotary_dim, v2.table.head_dim) == (64, 128)
    np.testing.assert_allclose(v2.table.inv_freq, 600000.0 ** -(np.arange(0, 64, 2) / 64), rtol=1e-15)
    with pytest.raises(ropekit.RopeConfigError, match="names the classes of more than one code") as both:
        ropekit.load({**ling, "architectures": ["BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"]})
    assert both.value.path == "architectures"
    for architectures in (None, ["AcmeForCausalLM"]):
        config = {key: value for key, value in ling.items() if key != "architectures"}
        if architectures:
            config["architectures"] = architectures
        with pytest.raises(ropekit.RopeConfigError, match="BailingMoeForCausalLM .*BailingMoeV2ForCausalLM") as caught:
            ropekit.load(config)
        assert caught.value.path == "architectures"


def test_a_width_key_names_the_rotated_sub_head_and_an_unread_scaling_block_is_named() -> None:
    config = {"model_type": "pangu_ultra_moe", "hidden_size": 7680, "num_attention_heads": 128,
              "attention_qk_rope_dim": 64, "attention_qk_dim": 128, "rope_theta": 25600000.0}
    table = ropekit.load(config).table
    assert (table.head_dim, table.rotary_dim, table.layout) == (64, 64, "gptj")
    with pytest.warns(UserWarning, match="rope_scaling: pangu_ultra_moe's code does not read it"):
        scaled = ropekit.load({**config, "rope_scaling": {"type": "yarn", "factor": 4.0}}).table
    assert scaled.rope_type == "default"
    for width in (63, 1 << 20):
        with pytest.raises(ropekit.RopeConfigError, match="positive even number of channels") as caught:
            ropekit.load({**config, "attention_qk_rope_dim": width})
        assert caught.value.path == "attention_qk_rope_dim"
    with pytest.warns(UserWarning, match="qk_rope_head_dim: pangu_ultra_moe's code does not read it"):
        stray = ropekit.load({**config, "qk_rope_head_dim": 2}).table  # its own key wins: the code reads that one
    assert stray.rotary_dim == 64


def test_same_as_reads_a_config_as_the_class_its_code_shares_and_says_nothing_more() -> None:
    config = {"model_type": "longcat_flash_ngram", "hidden_size": 3072, "num_attention_heads": 32,
              "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512, "rope_theta": 5e6}
    ngram = ropekit.load(config).table
    flash = ropekit.load({**config, "model_type": "longcat_flash"}).table
    np.testing.assert_array_equal(ngram.inv_freq, flash.inv_freq)
    assert (ngram.head_dim, ngram.layout) == (64, "gptj") == (flash.head_dim, flash.layout)
    with pytest.raises(ropekit.DeclarationError, match=r"may not also declare \['rope_types'\]"):
        ropekit.ModelFamily(model_type="acme", doc="d", same_as="llama", rope_types=())


def test_use_mla_false_is_llamas_attention_over_the_whole_head() -> None:
    published = json.loads((FAMILIES / "unlimited-ocr.json").read_text())
    inner = published["language_config"]
    assert (inner.get("model_type"), inner["use_mla"], inner["qk_rope_head_dim"]) == (None, False, 0)
    table = ropekit.load(published).table  # its wrapper declares the class: transformers' unlimited_ocr_text
    assert (table.head_dim, table.rotary_dim, table.layout) == (128, 128, "neox")
    mla = {**inner, "model_type": "deepseek_v2", "use_mla": True}
    with pytest.raises(ropekit.NoRopeError, match="no rope sub-head"):  # MLA with a 0-wide rope sub-head rotates nothing
        ropekit.load(mla)
    for model_type in ("deepseek_v3", "kimi_k2", "glm4_moe_lite"):  # MLA classes never read use_mla: MLA it stays
        stated = {"model_type": model_type, "hidden_size": 2048, "num_attention_heads": 16, "qk_rope_head_dim": 64,
                  "qk_nope_head_dim": 128, "v_head_dim": 128, "kv_lora_rank": 512}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            off, plain = ropekit.load({**stated, "use_mla": False}).table, ropekit.load(stated).table
        assert (off.head_dim, off.layout) == (plain.head_dim, plain.layout) == (64, "gptj"), model_type


def test_mimo_v2s_layer_kinds_rotate_at_their_own_base_and_width() -> None:
    """modeling_mimo_v2.py: ``MiMoV2RotaryEmbedding(config, is_swa=True)`` takes ``swa_rope_theta`` and
    ``swa_head_dim`` (each falling back to the usual key), ``dim = int(head_dim * partial_rotary_factor)``,
    ``inv_freq = 1 / base ** (arange(0, dim, 2) / dim)``; ``hybrid_layer_pattern[i] == 1`` layers use it."""
    config = {"model_type": "mimo_v2", "architectures": ["MiMoV2ForCausalLM"], "hidden_size": 4096,
              "num_attention_heads": 64, "head_dim": 192, "swa_head_dim": 128, "partial_rotary_factor": 0.334,
              "rope_theta": 1e7, "swa_rope_theta": 1e4, "num_hidden_layers": 4, "hybrid_layer_pattern": [0, 1, 1, 0]}
    model = ropekit.load(config)
    assert model.layer_types == ("full_attention", "sliding_attention", "sliding_attention", "full_attention")
    for kind, base, width in (("full_attention", 1e7, 192), ("sliding_attention", 1e4, 128)):
        dim = int(width * 0.334)
        np.testing.assert_allclose(model.rotating_table(kind).inv_freq, 1 / base ** (np.arange(0, dim, 2) / dim), rtol=1e-15)
        assert (model.rotating_table(kind).head_dim, model.rotating_table(kind).rotary_dim, model.rotating_table(kind).layout) == (width, dim, "neox")
    in_block = {key: value for key, value in config.items() if key != "rope_theta"}
    in_block["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e7}  # the base stated in the block only
    assert ropekit.load(in_block).rotating_table("full_attention").geometry.theta == 1e7
    with pytest.raises(ropekit.RopeConfigError, match="reads its layer kinds from the top level") as nested:
        ropekit.load({**config, "text_config": {"hybrid_layer_pattern": [0, 1, 1, 0]}})
    assert nested.value.path == "text_config.hybrid_layer_pattern"
    unlisted = {key: value for key, value in config.items() if key != "hybrid_layer_pattern"}
    assert ropekit.load(unlisted).layer_types == ("full_attention",) * 4  # its class default: every layer full
    with pytest.raises(ropekit.RopeConfigError, match="derives hybrid_layer_pattern from it") as derived:
        ropekit.load({**unlisted, "hybrid_block_size": 2})
    assert derived.value.path == "hybrid_block_size"
    same = ropekit.load({key: value for key, value in config.items() if key not in ("swa_rope_theta", "swa_head_dim")})
    np.testing.assert_array_equal(same.rotating_table("sliding_attention").inv_freq, same.rotating_table("full_attention").inv_freq)  # fallbacks
    with pytest.raises(ropekit.RopeConfigError, match="2 is not a layer kind mimo_v2's code knows") as caught:
        ropekit.load({**config, "hybrid_layer_pattern": [0, 2, 1, 0]})
    assert caught.value.path == "hybrid_layer_pattern[1]"
    with pytest.raises(ropekit.RopeConfigError) as theta:
        ropekit.load({**config, "swa_rope_theta": -1})
    assert theta.value.path == "swa_rope_theta"


def test_k2_horizon_serves_its_rope_head_when_it_is_the_whole_head_and_its_yarn_default() -> None:
    """configuration_k2_horizon.py: ``rope_head_dim`` defaults to ``head_dim``; with neither ``rope_parameters``
    nor ``rope_scaling`` the class sets YaRN (factor 16, original 8192, attention_factor 1.2772588722239782,
    beta_fast 128, beta_slow 4, truncate); modeling: ``dim = config.rope_head_dim`` at ``rope_theta``."""
    config = {"model_type": "k2_horizon", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
              "max_position_embeddings": 524288, "rope_parameters": {"rope_type": "default", "rope_theta": 1e7}}
    table = ropekit.load({**config, "rope_head_dim": 128}).table
    np.testing.assert_allclose(table.inv_freq, 1e7 ** -(np.arange(0, 128, 2) / 128), rtol=1e-15)
    with pytest.raises(ropekit.RopeConfigError, match="only when it equals head_dim") as caught:
        ropekit.load({**config, "rope_head_dim": 64})
    assert caught.value.path == "rope_head_dim"
    scaled = ropekit.load({**{key: value for key, value in config.items() if key != "rope_parameters"},
                           "rope_scaling": {"rope_type": "linear", "factor": 2.0}}).table  # a stated block: no default
    assert (scaled.rope_type, scaled.params["factor"]) == ("linear", 2.0)
    bare = ropekit.load({key: value for key, value in config.items() if key != "rope_parameters"}).table
    assert (bare.rope_type, bare.params["factor"], bare.params["beta_fast"]) == ("yarn", 16.0, 128.0)
    assert bare.attention_factor == pytest.approx(1 + 0.1 * np.log(16), rel=1e-12)


@pytest.mark.parametrize("mixed_b", [None, 0.5, 2.0])
def test_gte_ntk_scales_every_position_as_its_code_builds_its_cache(mixed_b: float | None) -> None:
    """new-impl modeling.py ``NTKScalingRotaryEmbedding``: the cache is built at ``max_position_embeddings * factor``,
    so ``base = self.base * scaling_factor`` (fixed) or ``lambda_1_m = exp(a * arange(1, dim // 2 + 1) ** mixed_b)``,
    ``a = log(factor) / (dim / 2) ** mixed_b`` (mixed) serve every position; ``dim = hidden_size / heads``."""
    block: dict[str, Any] = {"type": "ntk", "factor": 8.0, **({"mixed_b": mixed_b} if mixed_b else {})}
    config = {"model_type": "new", "architectures": ["NewModel"], "hidden_size": 768, "num_attention_heads": 12,
              "rope_theta": 20000.0, "max_position_embeddings": 8192, "position_embedding_type": "rope",
              "rope_scaling": block}  # gte-multilingual-base's keys
    table = ropekit.load(config).table
    index = np.arange(0, 64, 2) / 64
    if mixed_b is None:
        expected = 1 / (20000.0 * 8.0) ** index / 8.0 ** (2 / 64)
    else:
        expected = 1 / 20000.0 ** index / np.exp(np.log(8.0) / 32 ** mixed_b * np.arange(1, 33) ** mixed_b)
    np.testing.assert_allclose(table.inv_freq, expected, rtol=1e-13)
    assert (table.rope_type, table.attention_factor, table.seq_len_dependent) == ("ntk", 1.0, False)
    with pytest.raises(ropekit.RopeConfigError, match="applies default, ntk"):
        ropekit.load({**config, "rope_scaling": {"type": "linear", "factor": 2.0}})
