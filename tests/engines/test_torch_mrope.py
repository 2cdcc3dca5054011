"""Multimodal RoPE in torch, against transformers' own classes: ropekit's rotary module, built with
its defaults, equals every multimodal rotary module of the pinned transformers at 3-axis positions,
patched tiny Qwen2-VL, Qwen2.5-VL, Qwen3-VL and GLM-Image models give the stock outputs, language
models whose class names hold "Vision", "Image" or "Audio" are patched and audited, and
``audit_module`` names a swapped, interleaved or text-only composition."""

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
                and ("TextRotary" in name or not any(word in name for word in ("Vision", "Audio", "DiT", "Image")))):
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
    ours = rt.RotaryEmbedding(case["config"])  # the defaults: the column form the class's module emits
    assert ours.layout == _stock_layout(stock, layer_type)
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


def test_the_default_layout_is_the_stock_modules_for_repeated_pairs() -> None:
    """GLM-4V, GLM-OCR and ERNIE-4.5-VL's modules repeat each pair (``gptj`` columns); a rotate-half
    default is ~2 off there."""
    layouts = {case["model_type"]: rt.RotaryEmbedding(case["config"]).layout for case in GOLDEN}
    assert {name for name, layout in layouts.items() if layout == "gptj"} == {
        "glm4v_text", "glm_ocr_text", "ernie4_5_vl_moe_text"}
    case = next(case for case in GOLDEN if case["model_type"] == "glm4v_text")
    table = ropekit.load(case["config"]).table
    assert rt.RotaryEmbedding(ropekit.load(case["config"])).layout == table.layout == "gptj"  # no class: the table's
    assert rt.RotaryEmbedding(case["config"], layout="neox").layout == "neox"
    wrapped = {"model_type": "glm4v", "text_config": case["config"]}
    assert rt.RotaryEmbedding(wrapped).layout == "gptj"
    assert rt.RotaryEmbedding(transformers.Glm4vTextConfig(**{
        key: value for key, value in case["config"].items() if key != "model_type"})).layout == "gptj"


def test_empty_multimodal_positions_give_empty_rows() -> None:
    case = next(case for case in GOLDEN if case["model_type"] == "qwen2_5_vl_text")
    table = ropekit.load(case["config"]).table
    module = rt.RotaryEmbedding(case["config"])
    x = torch.zeros(1, dtype=torch.float32)
    empty = torch.zeros((3, 2, 0), dtype=torch.int64)
    assert tuple(rt.cos_sin(table, empty)[0].shape) == tuple(module(x, empty)[0].shape) == (2, 0, 128)


def test_position_ids_with_another_number_of_rows_are_refused() -> None:
    """GLM-Image's text model takes 4-row ids and hands its rotary module rows 1..3; 4 rows given to
    the module are not text positions."""
    case = next(case for case in GOLDEN if case["model_type"] == "glm_image_text")
    module = rt.RotaryEmbedding(case["config"])
    with pytest.raises(ropekit.ArgumentError, match=r"position_ids: expected \(3, batch, seq\).*got shape \(4, 1, 5\)"):
        module(torch.zeros(1), torch.zeros((4, 1, 5), dtype=torch.int64))


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


