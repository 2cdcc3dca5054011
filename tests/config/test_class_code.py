"""What a class's own code makes of a config that states little, or that wraps its language model
(issue #31): a wrapper's defaults for the language model it builds, a wrapper keeping that model under
a key of its own, a renamed text model_type, pairs an MLA class interleaves whatever its config says, a
rotated sub-head after the unrotated one, a head width from a class default of its code, RoFormer's
rotation, and the warning a config stating no width gets. Expected values are what the classes of
the pinned transformers apply (quoted beside each); the probe re-checks them on the classes themselves
(``tests/engines/test_probe.py``, the sweep)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.config.classes import class_facts

WIDTH = {"hidden_size": 1024, "num_attention_heads": 8}
"""Enough stated width that no test here is the width-less case (except the one testing it)."""


def _plain(theta: float, dim: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def _quiet_load(config: dict[str, Any]) -> ropekit.ModelRope:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ropekit.load(config)


# --- a wrapper's own defaults for the language model it builds --------------------------------------


def test_voxtral_builds_its_language_model_with_its_own_base() -> None:
    """configuration_voxtral.py: ``sub_configs_defaults["text_config"]`` is a Llama with ``rope_theta``
    1e8 and ``head_dim`` 128, not Llama's own defaults (base 1e4)."""
    facts = class_facts("voxtral")
    assert facts is not None and facts.text_defaults["rope_theta"] == 1e8
    table = _quiet_load({"model_type": "voxtral"}).table
    np.testing.assert_allclose(table.inv_freq, _plain(1e8, 128), rtol=1e-15)
    # Voxtral also lays them under a text_config it is given (its own backward-compatibility merge)
    assert facts.text_defaults_merged
    table = ropekit.load({"model_type": "voxtral", "text_config": {"model_type": "llama", **WIDTH}}).table
    np.testing.assert_allclose(table.inv_freq, _plain(1e8, 128), rtol=1e-15)
    # a stated value always wins over a class default
    table = ropekit.load({"model_type": "voxtral", "text_config": {"model_type": "llama", "rope_theta": 5e5,
                                                                   "head_dim": 64, **WIDTH}}).table
    np.testing.assert_allclose(table.inv_freq, _plain(5e5, 64), rtol=1e-15)


def test_mistral3_uses_its_text_defaults_only_when_it_builds_the_text_model_itself() -> None:
    """configuration_mistral3.py builds its default Mistral text model with base 1e9; a stated
    text_config is built as Mistral's own class builds it."""
    facts, mistral = class_facts("mistral3"), class_facts("mistral")
    assert facts is not None and mistral is not None and not facts.text_defaults_merged
    assert facts.text_defaults["rope_theta"] == 1e9
    head = 5120 // 32 if "head_dim" not in facts.text_defaults else int(facts.text_defaults["head_dim"])
    table = _quiet_load({"model_type": "mistral3"}).table
    np.testing.assert_allclose(table.inv_freq, _plain(1e9, table.head_dim), rtol=1e-15)
    assert table.head_dim in (head, 128)
    stated = ropekit.load({"model_type": "mistral3", "text_config": {"model_type": "mistral", **WIDTH}}).table
    assert isinstance(mistral.theta, float)
    np.testing.assert_allclose(stated.inv_freq, _plain(mistral.theta, 128), rtol=1e-15)


# --- wrappers keeping their language model under a key of their own ----------------------------------


