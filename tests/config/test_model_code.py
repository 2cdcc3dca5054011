"""Which code a config runs: unknown code is refused (strict) or guessed with a warning (lenient),
code without RoPE is refused by name, ambiguous remote families are decided by evidence the config
carries, and nothing is refused that could not change the table."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.config.classes import class_facts, transformers_version

from ..support import CONFIGS

PUBLISHED = CONFIGS / "published"


def _published(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PUBLISHED / name).read_text(encoding="utf-8"))
    return loaded


def _plain(theta: float, dim: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


LLAMA = {"hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0}


# --- unknown code ------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["my_new_model", "llama5", "h2ovl_chat", "Llama"])
def test_an_unknown_model_type_is_refused_naming_it_and_what_would_serve_it(model_type: str) -> None:
    with pytest.raises(ropekit.UnknownModelTypeError) as caught:
        ropekit.load({**LLAMA, "model_type": model_type})
    error = caught.value
    assert error.path == "model_type" and error.model_type == model_type
    message = str(error)
    assert f"model_type {model_type!r}" in message and f"transformers {transformers_version()}" in message
    assert "'ropekit.families'" in message and "strict=False" in message
    assert isinstance(error, ropekit.RopeConfigError)


def test_lenient_mode_reads_unknown_code_as_plain_llama_with_a_warning_naming_the_guess() -> None:
    with pytest.warns(UserWarning, match=r"model_type: model_type 'my_new_model' is unknown.*plain Llama-style"):
        table = ropekit.load({**LLAMA, "model_type": "my_new_model"}, strict=False).table
    np.testing.assert_allclose(table.inv_freq, _plain(1e4, 64), rtol=1e-15)
    assert table.layout == "neox" and table.rotary_dim == 64


def test_an_unknown_text_model_inside_a_known_wrapper_is_refused_at_its_path() -> None:
    with pytest.raises(ropekit.UnknownModelTypeError) as caught:
        ropekit.load({"model_type": "llava", "text_config": {**LLAMA, "model_type": "secret_lm"}})
    assert caught.value.path == "text_config.model_type"


def test_a_config_without_model_type_is_read_as_stated() -> None:
    table = ropekit.load(LLAMA).table
    np.testing.assert_allclose(table.inv_freq, _plain(1e4, 64), rtol=1e-15)


def test_remote_code_without_model_type_is_identified_by_its_class_or_refused() -> None:
    chatglm2 = _published("chatglm2-6b.json")  # the first ChatGLM2-6B configs state no model_type
    assert "model_type" not in chatglm2 and chatglm2["architectures"] == ["ChatGLMModel"]
    table = ropekit.load(chatglm2).table
    assert (table.rotary_dim, table.layout, table.geometry.theta) == (64, "gptj", 1e4)
    unknown = {**LLAMA, "architectures": ["SecretForCausalLM"], "auto_map": {"AutoModel": "modeling_secret.Secret"}}
    with pytest.raises(ropekit.UnknownModelTypeError, match="remote code"):
        ropekit.load(unknown)
    with pytest.warns(UserWarning, match="plain Llama-style"):
        assert ropekit.load(unknown, strict=False).table.rotary_dim == 64


def test_a_wrapper_keeping_its_language_model_elsewhere_is_served_from_there() -> None:
    """Qwen2.5-Omni's language model is its thinker's text model: served from there (its 3-axis sections
    by its class default), and a problem in it is named where the wrapper keeps it."""
    facts = class_facts("qwen2_5_omni")
    assert facts is not None and facts.kind == "composite" and facts.text == "thinker_config"
    text = {**LLAMA, "hidden_size": 512}  # a 128-channel head: the class's default sections [16, 24, 24] fit
    table = ropekit.load({"model_type": "qwen2_5_omni", "thinker_config": {"text_config": text}}).table
    assert table.mrope_section == (16, 24, 24) and table.head_dim == 128
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({"model_type": "qwen2_5_omni", "thinker_config": {"text_config": LLAMA}})
    assert caught.value.path == "thinker_config.text_config.rope_scaling.mrope_section"
    assert str(caught.value).startswith("thinker_config.text_config.rope_scaling.mrope_section: sections")


# --- code without RoPE ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "path", "reason"), [
    ("gpt2-large.json", "model_type", "learned absolute position embeddings"),
    ("gpt-bigcode-santacoder-reconstructed.json", "model_type", "learned absolute position embeddings"),
    ("baichuan-13b-chat.json", "hidden_size", "ALiBi"),
])
def test_published_models_without_rope_are_refused_by_name(name: str, path: str, reason: str) -> None:
    with pytest.raises(ropekit.NoRopeError, match=reason) as caught:
        ropekit.load(PUBLISHED / name)
    assert caught.value.path == path and "no RoPE" in str(caught.value)


def test_mla_without_a_rope_sub_head_is_refused_as_no_rope() -> None:
    """GLM-5-next's text model: qk_rope_head_dim 0, no rotary module; its attention rotates nothing."""
    config = {"model_type": "glm5_next_text", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512,
              "qk_nope_head_dim": 64, "qk_rope_head_dim": 0}
    with pytest.raises(ropekit.NoRopeError, match="no rope sub-head") as caught:
        ropekit.load(config)
    assert caught.value.path == "qk_rope_head_dim"


