"""ropekit.mlx.patch inside MLX-VLM's Qwen2-VL, Qwen2.5-VL and Qwen3-VL language models: tiny random
models built from configs in code (as MLX-VLM's own ``load_model`` builds them, no download) give the
stock logits on inputs with an image (3-axis positions from MLX-VLM's ``get_rope_index``), in the
prefill and in a cached decode step; a wrong table changes them, so the parity is not vacuous; other
MLX-VLM rotary classes and text-only tables are refused by name."""

from __future__ import annotations

import copy
import importlib
from typing import Any

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason="mlx is not installed: pip install 'ropekit[mlx]' (mlx[cpu] on Linux)")
pytest.importorskip("mlx_vlm", reason="mlx-vlm is not installed: pip install 'ropekit[mlx-vlm]'")

import ropekit  # noqa: E402
import ropekit.mlx as rm  # noqa: E402

IMAGE, VIDEO, START, END = 60, 61, 62, 63
KINDS = ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"]
GRID = (1, 8, 12)  # one image of 8x12 patches: 24 merged tokens
ROTARY = ["language_model.model.layers.1.self_attn.rotary_emb", "language_model.model.layers.0.self_attn.rotary_emb"]


def config(kind: str, section: list[int] | None = None) -> dict[str, Any]:
    """A tiny config in the hub's form: Qwen2-VL / Qwen2.5-VL keep the text fields at the top level
    (``rope_scaling: {type: mrope, mrope_section}``), Qwen3-VL has a ``text_config``."""
    text: dict[str, Any] = {"vocab_size": 64, "hidden_size": 128, "intermediate_size": 64, "num_hidden_layers": 2,
                            "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-6,
                            "max_position_embeddings": 4096, "rope_theta": 10000.0,
                            "rope_scaling": {"type": "mrope", "mrope_section": section or [8, 12, 12]}}
    vision: dict[str, Any] = {"model_type": kind, "depth": 1, "num_heads": 2, "patch_size": 14, "spatial_merge_size": 2,
                              "temporal_patch_size": 2}
    tokens = {"image_token_id": IMAGE, "video_token_id": VIDEO, "vision_start_token_id": START,
              "vision_end_token_id": END}
    if kind == "qwen3_vl":
        text.update(model_type="qwen3_vl_text", head_dim=64,
                    rope_scaling={"rope_type": "default", "mrope_section": section or [12, 10, 10],
                                  "mrope_interleaved": True})
        vision.update(hidden_size=32, intermediate_size=32, out_hidden_size=128, patch_size=16,
                      deepstack_visual_indexes=[0], num_position_embeddings=64)
        return {"model_type": kind, "text_config": text, "vision_config": vision, **tokens}
    if kind == "qwen2_5_vl":
        vision.update(hidden_size=32, intermediate_size=32, out_hidden_size=128, window_size=56,
                      fullatt_block_indexes=[0])
    else:
        vision.update(embed_dim=32, hidden_size=128, mlp_ratio=1)
    return {"model_type": kind, **text, "vision_config": vision, **tokens}


def tiny(document: dict[str, Any]) -> Any:
    """The MLX-VLM model for ``document``, random weights (the config steps of ``mlx_vlm.utils.load_model``)."""
    utils = importlib.import_module("mlx_vlm.utils")
    document = copy.deepcopy(document)
    arch = importlib.import_module(f"mlx_vlm.models.{document['model_type']}")
    document.setdefault("text_config", {})
    model_config = utils.update_module_configs(arch.ModelConfig.from_dict(document), arch, document,
                                               ["text", "vision"])
    mx.random.seed(0)
    model = arch.Model(model_config)
    mx.eval(model.parameters())
    return model


