"""Multimodal RoPE in torch, against transformers' own classes: ropekit's rotary module equals every
multimodal rotary module of the pinned transformers at 3-axis positions, patched tiny Qwen2-VL,
Qwen2.5-VL and Qwen3-VL models give the stock logits on inputs with an image, and ``audit_module``
names a swapped, interleaved or text-only composition."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed: pip install 'ropekit[torch]'")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install transformers")

import torch  # noqa: E402

import ropekit  # noqa: E402
import ropekit.torch as rt  # noqa: E402
from ropekit.engines.torch import _stock_layout  # noqa: E402
from tests.support import DATA  # noqa: E402

GOLDEN = json.loads((DATA / "golden" / "mrope.json").read_text(encoding="utf-8"))["cases"]
IMAGE, VIDEO, START, END = 60, 61, 62, 63


@pytest.fixture(autouse=True)
def quiet_transformers() -> Iterator[None]:
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    yield
    transformers.logging.set_verbosity(verbosity)


def _stock_module(case: dict[str, Any]) -> Any:
    """The class's own rotary module, built on the golden config (as the golden script builds it)."""
    import importlib

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[case["model_type"]]
    values = {key: value for key, value in case["config"].items() if key != "model_type"}
    config = config_class(**values)
    package = config_class.__module__.rsplit(".", 1)[0]
    module = importlib.import_module(f"{package}.modeling_{package.rsplit('.', 1)[1]}")
    for name in dir(module):
        candidate = getattr(module, name)
        if (isinstance(candidate, type) and hasattr(candidate, "recomposition_frequencies")
                and not any(word in name for word in ("Vision", "Audio", "DiT", "Image"))):
            try:
                return candidate(config=config)
            except Exception:  # another sub-model's module
                continue
    raise AssertionError(f"no multimodal rotary module for {case['model_type']}")


@pytest.mark.parametrize("case", GOLDEN, ids=[case["model_type"] for case in GOLDEN])
def test_rotary_module_equals_every_multimodal_class(case: dict[str, Any]) -> None:
    stock = _stock_module(case)
    typed = [name[: -len("_inv_freq")] for name, _ in stock.named_buffers()
             if name.endswith("_inv_freq") and not name.startswith("original")]
    layer_type = typed[0] if typed else None
    ours = rt.RotaryEmbedding(case["config"], layout=_stock_layout(stock, layer_type))
    axes = len(case["positions"])
    positions = torch.as_tensor(np.random.default_rng(1).integers(0, 3000, size=(axes, 2, 7)))
    x = torch.zeros(1, dtype=torch.float32)
    with torch.no_grad():
        want = stock(x, positions) if layer_type is None else stock(x, positions, layer_type)
    got = ours(x, positions, layer_type if layer_type in ours.tables else None)
    tolerance = 3000 * 1.2e-7 + 2e-6  # transformers' float32 angles
    for mine, theirs in zip(got, want, strict=True):
        assert mine.shape == theirs.shape
        assert float((mine.double() - theirs.double()).abs().max()) < tolerance


def test_torch_cos_sin_equals_numpy_at_three_axis_positions() -> None:
    case = next(case for case in GOLDEN if case["model_type"] == "qwen2_5_vl_text")
    table = ropekit.load(case["config"]).table
    positions = np.random.default_rng(2).integers(0, 1 << 20, size=(3, 2, 5))
    cos, sin = rt.cos_sin(table, torch.as_tensor(positions), dtype=torch.float64)
    want = table.cos_sin(positions, dtype=np.float64)
    assert np.allclose(cos.numpy(), want[0], atol=1e-12) and np.allclose(sin.numpy(), want[1], atol=1e-12)
    text = rt.cos_sin(table, torch.arange(5)[None])
    assert text[0].shape == (1, 5, 128)


# ---- tiny real vision-language models --------------------------------------------------------