def test_every_class_of_the_pinned_transformers_is_classified() -> None:
    from ropekit.config.classes import _catalogue

    version, classes = _catalogue()
    assert version == transformers_version() and len(classes) > 800
    kinds = {entry["kind"] for entry in classes.values()}
    assert kinds <= {"rope", "no_rope", "composite", "unreadable"}
    assert all(entry["reason"] for entry in classes.values() if entry["kind"] == "no_rope")
    assert class_facts("llama") == class_facts("llama") and class_facts("llama").kind == "rope"  # type: ignore[union-attr]
    assert class_facts("bert").kind == "no_rope"  # type: ignore[union-attr]
    assert class_facts("no_such_model") is None


# --- remote families decided by evidence ---------------------------------------------------------


def test_chatglm2_32k_interpolates_positions_as_its_code_does() -> None:
    """modeling_chatglm.py of chatglm2-6b-32k: ``seq_idx = arange(seq_len) / rope_ratio``, base 10000,
    over half of kv_channels, interleaved pairs (REMOTE_CODE.md, 1a)."""
    config = _published("chatglm2-6b-32k.json")
    table = ropekit.load(config).table
    assert (table.rope_type, table.params["factor"], table.geometry.theta) == ("linear", 16, 1e4)
    np.testing.assert_allclose(table.inv_freq, _plain(1e4, 64) / 16, rtol=1e-15)
    assert table.layout == "gptj" and table.head_dim == 128 and table.rotary_dim == 64


def test_chatglm3_and_glm4_scale_the_base_as_their_code_does() -> None:
    glm4 = ropekit.load(PUBLISHED / "glm-4-9b-chat.json").table  # rope_ratio 500: base 10000 * 500
    np.testing.assert_allclose(glm4.inv_freq, _plain(5e6, 64), rtol=1e-15)
    million = ropekit.load(PUBLISHED / "glm-4-9b-chat-1m.json").table
    np.testing.assert_allclose(million.inv_freq, _plain(1e8, 64), rtol=1e-15)
    for name in ("glm-4-9b.json", "chatglm3-6b.json"):  # no rope_ratio: the same table in every ChatGLM code
        np.testing.assert_allclose(ropekit.load(PUBLISHED / name).table.inv_freq, _plain(1e4, 64), rtol=1e-15)


def test_an_undecidable_chatglm_ratio_is_refused_naming_the_evidence() -> None:
    config = _published("chatglm2-6b-32k.json")
    del config["_name_or_path"]
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_ratio"
    assert "_name_or_path" in str(caught.value) and "padded_vocab_size 151552" in str(caught.value)
    decided = ropekit.load({**config, "_name_or_path": "THUDM/chatglm3-6b-32k"}).table
    np.testing.assert_allclose(decided.inv_freq, _plain(16e4, 64), rtol=1e-15)
    by_vocab = ropekit.load({**config, "padded_vocab_size": 151552}).table
    np.testing.assert_allclose(by_vocab.inv_freq, _plain(16e4, 64), rtol=1e-15)
    same = ropekit.load({**config, "rope_ratio": 1}).table  # a ratio of 1 needs no evidence
    np.testing.assert_allclose(same.inv_freq, _plain(1e4, 64), rtol=1e-15)


def test_baichuan_7b_rotates_with_its_hard_coded_base() -> None:
    table = ropekit.load(PUBLISHED / "baichuan-7b.json").table
    np.testing.assert_allclose(table.inv_freq, _plain(1e4, 128), rtol=1e-15)
    assert table.layout == "neox"
    config = _published("baichuan-7b.json")
    with pytest.raises(ropekit.RopeConfigError, match="ignores it") as caught:
        ropekit.load({**config, "rope_theta": 5e5})
    assert caught.value.path == "rope_theta"
    with pytest.warns(UserWarning, match="rope_theta: baichuan's code ignores it; its value 10000"):
        ropekit.load({**config, "rope_theta": 10000})  # the very base the code uses: nothing to refuse
    baichuan2_7b = {**config, "architectures": ["BaichuanForCausalLM"]}  # shape 4096 x 32: the RoPE code
    np.testing.assert_allclose(ropekit.load(baichuan2_7b).table.inv_freq, _plain(1e4, 128), rtol=1e-15)
    other = {**baichuan2_7b, "hidden_size": 2048, "num_attention_heads": 16}
    with pytest.raises(ropekit.RopeConfigError, match="BaiChuanForCausalLM") as caught:
        ropekit.load(other)
    assert caught.value.path == "model_type"