def test_qwen25_omni_is_served_from_its_thinker() -> None:
    """Qwen2.5-Omni keeps its language model in ``thinker_config`` (whose own ``text_config`` is the
    text model): the table is that model's, and errors name the key where the wrapper keeps it."""
    table = _quiet_load({"model_type": "qwen2_5_omni"}).table
    assert table.mrope_section is not None and table.rope_type == "default"
    config = {"model_type": "qwen2_5_omni", "thinker_config": {"model_type": "qwen2_5_omni_thinker", "text_config": {
        "model_type": "qwen2_5_omni_text", **WIDTH, "rope_parameters": {"rope_type": "default", "rope_theta": -1}}}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path.startswith("thinker_config.text_config.rope_parameters")
    assert str(caught.value).startswith("thinker_config.text_config.rope_parameters")


@pytest.mark.parametrize(("model_type", "text_type"), [("colpali", "gemma"), ("colqwen2", "qwen2_vl_text")])
def test_retrieval_wrappers_are_served_from_the_vlm_they_wrap(model_type: str, text_type: str) -> None:
    """ColPali and ColQwen2 keep a whole VLM under ``vlm_config``; its language model rotates."""
    facts = class_facts(model_type)
    assert facts is not None and (facts.kind, facts.text) == ("composite", "vlm_config")
    wrapped = _quiet_load({"model_type": model_type}).table
    inner = _quiet_load({"model_type": text_type}).table
    assert wrapped.rope_type == inner.rope_type and wrapped.head_dim in (inner.head_dim, wrapped.head_dim)
    assert wrapped.inv_freq.size > 0


def test_a_renamed_text_model_type_is_read_as_the_class_its_wrapper_builds() -> None:
    """configuration_exaone4_5.py: EXAONE 4.5 first released its text model as ``exaone4_5_text``;
    the class builds it as ``exaone4``."""
    facts = class_facts("exaone4_5")
    assert facts is not None and facts.renames.get("exaone4_5_text") == "exaone4"
    text = {**WIDTH, "num_hidden_layers": 4, "sliding_window": 4096,
            "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]}
    renamed = ropekit.load({"model_type": "exaone4_5", "text_config": {"model_type": "exaone4_5_text", **text}})
    current = ropekit.load({"model_type": "exaone4_5", "text_config": {"model_type": "exaone4", **text}})
    assert renamed.layer_types == current.layer_types
    for layer in range(4):
        served, expected = renamed.for_layer(layer), current.for_layer(layer)
        assert (served is None) == (expected is None)
        if served is not None and expected is not None:
            np.testing.assert_array_equal(served.inv_freq, expected.inv_freq)


# --- pairs and blocks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa"])
def test_mla_classes_that_always_interleave_are_served_interleaved(model_type: str) -> None:
    """modeling_deepseek_v32.py / modeling_glm_moe_dsa.py call ``apply_rotary_pos_emb_interleave`` on
    the rope sub-head unconditionally: pairs (2j, 2j+1) of the projected channels."""
    facts = class_facts(model_type)
    assert facts is not None and facts.pairing == "gptj"
    assert ropekit.load({"model_type": model_type, "qk_rope_head_dim": 64}).table.layout == "gptj"
    with pytest.warns(UserWarning, match=r"rope_interleave: False is not read by .* ropekit serves gptj"):
        table = ropekit.load({"model_type": model_type, "qk_rope_head_dim": 64, "rope_interleave": False}).table
    assert table.layout == "gptj"


def test_deepseek_v3_still_follows_its_rope_interleave() -> None:
    """modeling_deepseek_v3.py interleaves only ``if self.config.rope_interleave``."""
    facts = class_facts("deepseek_v3")
    assert facts is not None and facts.pairing is None
    assert ropekit.load({"model_type": "deepseek_v3", "qk_rope_head_dim": 64}).table.layout == "gptj"
    assert ropekit.load({"model_type": "deepseek_v3", "qk_rope_head_dim": 64,
                         "rope_interleave": False}).table.layout == "neox"


def test_mistral4_serves_its_rope_sub_head() -> None:
    """Mistral-4's default block states ``partial_rotary_factor`` qk_rope / (qk_nope + qk_rope) = 0.5
    over its 128-channel head; its attention rotates the 64-channel rope sub-head that follows the
    unrotated one, with frequencies over 64 channels."""
    table = _quiet_load({"model_type": "mistral4"}).table
    assert (table.head_dim, table.rotary_dim, table.rope_type) == (64, 64, "yarn")
    assert table.inv_freq.size == 32


def test_gemma4_widens_its_global_heads_by_its_code_default() -> None:
    """configuration_gemma4.py: ``global_head_dim = kwargs.pop("global_head_dim", 512)`` sets the
    full-attention layers' head width when a config states neither it nor ``per_layer_config``."""
    facts = class_facts("gemma4_text")
    assert facts is not None and facts.defaults.get("global_head_dim") == 512
    model = _quiet_load({"model_type": "gemma4"})
    assert model.rotating_table("full_attention").head_dim == 512 and model.rotating_table("sliding_attention").head_dim == 256
    stated = ropekit.load({"model_type": "gemma4_text", **WIDTH, "global_head_dim": 256, "head_dim": 128})
    assert stated.rotating_table("full_attention").head_dim == 256 and stated.rotating_table("sliding_attention").head_dim == 128


# --- RoFormer -----------------------------------------------------------------------------------------


def test_roformer_rotates_interleaved_pairs_with_its_sinusoidal_table() -> None:
    """modeling_roformer.py: sinusoidal tables over hidden_size // num_attention_heads with base 10000
    (``create_weight``), applied to pairs (2j, 2j+1) (``apply_rotary_position_embeddings``)."""
    facts = class_facts("roformer")
    assert facts is not None and facts.kind == "rope"
    table = ropekit.load({"model_type": "roformer", "hidden_size": 768, "num_attention_heads": 12}).table
    assert (table.layout, table.head_dim, table.rotary_dim) == ("gptj", 64, 64)
    np.testing.assert_allclose(table.inv_freq, _plain(1e4, 64), rtol=1e-15)


def test_roformer_rotating_its_values_is_refused_by_name() -> None:
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load({"model_type": "roformer", **WIDTH, "rotary_value": True})
    assert caught.value.path == "rotary_value" and "values" in str(caught.value)


# --- a config stating no width ------------------------------------------------------------------------


def test_a_config_stating_no_width_is_served_its_class_widths_with_a_warning() -> None:
    with pytest.warns(UserWarning, match=r"^head_dim: the config states no width .* full_attention head_dim 128 "
                                         r"rotating 128"):
        table = ropekit.load({"model_type": "llama"}).table
    assert table.head_dim == 128
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ropekit.load({"model_type": "llama", **WIDTH}).table.head_dim == 128


# --- a class default of a key the class reads --------------------------------------------------------


@pytest.mark.parametrize(("model_type", "head_dim", "rotary_dim"), [("codegen", 512, 64), ("gptj", 512, 64),
                                                                     ("gpt_neox", 512, 128)])
def test_a_read_key_left_to_the_class_gets_the_class_default(model_type: str, head_dim: int, rotary_dim: int) -> None:
    """configuration_codegen.py / configuration_gptj.py: ``rotary_dim`` defaults to 64 (not the whole
    head); configuration_gpt_neox.py: ``rotary_pct`` 0.25. A config stating only sizes gets them."""
    table = ropekit.load({"model_type": model_type, "hidden_size": 8192, "num_attention_heads": 16}).table
    assert (table.head_dim, table.rotary_dim) == (head_dim, rotary_dim)


# --- layers a class leaves without RoPE by default ----------------------------------------------------


@pytest.mark.parametrize(("model_type", "nope"), [
    # configuration_mistral_large4.py: no_rope_layers from kwargs.pop("no_rope_layer_interval", 4), from the first
    ("mistral_large4_text", (3, 7)),
    ("llama4_text", (3, 7)),
    # configuration_muse_spark.py: layer_rope_theta 0 on every 4th layer counted from the last
    ("muse_spark_text", (3, 7)),
])
def test_a_class_default_nope_plan_is_served(model_type: str, nope: tuple[int, ...]) -> None:
    facts = class_facts(model_type)
    assert facts is not None and facts.nope_default is not None
    model = _quiet_load({"model_type": model_type, **WIDTH, "num_hidden_layers": 8})
    assert model.no_rope_layers == nope
    assert all(model.for_layer(index) is None for index in nope)
    assert all(model.for_layer(index) is not None for index in range(8) if index not in nope)


def test_muse_counts_its_nope_layers_from_the_last() -> None:
    model = _quiet_load({"model_type": "muse_spark_text", **WIDTH, "num_hidden_layers": 6})
    assert model.no_rope_layers == (1, 5)  # (6 - 1 - i) % 4 == 0


def test_a_head_dim_the_rotary_does_not_read_is_named_and_not_served() -> None:
    """Unlimited-OCR's text rotary module rotates hidden_size // num_attention_heads channels whatever
    head_dim says."""
    facts = class_facts("unlimited_ocr_text")
    assert facts is not None and "head_dim" in facts.unread
    with pytest.warns(UserWarning, match=r"^head_dim: unlimited_ocr_text's rotary module does not read it"):
        table = ropekit.load({"model_type": "unlimited_ocr_text", **WIDTH, "head_dim": 256}).table
    assert table.head_dim == 1024 // 8
