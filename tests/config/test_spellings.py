"""4.x configs and their legacy keys: a top-level key is read where the config's class reads it,
under the spelling the class converts, winner first; one the class ignores is named and does not
change the table. The facts (``spellings``, ``reads`` of ``transformers_classes.json``) are derived
from each class's own ``convert_rope_params_to_dict`` by ``scripts/transformers_classes.py``; the
sweep (``v4_keys``, ``v4_ignored``) checks the result against what the classes apply."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

import ropekit

from ..support import ROOT

FACTS: dict[str, Any] = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text(
    encoding="utf-8"))["classes"]
RENAMED = sorted((name, field, layer_type, keys[0]) for name, entry in FACTS.items()
                 for field, per_type in (entry.get("spellings") or {}).items()
                 for layer_type, keys in per_type.items() if keys and keys[0] != field)


def _load(model_type: str, **stated: Any) -> ropekit.ModelRope:
    config: dict[str, Any] = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4,
                              "head_dim": 128, "num_hidden_layers": 12, "max_position_embeddings": 8192, **stated}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ropekit.load(config)
        except ropekit.RopeConfigError as error:
            if error.path != "layer_types":
                raise
        types = list(FACTS[model_type].get("rope_blocks") or FACTS[model_type]["theta"])
        return ropekit.load({**config, "layer_types": [types[index % len(types)] for index in range(12)]})


@pytest.mark.parametrize(("model_type", "field", "layer_type", "key"), RENAMED)
def test_a_spelling_the_class_converts_is_served(model_type: str, field: str, layer_type: str, key: str) -> None:
    """GPT-NeoX's rotary_pct and rotary_emb_base, Gemma-3's rope_local_base_freq, ModernBERT's
    global_rope_theta / local_rope_theta: the value stated is served, never a class default."""
    value = 0.5 if field == "partial_rotary_factor" else 123456.0
    if key == "rotary_dim":
        value = 64
    if model_type in ("dots3_note_text",):  # refused by design: MLA widths per layer (test_probe_sweep.py)
        with pytest.raises(ropekit.RopeConfigError):
            _load(model_type, **{key: value})
        return
    model = _load(model_type, **{key: value})
    tables = [table for name, table in model.tables.items() if not layer_type or name == layer_type]
    assert tables, (model_type, layer_type)
    for table in tables:
        if field == "rope_theta":
            assert table.geometry.theta == value, (model_type, key)
        else:
            assert table.rotary_dim == (value if key == "rotary_dim" else int(table.head_dim * value)), (model_type, key)


def test_redpajama_as_transformers_4_28_saved_it() -> None:
    """GPT-NeoX saved by 4.28 (RedPajama-INCITE-3B): rotary_pct 1.0 over the class default 0.25, so
    40 pairs over the whole 80-channel head (GPTNeoXModel, probed: tests/data/probe/published.json)."""
    table = ropekit.load(ROOT / "tests" / "data" / "configs" / "published" / "redpajama-incite-base-3b-v1.json").table
    assert (table.head_dim, table.rotary_dim, len(table.inv_freq), table.geometry.theta) == (80, 80, 40, 10000.0)


def test_a_spelling_losing_to_another_is_named() -> None:
    """MiniMax-M2's config class reads partial_rotary_factor before rotary_dim."""
    with pytest.warns(UserWarning, match=r"rotary_dim: minimax_m2's config class .* reads partial_rotary_factor first"):
        table = ropekit.load({"model_type": "minimax_m2", "head_dim": 128, "hidden_size": 512,
                              "num_attention_heads": 4, "partial_rotary_factor": 0.5, "rotary_dim": 32}).table
    assert table.rotary_dim == 64


@pytest.mark.parametrize("model_type", sorted(name for name, entry in FACTS.items() if entry["kind"] == "rope"
                                              and entry.get("spellings") is None
                                              and not set(entry.get("reads", ())) & {"rope_parameters",
                                                                                    "rope_scaling"}
                                              and "rotary_dim" in entry.get("reads", ())))
def test_a_rope_block_the_code_never_reads_is_named_and_plain_rope_served(model_type: str) -> None:
    """GPT-J's and CodeGen's code reads no rope block: a rope_scaling is named, the table is the
    code's plain RoPE over rotary_dim."""
    config = {"model_type": model_type, "n_embd": 256, "n_head": 4, "rotary_dim": 32, "n_positions": 2048}
    plain = ropekit.load(config).table
    with pytest.warns(UserWarning, match=rf"rope_scaling: {model_type}'s code ignores it"):
        scaled = ropekit.load({**config, "rope_scaling": {"type": "linear", "factor": 4.0}}).table
    assert scaled.rope_type == "default" and list(scaled.inv_freq) == list(plain.inv_freq)


def test_a_top_level_factor_gpt_neox_drops_is_named() -> None:
    """GPTNeoXConfig converts rotary_pct (default 0.25) and drops a top-level partial_rotary_factor."""
    with pytest.warns(UserWarning, match=r"partial_rotary_factor: gpt_neox's code ignores it"):
        table = ropekit.load({"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 4,
                              "partial_rotary_factor": 1.0}).table
    assert table.rotary_dim == 32  # int(128 * 0.25)