# --- strict without false refusals ---------------------------------------------------------------


def _quietly_or(pattern: str, config: Any) -> ropekit.ModelRope:
    with pytest.warns(UserWarning, match=pattern):
        return ropekit.load(config)


@pytest.mark.parametrize("name", ["qwen2.5-7b.json", "qwen2.5-3b.json"])
def test_qwen25_use_mrope_false_loads_and_true_is_refused(name: str) -> None:
    config = _published(name)
    assert config["use_mrope"] is False
    model = _quietly_or(r"use_mrope: not read by ropekit; its value False states what ropekit serves", config)
    theta, head = config["rope_theta"], config["hidden_size"] // config["num_attention_heads"]
    np.testing.assert_allclose(model.table.inv_freq, _plain(theta, head), rtol=1e-15)
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({**config, "use_mrope": True})
    assert caught.value.path == "use_mrope"


def test_smollm2_rope_interleaved_false_loads_and_true_is_refused() -> None:
    config = _published("smollm2-135m-resaved-transformers5.json")
    model = _quietly_or(r"rope_interleaved: not read by ropekit; its value False", config)
    np.testing.assert_allclose(model.table.inv_freq, _plain(1e5, 64), rtol=1e-15)
    assert model.table.layout == "neox"
    with pytest.raises(ropekit.RopeConfigError, match="did you mean 'rope_interleave'") as caught:
        ropekit.load({**config, "rope_interleaved": True})
    assert caught.value.path == "rope_interleaved"
    with pytest.warns(UserWarning, match="rope_interleaved"):  # lenient: warned, never silent
        assert ropekit.load({**config, "rope_interleaved": True}, strict=False).table.layout == "neox"


def test_a_lookalike_equal_to_the_real_key_is_a_warning_and_a_different_one_is_refused() -> None:
    deepseek = {"model_type": "deepseek_v3", "hidden_size": 512, "num_attention_heads": 4, "qk_rope_head_dim": 64,
                "qk_nope_head_dim": 64, "rope_theta": 1e4, "rope_interleave": True}
    model = _quietly_or(r"indexer_rope_interleave: not read by ropekit", {**deepseek, "indexer_rope_interleave": True})
    assert model.table.layout == "gptj"
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({**deepseek, "indexer_rope_interleave": False})
    assert caught.value.path == "indexer_rope_interleave"


@pytest.mark.parametrize(("key", "same", "other"), [
    ("rope_thetta", 10000.0, 500000.0),  # a misspelling of a read key: compared with what it would say
    ("use_rope", True, False),
    ("rope_traditional", False, True),  # MLX's pairing flag; the model rotates halves
    ("rope_scalling", None, {"rope_type": "linear", "factor": 2.0}),
])
def test_every_lookalike_is_judged_against_the_served_table(key: str, same: Any, other: Any) -> None:
    with pytest.warns(UserWarning, match=f"{key}: not read by ropekit"):
        ropekit.load({**LLAMA, key: same})
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({**LLAMA, key: other})
    assert caught.value.path == key


def test_per_layer_type_parameters_with_a_stray_key_load_as_transformers_loads_them() -> None:
    blocks = {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    base = {"head_dim": 64, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]}
    clean = ropekit.load({**base, "rope_parameters": blocks})
    with pytest.warns(UserWarning, match=r"rope_parameters.rope_theta: beside rope parameters given per layer type"):
        stray = ropekit.load({**base, "rope_parameters": {**blocks, "rope_theta": 5e5}})
    for name in ("full_attention", "sliding_attention"):
        np.testing.assert_array_equal(stray.rotating_table(name).inv_freq, clean.rotating_table(name).inv_freq)
    with pytest.raises(ropekit.RopeConfigError) as caught:  # a layer type's block must still be a block
        ropekit.load({**base, "rope_parameters": {**blocks, "sliding_attention": 3}})
    assert caught.value.path == "rope_parameters.sliding_attention"


def test_llava_text_config_relies_on_its_class_defaults() -> None:
    """LLaVA-1.5's text_config states no hidden_size, heads or theta: LlamaConfig's defaults apply."""
    config = _published("llava-1.5-7b-hf.json")
    assert "hidden_size" not in config["text_config"]
    with pytest.warns(UserWarning, match=r"^text_config\.head_dim: the config states no width .*head_dim 128"):
        table = ropekit.load(config).table  # served as the class runs it, and said: nothing stated confirms it
    assert (table.head_dim, table.rotary_dim, table.geometry.max_position_embeddings) == (128, 128, 4096)
    np.testing.assert_allclose(table.inv_freq, _plain(1e4, 128), rtol=1e-15)


def test_no_warning_for_a_config_that_states_only_what_is_read(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ropekit.load(PUBLISHED / "glm-4-9b-chat.json")
        ropekit.load(PUBLISHED / "qwen2.5-vl-7b-instruct.json")
