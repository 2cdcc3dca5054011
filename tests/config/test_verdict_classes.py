"""The verdicts of issue #44, as classes of input (``tests/data/configs/modelled``, each named in its
SOURCES.md): a remote family whose code changed between releases is read as the code its own
repository ships, decided by evidence in the config; RoPE over two position streams is refused by
name; a look-alike key stating what is served warns whatever its spelling; transformers' own layer-type
renames, layer plans and the layers a class never attends with are derived from transformers' code
(``core/config/transformers_classes.json``); every layer a model's code has answers ``for_layer``."""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import numpy as np
import pytest

import ropekit

from ..support import CONFIGS

MODELLED = CONFIGS / "modelled"
FACTS = json.loads((CONFIGS.parent.parent.parent / "core" / "config" / "transformers_classes.json")
                   .read_text(encoding="utf-8"))


def _config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MODELLED / name).read_text(encoding="utf-8"))
    return loaded


def _load(config: Any) -> tuple[ropekit.ModelRope, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ropekit.load(config)
    return model, [str(warning.message) for warning in caught]


def _plain(base: float, dim: int) -> np.ndarray[Any, Any]:
    return np.asarray(base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim))


# --- ChatGLM: v1 and v2 code, told apart by the keys each config class writes --------------------

def test_chatglm_6b_v1_two_position_streams_are_refused_naming_the_key() -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(MODELLED / "chatglm-6b.json")
    assert caught.value.path == "position_encoding_2d"
    message = str(caught.value)
    assert "True" in message and "two position streams" in message and "valid: false" in message


def test_chatglm_6b_v1_without_the_key_gets_its_class_default_two_streams() -> None:
    config = _config("chatglm-6b.json")
    del config["position_encoding_2d"]
    with pytest.raises(ropekit.RopeConfigError, match="defaults it to true") as caught:
        ropekit.load(config)
    assert caught.value.path == "position_encoding_2d"


def test_chatglm_6b_v1_with_one_stream_is_served_as_its_code_rotates() -> None:
    """v1's RotaryEmbedding(hidden_size // num_attention_heads, base=10000), rotate_half over the whole head."""
    model, caught = _load({**_config("chatglm-6b.json"), "position_encoding_2d": False})
    table = model.for_layer(27)
    assert table is not None and caught == []
    assert (table.rotary_dim, table.layout, table.geometry.theta) == (128, "neox", 10000.0)
    np.testing.assert_allclose(table.inv_freq, _plain(10000.0, 128), rtol=1e-15)
    assert len(model.layer_types) == 28