def tiny(kind: str, section: list[int] | None = None) -> tuple[Any, Any]:
    text: dict[str, Any] = {"vocab_size": 64, "hidden_size": 128, "intermediate_size": 64, "num_hidden_layers": 2,
                            "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 4096,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": section or [8, 12, 12]}}
    vision: dict[str, Any] = {"depth": 1, "num_heads": 2, "patch_size": 14, "spatial_merge_size": 2,
                              "temporal_patch_size": 2}
    if kind == "qwen3_vl":
        text.update(head_dim=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                  "mrope_section": section or [12, 10, 10], "mrope_interleaved": True})
        vision.update(hidden_size=32, intermediate_size=32, out_hidden_size=128, patch_size=16,
                      deepstack_visual_indexes=[0], num_position_embeddings=64)
        model_class, config_class = transformers.Qwen3VLForConditionalGeneration, transformers.Qwen3VLConfig
    elif kind == "qwen2_5_vl":
        vision.update(hidden_size=32, intermediate_size=32, out_hidden_size=128, window_size=56,
                      fullatt_block_indexes=[0])
        model_class, config_class = transformers.Qwen2_5_VLForConditionalGeneration, transformers.Qwen2_5_VLConfig
    else:
        vision.update(embed_dim=32, hidden_size=128, mlp_ratio=1)
        model_class, config_class = transformers.Qwen2VLForConditionalGeneration, transformers.Qwen2VLConfig
    config = config_class(text_config=text, vision_config=vision, image_token_id=IMAGE, video_token_id=VIDEO,
                          vision_start_token_id=START, vision_end_token_id=END)
    torch.manual_seed(0)
    return model_class(config).eval(), config


def image_inputs(config: Any) -> dict[str, Any]:
    """Text, one 8x12-patch image (its merged tokens), text again."""
    grid = torch.tensor([[1, 8, 12]])
    tokens = int(grid.prod()) // config.vision_config.spatial_merge_size ** 2
    ids = torch.cat([torch.randint(3, 50, (1, 5)), torch.tensor([[START]]), torch.full((1, tokens), IMAGE),
                     torch.tensor([[END]]), torch.randint(3, 50, (1, 9))], dim=1)
    patch, temporal = config.vision_config.patch_size, config.vision_config.temporal_patch_size
    pixels = torch.randn(int(grid.prod()), 3 * temporal * patch * patch)
    return {"input_ids": ids, "pixel_values": pixels, "image_grid_thw": grid, "mm_token_type_ids": (ids == IMAGE).long()}


def vl_logits(model: Any, inputs: dict[str, Any]) -> Any:
    with torch.no_grad():
        return model(**inputs).logits


@pytest.mark.parametrize("kind", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def test_patched_vision_language_models_give_the_stock_logits_with_an_image(kind: str) -> None:
    model, config = tiny(kind)
    inputs = image_inputs(config)
    stock = vl_logits(model, inputs)
    assert rt.patch(model) == ["model.language_model.rotary_emb"]
    torch.testing.assert_close(vl_logits(model, inputs), stock, rtol=1e-5, atol=1e-5)


def test_the_parity_test_can_fail_a_wrong_composition() -> None:
    """Swapped sections change the logits on image tokens: the parity above is not vacuous."""
    model, config = tiny("qwen2_5_vl")
    inputs = image_inputs(config)
    stock = vl_logits(model, inputs)
    rt.patch(model, tiny("qwen2_5_vl", section=[12, 12, 8])[1].text_config)
    assert float((vl_logits(model, inputs) - stock).abs().max()) > 1e-4  # 20x the parity tolerance


def test_audit_module_on_a_live_multimodal_model() -> None:
    model, config = tiny("qwen2_5_vl")
    declared = config.to_dict()
    report = rt.audit_module(model, declared)
    assert report["verdict"] == "match"
    assert report["modules"] == {"model.language_model.rotary_emb": "match"}
    rotary = model.model.language_model.rotary_emb
    rotary.mrope_section = [12, 12, 8]
    served_as = rt.audit_module(model, declared)["layers"]["full_attention"]["served_as"]
    assert served_as == "sections [12, 12, 8] where the declaration has [8, 12, 12] (sections)"
    rotary.mrope_section = [8, 12, 12]
    rotary.recomposition_frequencies = lambda freq: torch.cat((freq[0], freq[0]), dim=-1)
    served_as = rt.audit_module(model, declared)["layers"]["full_attention"]["served_as"]
    assert served_as.startswith("text positions on every column")


def test_audit_module_names_interleaved_served_for_consecutive_sections() -> None:
    model, config = tiny("qwen2_5_vl")
    qwen3, _ = tiny("qwen3_vl", section=[8, 12, 12])
    model.model.language_model.rotary_emb.recomposition_frequencies = (
        qwen3.model.language_model.rotary_emb.recomposition_frequencies)
    report = rt.audit_module(model, config.to_dict())
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == (
        "interleaved sections [8, 12, 12] where the model's code composes sections sections [8, 12, 12]")