@pytest.mark.parametrize("kind", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def test_audit_module_checks_the_models_own_position_ids(kind: str) -> None:
    model, config = tiny(kind)
    report = rt.audit_module(model, config.to_dict())
    checked = report["position_ids"]
    assert (report["verdict"], checked["verdict"]) == ("match", "match")
    # the image's 8 merged tokens (a 1 x 4 x 8 patch grid, merge 2: 2 rows of 4) after 3 text tokens
    assert checked["expected"][1][3:11] == [3, 3, 3, 3, 4, 4, 4, 4]
    assert checked["expected"][2][3:11] == [3, 4, 5, 6, 3, 4, 5, 6]


def test_text_positions_on_media_tokens_from_get_rope_index_are_a_mismatch() -> None:
    """A model whose get_rope_index lays an image out as text: the table is right, the positions are not."""
    model, config = tiny("qwen2_5_vl")
    stock = model.model.get_rope_index

    def as_text(input_ids: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        positions = torch.arange(input_ids.shape[1]).expand(3, *input_ids.shape)
        return positions, torch.zeros(input_ids.shape[0], 1, dtype=torch.long)

    model.model.get_rope_index = as_text
    report = rt.audit_module(model, config.to_dict())
    assert report["verdict"] == "mismatch" and report["modules"] == {"model.language_model.rotary_emb": "match"}
    assert report["position_ids"]["served_as"] == (
        "Qwen2_5_VLModel.get_rope_index gives the image's tokens text positions (the same on every axis): their "
        "height and width positions are not applied")

    def swapped(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        positions, deltas = stock(*args, **kwargs)
        return positions[[0, 2, 1]], deltas

    model.model.get_rope_index = swapped
    assert rt.audit_position_ids(model, config.to_dict())["served_as"] == (
        "Qwen2_5_VLModel.get_rope_index swaps the image's height and width positions")


def test_a_text_model_has_no_position_ids_to_check() -> None:
    model, config = tiny("qwen2_5_vl")
    assert rt.audit_position_ids(model.model.language_model, config.to_dict()) == {
        "verdict": "not_applicable", "served_as": "the model has no get_rope_index"}


def test_audit_module_names_interleaved_served_for_consecutive_sections() -> None:
    model, config = tiny("qwen2_5_vl")
    qwen3, _ = tiny("qwen3_vl", section=[8, 12, 12])
    model.model.language_model.rotary_emb.recomposition_frequencies = (
        qwen3.model.language_model.rotary_emb.recomposition_frequencies)
    report = rt.audit_module(model, config.to_dict())
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == (
        "interleaved sections [8, 12, 12] where the model's code composes sections [8, 12, 12]")


# ---- language models whose class names hold an encoder word -----------------------------------


def tiny_glm_image(section: list[int] | None = None) -> tuple[Any, Any]:
    config = transformers.GlmImageTextConfig(
        vocab_size=64, hidden_size=128, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=4096, pad_token_id=0, eos_token_id=1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                         "mrope_section": section or [4, 6, 6]})
    torch.manual_seed(0)
    return transformers.GlmImageTextModel(config).eval(), config


def test_patched_glm_image_text_model_gives_the_stock_outputs() -> None:
    """GLM-Image's language model (``GlmImageTextRotaryEmbedding``): 3-axis ids, and the 4-row ids
    its text model takes (row 0 text positions for the mask, rows 1..3 to the rotary module)."""
    model, config = tiny_glm_image()
    ids = torch.randint(2, 60, (2, 10))
    grid = torch.randint(0, 40, (3, 2, 10))
    four = torch.cat([torch.arange(10).expand(1, 2, 10), grid])
    with torch.no_grad():
        stock = [model(input_ids=ids, position_ids=where).last_hidden_state for where in (grid, four)]
    assert rt.audit_module(model, config.to_dict())["verdict"] == "match"
    assert rt.patch(model) == ["rotary_emb"]
    for where, want in zip((grid, four), stock, strict=True):
        with torch.no_grad():
            got = model(input_ids=ids, position_ids=where).last_hidden_state
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    model, _ = tiny_glm_image()
    rt.patch(model, tiny_glm_image(section=[6, 6, 4])[1])
    with torch.no_grad():
        swapped = model(input_ids=ids, position_ids=grid).last_hidden_state
    assert float((swapped - stock[0]).abs().max()) > 1e-4  # the parity above can fail


def test_audit_names_swapped_sections_on_glm_image() -> None:
    model, config = tiny_glm_image()
    model.rotary_emb.mrope_section = [6, 6, 4]
    served_as = rt.audit_module(model, config.to_dict())["layers"]["full_attention"]["served_as"]
    assert served_as == "sections [6, 6, 4] where the declaration has [4, 6, 6] (sections)"


def _granite4_vision_text() -> tuple[Any, Any]:
    config = transformers.Granite4VisionTextConfig(vocab_size=64, hidden_size=128, intermediate_size=64,
                                                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
    return transformers.Granite4VisionTextModel(config).eval(), config


def _higgs_audio_v2() -> tuple[Any, Any]:
    config = transformers.HiggsAudioV2Config(vocab_size=64, hidden_size=128, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, num_key_value_heads=1, head_dim=64, pad_token_id=0,
                                             audio_num_codebooks=2, audio_codebook_size=16)
    return transformers.HiggsAudioV2Model(config).eval(), config


@pytest.mark.parametrize("build", [_granite4_vision_text, _higgs_audio_v2], ids=["granite4_vision_text", "higgs_audio_v2"])
def test_a_language_models_rotary_is_served_whatever_its_family_name(build: Any) -> None:
    """``Granite4VisionTextRotaryEmbedding`` and ``HiggsAudioV2RotaryEmbedding`` are language models'
    rotaries, not encoders': audited (``match``, not ``no_table``) and patched to the stock outputs."""
    model, config = build()
    assert rt.audit_module(model, config.to_dict())["modules"] == {"rotary_emb": "match"}
    ids = torch.randint(2, 60, (2, 9))
    with torch.no_grad():
        stock = model(input_ids=ids).last_hidden_state
    assert rt.patch(model) == ["rotary_emb"]
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).last_hidden_state, stock, rtol=1e-5, atol=1e-5)


def test_encoder_rotaries_are_left_out_by_config_path_or_name() -> None:
    """A Qwen2-VL vision tower's rotary is the encoder's by its config (``vision_config``), its path
    (``model.visual``) and its name; a ``text_config`` module or a ``...TextRotaryEmbedding`` is the
    language model's whatever its family name."""
    from ropekit.engines.torch import _is_encoder_rotary

    model, _ = tiny("qwen2_vl")
    vision = model.model.visual.rotary_pos_emb
    assert _is_encoder_rotary("model.visual.rotary_pos_emb", vision)
    assert _is_encoder_rotary("rotary_pos_emb", vision)  # a vision tower patched on its own
    text_model, _ = tiny_glm_image()
    assert not _is_encoder_rotary("model.language_model.rotary_emb", text_model.rotary_emb)
    assert _is_encoder_rotary("model.vision_tower.rotary_emb", _higgs_audio_v2()[0].rotary_emb)  # by its path
