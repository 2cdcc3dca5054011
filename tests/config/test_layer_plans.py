"""No crash after load: a config that loads serves every layer, or it is refused at load.

A class that keeps rope parameters per layer type builds its layer plan itself when a config
states no ``layer_types`` (ModernBERT every ``global_attn_every_n_layers``-th layer global, OLMo-3
every fourth, EmbeddingGemma every sixth): ``layer_plan`` in ``transformers_classes.json``, derived
from the class by ``scripts/transformers_classes.py``. ropekit builds the same plan, or refuses the
config at load naming ``layer_types`` where no plan was derived."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

import ropekit

from ..support import ROOT

FACTS: dict[str, Any] = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text(
    encoding="utf-8"))["classes"]
PER_TYPE = sorted(name for name, entry in FACTS.items()
                  if entry["kind"] == "rope" and isinstance(entry.get("theta"), dict) and len(entry["theta"]) > 1)


def _minimal(model_type: str, layers: int, **stated: Any) -> dict[str, Any]:
    return {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
            "num_hidden_layers": layers, "max_position_embeddings": 8192, **stated}


@pytest.mark.parametrize("model_type", PER_TYPE)
def test_a_config_without_layer_types_serves_every_layer_or_is_refused_at_load(model_type: str) -> None:
    plan = FACTS[model_type].get("layer_plan") or {}
    for layers in (1, 7, 12):
        refusal: ropekit.RopeConfigError | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = ropekit.load(_minimal(model_type, layers))
        except ropekit.RopeConfigError as error:
            refusal = error
        if refusal is not None:  # refused at load, by name; never for want of a plan the class was seen to build
            assert not (plan.get("pattern") and refusal.path == "layer_types"), (model_type, refusal)
            continue
        assert len(model.layer_types) == layers, model_type
        for index in range(layers):
            model.for_layer(index)  # a table, or None for a layer without RoPE: never a LookupError
        if plan.get("pattern"):
            assert list(model.layer_types) == _expected(plan, layers), model_type


def _expected(plan: dict[str, Any], layers: int) -> list[str]:
    """The plan as transformers builds it (``layer_plan``: pattern repeated, first and last forced)."""
    expected = [plan["pattern"][index % len(plan["pattern"])] for index in range(layers)]
    if plan.get("first"):
        expected[0] = plan["first"]
    if plan.get("last"):
        expected[-1] = plan["last"]
    return expected


@pytest.mark.parametrize("model_type", sorted(name for name in PER_TYPE
                                              if (FACTS[name].get("layer_plan") or {}).get("keys")))
def test_a_plan_key_the_config_states_chooses_the_classes_plan(model_type: str) -> None:
    """ModernBERT's ``global_attn_every_n_layers`` 2 makes every other layer global, as its class does."""
    for key, known in FACTS[model_type]["layer_plan"]["keys"].items():
        for value, plan in known["patterns"].items():
            if json.loads(value) == known["default"]:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = ropekit.load(_minimal(model_type, 12, **{key: json.loads(value)}))
            assert list(model.layer_types) == _expected(plan, 12), (model_type, key, value)


def test_modernbert_as_transformers_4_wrote_it() -> None:
    """A ModernBERT config as 4.x saved it: global_rope_theta / local_rope_theta and
    global_attn_every_n_layers, no layer_types and no rope block (values of
    ``ModernBertConfig.from_dict`` in transformers 5.24: full layers 0, 3, 6, ... base 160000,
    the others 10000 unless stated)."""
    model = ropekit.load(_minimal("modernbert", 6, global_rope_theta=160000.0, local_rope_theta=10000.0,
                                  global_attn_every_n_layers=3))
    assert model.layer_types == ("full_attention", "sliding_attention", "sliding_attention") * 2
    assert [_theta(model, index) for index in range(3)] == [160000.0, 10000.0, 10000.0]
    halves = ropekit.load(_minimal("modernbert", 4, local_rope_theta=20000.0, global_attn_every_n_layers=2))
    assert [_theta(halves, index) for index in range(2)] == [160000.0, 20000.0]


def _theta(model: ropekit.ModelRope, index: int) -> float:
    table = model.for_layer(index)
    assert table is not None, index
    return table.geometry.theta