def test_a_chatglm_config_naming_both_codes_or_neither_is_refused_naming_the_ambiguity() -> None:
    both = {**_config("chatglm-6b.json"), "position_encoding_2d": False, "kv_channels": 128}
    with pytest.raises(ropekit.RopeConfigError, match=r"states position_encoding_2d.*and kv_channels") as caught:
        ropekit.load(both)
    assert caught.value.path == "model_type"
    with pytest.raises(ropekit.RopeConfigError, match="none of the keys that tell them apart"):
        ropekit.load({"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32})


def test_two_position_streams_are_refused_whatever_the_model_type() -> None:
    with pytest.raises(ropekit.RopeConfigError, match="two position streams") as caught:
        ropekit.load({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2,
                      "position_encoding_2d": True})
    assert caught.value.path == "position_encoding_2d"


# --- look-alike keys: the value states what is served, whatever the spelling ----------------------

def test_codegeex2s_rotary_percent_stating_the_served_half_warns_and_serves_chatglm2s_table() -> None:
    model, caught = _load(MODELLED / "codegeex2-6b.json")
    table = model.table
    assert (table.rotary_dim, table.layout, table.geometry.theta) == (64, "gptj", 10000.0)
    np.testing.assert_allclose(table.inv_freq, _plain(10000.0, 64), rtol=1e-15)
    assert caught == ["rotary_percent: not read by ropekit; its value 0.5 states what ropekit serves "
                      "(partial_rotary_factor), so it is ignored"]


def test_a_look_alike_stating_another_value_is_refused_naming_key_value_and_the_served_one() -> None:
    config = {**_config("codegeex2-6b.json"), "rotary_percent": 0.25}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == "rotary_percent"
    assert re.search(r"Its value 0\.25 states partial_rotary_factor, and ropekit serves 0\.5 there", str(caught.value))


@pytest.mark.parametrize(("key", "served", "other"), [
    ("rotary_fraction", 1.0, 0.5),      # the whole head
    ("rope_freq_base", 500000.0, 1e4),  # llama.cpp's spelling of the base
    ("rotary_ndims", 64, 32),           # the rotated width
    ("rope_base", 500000.0, 1e6),
])
def test_every_spelling_of_a_served_fact_warns_when_it_states_it(key: str, served: Any, other: Any) -> None:
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0}
    _, caught = _load({**config, key: served})
    assert len(caught) == 1 and caught[0].startswith(f"{key}: not read by ropekit; its value")
    with pytest.raises(ropekit.RopeConfigError) as refused:
        ropekit.load({**config, key: other})
    assert refused.value.path == key and f"Its value {other!r}" in str(refused.value)


def test_a_name_whose_words_name_two_facts_or_a_qualifier_states_none() -> None:
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
    for key, value in (("rope_scaling_base", 10000.0), ("rotary_local_base", 10000.0)):
        with pytest.raises(ropekit.RopeConfigError, match="looks like RoPE|did you mean") as caught:
            ropekit.load({**config, key: value})
        assert caught.value.path == key


# --- InternLM: the Hub repositories' code against its GitHub code ---------------------------------

def _internlm_dynamic(seq_len: int) -> np.ndarray[Any, Any]:
    """The Hub code's InternLMDynamicNTKScalingRotaryEmbedding (scaling_factor 1.0, dim 128, max 2048)."""
    base = 10000.0 * ((1.0 * seq_len / 2048) - (1.0 - 1)) ** (128 / (128 - 2))
    return _plain(base, 128)


@pytest.mark.parametrize("name", ["internlm-7b.json", "internlm-chat-7b.json"])
def test_internlm_7b_is_served_the_dynamic_ntk_its_repository_code_applies(name: str) -> None:
    model, caught = _load(MODELLED / name)
    table = model.table
    assert table.rope_type == "dynamic" and table.params == {"factor": 1.0} and table.switch_at == 2048
    np.testing.assert_allclose(table.inv_freq, _plain(10000.0, 128), rtol=1e-15)
    np.testing.assert_allclose(table.at(4096).inv_freq, _internlm_dynamic(4096), rtol=1e-12)
    assert caught == ([] if "rotary" in _config(name) else [
        "rotary: missing; the code InternLM's Hugging Face Hub repositories ship (configuration_internlm.py) "
        "defaults it to {'base': 10000, 'type': 'dynamic'}, so ropekit serves dynamic NTK (factor 1: past "
        "max_position_embeddings the base grows), as that code runs it"])


def test_internlm_github_code_is_read_by_its_own_keys() -> None:
    config = _config("internlm-7b.json")
    model, caught = _load({**config, "rope_theta": 10000, "rope_scaling": None})
    assert model.table.rope_type == "default" and not model.table.seq_len_dependent and caught == []


def test_an_internlm_config_with_no_evidence_of_its_code_is_refused_naming_the_ambiguity() -> None:
    bare = {"model_type": "internlm", "hidden_size": 4096, "num_attention_heads": 32}
    with pytest.raises(ropekit.RopeConfigError, match="no evidence of which it runs") as caught:
        ropekit.load(bare)
    assert caught.value.path == "rotary"
    with pytest.raises(ropekit.RopeConfigError, match="expected InternLM's rotary object") as broken:
        ropekit.load({**_config("internlm-7b.json"), "rotary": None})
    assert broken.value.path == "rotary"


# --- layer types transformers renames --------------------------------------------------------------

def test_the_committed_layer_type_renames_are_transformers_own() -> None:
    assert FACTS["layer_type_renames"] == {
        "attention": "full_attention", "deepseek_sparse_attention": "indexed_attention",
        "mamba": "linear_attention", "qwen_sparse_attention": "indexed_attention"}


def test_glm_5_3s_legacy_layer_type_is_served_as_named_with_the_alias_noted() -> None:
    model, caught = _load(MODELLED / "glm-5.3.json")
    reference, _ = _load(CONFIGS / "published" / "glm-5.2.json")
    assert set(model.layer_types) == {"deepseek_sparse_attention"} and len(model.layer_types) == 78
    table, expected = model.for_layer(77), reference.for_layer(77)
    assert table is not None and expected is not None and table.layout == expected.layout == "gptj"
    np.testing.assert_array_equal(table.inv_freq, expected.inv_freq)
    assert model["deepseek_sparse_attention"] is table
    assert [message for message in caught if "legacy name" in message] == [
        "layer_types[0]: 'deepseek_sparse_attention' is transformers' legacy name of 'indexed_attention' (its config "
        "classes rename it, transformers 5.24.0); served as 'indexed_attention' layers, named "
        "'deepseek_sparse_attention' as the config names them"]


def test_an_unknown_layer_type_is_refused_naming_what_would_be_valid() -> None:
    config = {**_config("glm-5.3.json"), "layer_types": ["dsa_attention"] * 78}
    with pytest.raises(ropekit.RopeConfigError, match=r"unknown layer type 'dsa_attention'.*renames") as caught:
        ropekit.load(config)
    assert caught.value.path == "layer_types[0]"


# --- layers a class never attends with, and the class's own numbering -------------------------------

def test_hrm_layers_past_its_stack_never_attend_and_get_no_table() -> None:
    assert FACTS["classes"]["hrm_text"]["attending"] == {"key": "num_layers_per_stack"}
    model, _ = _load(MODELLED / "hrm-text.json")
    assert len(model.layer_types) == 128
    for index in range(16):
        table = model.for_layer(index)
        assert table is not None and (table.rotary_dim, table.geometry.theta) == (128, 10000.0)
    assert all(model.for_layer(index) is None for index in range(16, 128))


def test_hrm_stating_its_stack_alone_attends_with_every_layer() -> None:
    model, _ = _load({"model_type": "hrm_text", "hidden_size": 1536, "num_attention_heads": 12, "head_dim": 128,
                      "num_hidden_layers": 4})
    assert all(model.for_layer(index) is not None for index in range(4))
    with pytest.raises(ropekit.RopeConfigError, match="more than num_hidden_layers") as caught:
        ropekit.load({**_config("hrm-text.json"), "num_layers_per_stack": 200})
    assert caught.value.path == "num_layers_per_stack"


def test_dorys_mlp_blocks_are_folded_and_every_decoder_layer_answers() -> None:
    config = _config("dory.json")
    assert len(config["layer_types"]) == config["num_hidden_layers"] == 72
    model, _ = _load(config)
    assert len(model.layer_types) == 36  # DoryModel builds range(num_hidden_layers // 2) decoder layers
    for index in range(36):
        table = model.for_layer(index)
        assert table is not None
        assert table.geometry.theta == (1e7 if index % 4 == 3 else 1e4), index
    with pytest.raises(ropekit.LayerLookupError):
        model.for_layer(36)


# --- default layer plans --------------------------------------------------------------------------

def test_olmo_hybrid_sizes_alone_get_the_plan_its_class_builds() -> None:
    model, _ = _load(MODELLED / "olmo-hybrid-sizes.json")
    assert model.layer_types == ("linear_attention", "linear_attention", "linear_attention", "full_attention") * 8
    table = model.for_layer(3)
    assert table is not None and (table.rotary_dim, table.geometry.theta) == (128, 10000.0)
    assert model.for_layer(0) is None
    short, _ = _load({**_config("olmo-hybrid-sizes.json"), "num_hidden_layers": 3})
    assert short.layer_types == ("linear_attention", "linear_attention", "full_attention")
    with pytest.raises(ropekit.RopeConfigError, match="builds no model of 1 layers") as caught:
        ropekit.load({**_config("olmo-hybrid-sizes.json"), "num_hidden_layers": 1})
    assert caught.value.path == "num_hidden_layers"


def test_deepseek_v4s_plan_is_derived_and_its_refusal_says_why_no_table_is_placed() -> None:
    plan = FACTS["classes"]["deepseek_v4"]["layer_plan"]
    assert plan["head"] == ["heavily_compressed_attention"] * 2
    assert plan["pattern"] == ["heavily_compressed_attention", "compressed_sparse_attention"]
    for config in (_config("deepseek-v4-sizes.json"),
                   {**_config("deepseek-v4-sizes.json"), "num_hidden_layers": 4,
                    "layer_types": ["heavily_compressed_attention"] * 3 + ["compressed_sparse_attention"]}):
        with pytest.raises(ropekit.RopeConfigError) as caught:
            ropekit.load(config)
        assert caught.value.path == "rope_parameters"
        assert "keys its default rope parameters by compress, main, which are not the layer types" in str(caught.value)
