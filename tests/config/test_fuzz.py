"""Fuzzing ``ropekit.load``: whatever the config, only ropekit's own errors escape, built-in
schemes never blame themselves for a bad config, and every table returned is finite."""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ropekit

ROPE_TYPES = ["default", "linear", "dynamic", "yarn", "llama3", "longrope", "su", "proportional", "mrope",
              "nope", "", "LLAMA3"]
KEYS = ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "beta_fast",
        "beta_slow", "truncate", "attention_factor", "mscale", "mscale_all_dim", "short_factor", "long_factor",
        "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved", "type", "alpha"]

numbers = st.one_of(
    st.integers(min_value=-3, max_value=300_000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.5, max_value=64.0),
    st.sampled_from([0, 1, 2, 4, 8, 32, 64, 4096, 8192, 1e-300, 1e300, 0.25, 0.5, 1.0]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=5))
values = st.one_of(scalars, st.lists(numbers, max_size=70), st.dictionaries(st.text(max_size=4), scalars, max_size=3))


@st.composite
def blocks(draw: st.DrawFn) -> Any:
    block = draw(st.dictionaries(st.sampled_from(KEYS), values, max_size=6))
    if draw(st.booleans()):
        block["rope_type"] = draw(st.sampled_from(ROPE_TYPES))
    if "short_factor" in block or draw(st.booleans()):
        pairs = draw(st.sampled_from([2, 4, 8, 32]))
        for name in ("short_factor", "long_factor"):
            if draw(st.booleans()):
                block[name] = draw(st.lists(numbers, min_size=pairs, max_size=pairs))
    return draw(st.one_of(st.just(block), st.none(), values))


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = draw(st.dictionaries(
        st.sampled_from(["head_dim", "hidden_size", "num_attention_heads", "rope_theta", "partial_rotary_factor",
                         "max_position_embeddings", "original_max_position_embeddings", "rotary_pct",
                         "rope_local_base_freq", "qk_rope_head_dim", "global_head_dim", "num_hidden_layers",
                         "layer_types", "sliding_window_pattern"]),
        st.one_of(numbers, scalars, st.lists(st.sampled_from(["full_attention", "sliding_attention"]), max_size=4)),
        max_size=8,
    ))
    config.setdefault("head_dim", draw(st.sampled_from([4, 8, 16, 64, 128])))
    where = draw(st.sampled_from(["rope_scaling", "rope_parameters", "nested", "text_config"]))
    if where == "nested":
        config["rope_parameters"] = {"full_attention": draw(blocks()), "sliding_attention": draw(blocks())}
    elif where == "text_config":
        config = {"text_config": {**config, "rope_scaling": draw(blocks())}}
    else:
        config[where] = draw(blocks())
    return config


def _seeds() -> list[dict[str, Any]]:
    registry = ropekit.default_registry()
    return [dict(example.config) for name in ("default", "linear", "dynamic", "yarn", "llama3", "longrope",
                                              "proportional") for example in registry.scheme(name).examples]


@st.composite
def mutated_examples(draw: st.DrawFn) -> dict[str, Any]:
    """A built-in example config with one to three values replaced: reaches every builder."""
    config: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(_seeds())))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        holder = config
        for block_key in ("rope_scaling", "rope_parameters"):
            if isinstance(config.get(block_key), dict):
                holder = config[block_key]
                if "full_attention" in holder:
                    holder = holder["full_attention"]
        target = draw(st.sampled_from([config, holder]))
        target[draw(st.sampled_from([*KEYS, "head_dim", "max_position_embeddings"]))] = draw(values)
    return config


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(configs(), mutated_examples()), st.integers(min_value=1, max_value=1 << 20))
def test_only_ropekit_errors_escape(config: dict[str, Any], seq_len: int) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # an ignored look-alike key is a warning, never an escape
            model = ropekit.load(config)
        tables = [model.tables[name] for name in model.tables]
        tables += [table.at(seq_len) for table in tables]
    except ropekit.RopeConfigError:
        return
    for table in tables:
        assert table.inv_freq.dtype == np.float64
        assert np.all(np.isfinite(table.inv_freq))
        assert np.all(table.inv_freq >= 0)
        assert math.isfinite(table.attention_factor) and table.attention_factor > 0
