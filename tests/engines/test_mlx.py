"""ropekit.mlx against real MLX and MLX-LM: the mx.fast.rope arguments, the drop-in module in a tiny
MLX-LM Llama, and the audit of MLX-LM's own rope modules (its longrope serves the long factors at
every length)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason="mlx is not installed: pip install 'ropekit[mlx]' (mlx[cpu] on Linux)")
mlx_lm_models = pytest.importorskip("mlx_lm.models", reason="mlx-lm is not installed: pip install mlx-lm")

from mlx_lm.models import llama, phi3  # noqa: E402

import ropekit  # noqa: E402
import ropekit.mlx as rm  # noqa: E402

TINY: dict[str, Any] = {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "vocab_size": 64}
LLAMA3: dict[str, Any] = {**TINY, "model_type": "llama", "max_position_embeddings": 64, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 16}}
PHI3: dict[str, Any] = {**TINY, "model_type": "phi3", "max_position_embeddings": 128, "original_max_position_embeddings": 32,
        "rope_theta": 10000.0, "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 10 for i in range(8)],
                                                "long_factor": [2.0 + i for i in range(8)]}}


def tiny(module: Any, config: dict[str, Any]) -> Any:
    mx.random.seed(0)
    model = module.Model(module.ModelArgs.from_dict(config))
    mx.eval(model.parameters())
    return model


def test_fast_rope_arguments_are_periods() -> None:
    table = ropekit.load({**LLAMA3, "max_position_embeddings": 131072}).table
    arguments = rm.fast_rope(table)
    assert arguments.dims == 16 and arguments.scale == 1.0 and arguments.traditional is False
    np.testing.assert_allclose(np.array(arguments.freqs), 1 / table.inv_freq, rtol=1e-7)
    x = np.zeros((1, 1, 3, 16), dtype=np.float32)
    x[..., :8] = 1.0
    out = np.array(mx.fast.rope(mx.array(x), 16, traditional=False, base=None, scale=1.0, offset=100,
                                freqs=arguments.freqs))
    exact = np.cos(np.arange(100, 103)[:, None] * table.inv_freq[None, :])
    np.testing.assert_allclose(out[0, 0, :, :8], exact, atol=2e-5)
    proportional = ropekit.load({"head_dim": 16, "rope_parameters": {"rope_type": "proportional", "factor": 1.0,
                                                                     "partial_rotary_factor": 0.5}}).table
    assert np.isinf(np.array(rm.fast_rope(proportional).freqs)[4:]).all()


def test_drop_in_module_matches_mlx_lm_llama3_and_changes_a_wrong_one() -> None:
    model = tiny(llama, LLAMA3)
    ids = mx.array(np.random.default_rng(0).integers(3, 64, (1, 40)))
    stock = np.array(model(ids))
    assert rm.patch(model, LLAMA3) == ["model.layers.1.self_attn.rope", "model.layers.0.self_attn.rope"]
    assert isinstance(model.model.layers[0].self_attn.rope, rm.RoPE)
    np.testing.assert_allclose(np.array(model(ids)), stock, rtol=1e-5, atol=1e-5)
    plain = {**LLAMA3, "rope_scaling": None}
    rm.patch(model, plain)
    assert np.abs(np.array(model(ids)) - stock).max() > 1e-3


def test_drop_in_longrope_follows_the_sequence_length() -> None:
    table = ropekit.load(PHI3).table
    module = rm.RoPE(table)
    x = np.zeros((1, 1, 4, 16), dtype=np.float32)
    x[..., :4] = 1.0
    short = np.array(module(mx.array(x), offset=0))[0, 0, :, :4]
    long = np.array(module(mx.array(x), offset=40))[0, 0, :, :4]
    factor = table.attention_factor
    np.testing.assert_allclose(short, factor * np.cos(np.arange(4)[:, None] * table.inv_freq[:4]), atol=1e-5)
    beyond = table.at(44)
    np.testing.assert_allclose(long, factor * np.cos(np.arange(40, 44)[:, None] * beyond.inv_freq[:4]), atol=1e-5)


def test_audit_module_mlx_lm() -> None:
    model = tiny(llama, LLAMA3)
    report = rm.audit_module(model, LLAMA3, positions=range(64))
    assert report["verdict"] == "match"
    assert report["modules"] == {"model.layers.1.self_attn.rope": "match", "model.layers.0.self_attn.rope": "match"}
    wrong = {**LLAMA3, "rope_scaling": {**LLAMA3["rope_scaling"], "factor": 4.0}}
    report = rm.audit_module(model, wrong, positions=range(64))
    assert report["verdict"] == "mismatch"
    rm.patch(model, LLAMA3)
    assert rm.audit_module(model, LLAMA3, positions=range(2048))["verdict"] == "match"


def test_audit_flags_mlx_lm_longrope_short_factor_behaviour() -> None:
    model = tiny(phi3, PHI3)
    short = rm.audit_module(model, PHI3, positions=range(32))
    assert short["verdict"] == "mismatch"
    assert short["layers"]["full_attention"]["served_as"].startswith("longrope at seq_len 33 (long_factor when")
    assert "the declaration differs at seq_len <= 32" in short["layers"]["full_attention"]["served_as"]
    assert rm.audit_module(model, PHI3, positions=range(100))["verdict"] == "match"  # past the switch: long is right
    rm.patch(model, PHI3)
    assert rm.audit_module(model, PHI3, positions=range(32))["verdict"] == "match"
    assert rm.audit_module(model, PHI3, positions=range(100))["verdict"] == "match"
    with pytest.raises(ropekit.ArgumentError, match="positions"):
        rm.audit_module(model, PHI3, positions=range(0))