def image_inputs(model: Any) -> dict[str, Any]:
    """Text, one image (its merged tokens between the vision start and end tokens), text again."""
    vision = model.config.vision_config
    patches = GRID[0] * GRID[1] * GRID[2]
    rng = np.random.default_rng(0)
    ids = np.concatenate([rng.integers(3, 50, 5), [START], [IMAGE] * (patches // vision.spatial_merge_size ** 2),
                          [END], rng.integers(3, 50, 9)])[None]
    pixels = rng.standard_normal((patches, 3 * vision.temporal_patch_size * vision.patch_size ** 2))
    return {"input_ids": mx.array(ids), "pixel_values": mx.array(pixels.astype(np.float32)),
            "image_grid_thw": mx.array([GRID])}


def logits(model: Any, inputs: dict[str, Any]) -> Any:
    return np.array(model(**inputs).logits, dtype=np.float64)


def prefill_and_step(model: Any, inputs: dict[str, Any]) -> Any:
    """The logits of a cached decode step after the image prompt (MLX-VLM's rope deltas)."""
    cache = importlib.import_module("mlx_vlm.models.cache").make_prompt_cache(model.language_model)
    model(**inputs, cache=cache)
    return np.array(model.language_model(mx.array([[7]]), cache=cache).logits, dtype=np.float64)


@pytest.mark.parametrize("kind", KINDS)
def test_patched_models_give_the_stock_logits_with_an_image(kind: str) -> None:
    document = config(kind)
    model = tiny(document)
    inputs = image_inputs(model)
    positions = np.array(model.language_model.get_rope_index(inputs["input_ids"], inputs["image_grid_thw"])[0])
    assert positions.shape == (3, 1, 40) and not (positions[0] == positions[1]).all()  # really 3-axis
    stock, stock_step = logits(model, inputs), prefill_and_step(model, inputs)
    assert rm.patch(model, document) == ROTARY
    rotary = model.language_model.model.layers[0].self_attn.rotary_emb
    assert isinstance(rotary, rm.MultimodalRotaryEmbedding) and not rotary.fused_apply
    assert rotary.table.mrope_composition == ("interleaved" if kind == "qwen3_vl" else "sections")
    assert np.abs(logits(model, inputs) - stock).max() < 1e-5
    assert np.abs(prefill_and_step(model, inputs) - stock_step).max() < 1e-5
    # No image: (batch, seq) text positions, on a fresh model (MLX-VLM keeps the last prompt's positions).
    text = {"input_ids": inputs["input_ids"]}
    fresh = tiny(document)
    stock_text = logits(fresh, text)
    rm.patch(fresh, document)
    assert np.abs(logits(fresh, text) - stock_text).max() < 1e-5


@pytest.mark.parametrize(("kind", "wrong"), [("qwen2_vl", [12, 12, 8]), ("qwen2_5_vl", [12, 12, 8]),
                                             ("qwen3_vl", [24, 4, 4])])
def test_a_wrong_table_changes_the_logits(kind: str, wrong: list[int]) -> None:
    """Other sections change the logits on the image tokens: the parity above is not vacuous."""
    model = tiny(config(kind))
    inputs = image_inputs(model)
    stock = logits(model, inputs)
    rm.patch(model, config(kind, section=wrong))
    assert np.abs(logits(model, inputs) - stock).max() > 1e-3  # 100x the parity tolerance


def test_other_mlx_vlm_rotary_classes_are_refused_by_name() -> None:
    model = tiny(config("qwen3_vl"))
    moe = importlib.import_module("mlx_vlm.models.qwen3_vl_moe.language")
    layers = model.language_model.model.layers
    layers[1].self_attn.rotary_emb = moe.Qwen3VLMoERotaryEmbedding(
        64, base=10000.0, rope_scaling={"type": "default", "mrope_section": [12, 10, 10]})
    with pytest.raises(ropekit.ArgumentError, match="cannot patch MLX-VLM's Qwen3VLMoERotaryEmbedding"):
        rm.patch(model, config("qwen3_vl"))
    assert not isinstance(layers[0].self_attn.rotary_emb, rm.MultimodalRotaryEmbedding)  # nothing replaced


def test_text_only_tables_and_other_widths_are_refused() -> None:
    model = tiny(config("qwen2_vl"))
    text_only = {"model_type": "qwen2", "hidden_size": 128, "num_attention_heads": 2, "rope_theta": 10000.0}
    with pytest.raises(ropekit.ArgumentError, match="Qwen2RotaryEmbedding serves 3-axis .* text-only"):
        rm.patch(model, text_only)
    with pytest.raises(ropekit.ArgumentError, match="rotates 64 channels, ropekit's full_attention table 128"):
        rm.patch(model, config("qwen2_vl") | {"hidden_size": 256, "rope_scaling": {"type": "mrope",
                                                                                 "mrope_section": [16, 24, 24]}})
    with pytest.raises(ropekit.ArgumentError, match="text-only"):
        rm.MultimodalRotaryEmbedding(ropekit.load(text_only).table)


def test_module_contract_shapes_and_dtypes() -> None:
    table = ropekit.load(config("qwen3_vl")).table
    rotary = rm.MultimodalRotaryEmbedding(table)
    positions = np.random.default_rng(1).integers(0, 3000, size=(3, 2, 5))
    cos, sin = rotary(mx.zeros((1,), dtype=mx.float16), mx.array(positions))
    assert cos.shape == (2, 5, 64) and cos.dtype == mx.float16
    want = table.cos_sin(positions, dtype=np.float16)
    assert np.array_equal(np.array(cos), want[0]) and np.array_equal(np.array(sin), want[1])
    text, _ = rotary(mx.zeros((1,)), mx.array(positions[0]))  # (batch, seq): every axis the same
    assert np.array_equal(np.array(text), table.cos_sin(np.stack([positions[0]] * 3))[0])
    q = mx.ones((2, 2, 5, 64))
    rotated, _ = rotary.apply_rotary(q, q, mx.array(positions))
    assert rotated.shape == q.shape
    with pytest.raises(ropekit.ArgumentError, match=r"expected \(3, batch, seq\) or \(batch, seq\)"):
        rotary(mx.zeros((1,)), mx.array(positions[:2]))
