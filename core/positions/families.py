"""Which multimodal families ropekit gives 3-axis position ids for, and what their config classes
default to.

Each family names a *rule* (how its ``get_rope_index`` lays grids out; rules are implemented in
:mod:`~ropekit.positions.qwen`, :mod:`~ropekit.positions.glm` and :mod:`~ropekit.positions.ernie`)
and a *token-type builder* (how its processor marks image and video tokens when the caller gives
no ``mm_token_type_ids``). The defaults below are copied from transformers 5.24.0's configuration
classes: a key absent from a config takes the class default, exactly as the config class does.
Every family keeps its token ids at the top level of the config (not in ``text_config``) and its
merge sizes in ``vision_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["FAMILIES", "RULES", "UNSUPPORTED", "Family", "Rule", "TokenTypes"]

Rule = Literal["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "ernie4_5_vl_moe"]
RULES: tuple[Rule, ...] = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "ernie4_5_vl_moe")
"""``qwen2_vl``: one (t, h, w) block per grid, temporal index 0..t-1. ``qwen2_5_vl``: the same,
video temporal indices scaled by ``second_per_grid_ts * tokens_per_second``. ``qwen3_vl``: videos
split into one block per frame (frames are separated by timestamp text). ``ernie4_5_vl_moe``:
video temporal indices merged by ``vision_config.temporal_merge_size``."""

TokenTypes = Literal["by_id", "images_only", "glm_video_segments"]
"""How the family's processor builds ``mm_token_type_ids``: ``by_id`` (``ProcessorMixin``:
``image_token_id`` -> 1, ``video_token_id`` -> 2), ``images_only`` (the processor knows no video
token: ``image_token_id`` -> 1), ``glm_video_segments`` (GLM-4V: ``image_token_id`` is 2 between
``video_start_token_id`` and ``video_end_token_id``, else 1)."""


@dataclass(frozen=True)
class Family:
    """One model_type: its rule, its processor's token typing, and its config classes' defaults."""

    model_type: str
    rule: Rule
    token_types: TokenTypes
    token_ids: Mapping[str, int]
    """Top-level token-id keys read, with the config class's default for each."""
    vision: Mapping[str, int]
    """``vision_config`` keys read, with the vision config class's default for each."""
    source: str
    """The transformers file the defaults come from."""


def _family(model_type: str, rule: Rule, token_types: TokenTypes, token_ids: dict[str, int],
            vision: dict[str, int], source: str) -> Family:
    return Family(model_type, rule, token_types, MappingProxyType(token_ids), MappingProxyType(vision), source)


# Token ids: transformers/models/<family>/configuration_<family>.py, the top-level config class.
QWEN2_VL_IDS = {"image_token_id": 151655, "video_token_id": 151656}  # Qwen2VLConfig, Qwen2_5_VLConfig, Qwen3VLConfig,
# Qwen3VLMoeConfig, Cosmos3OmniConfig
QWEN3_5_IDS = {"image_token_id": 248056, "video_token_id": 248057}  # Qwen3_5Config, Qwen3_5MoeConfig, Qwen4ExpConfig
GLM4V_IDS = {"image_token_id": 151343, "video_start_token_id": 151341, "video_end_token_id": 151342}  # Glm4vConfig
GLM4V_MOE_IDS = {"image_token_id": 151363, "video_start_token_id": 151341,
                 "video_end_token_id": 151342}  # Glm4vMoeConfig
GLM46V_IDS = {"image_token_id": 151343, "video_start_token_id": 151361, "video_end_token_id": 151362}  # Glm46VConfig
GLM_OCR_IDS = {"image_token_id": 59280, "video_start_token_id": 59258, "video_end_token_id": 59259}  # GlmOcrConfig
ERNIE_IDS = {"image_token_id": 100295, "video_token_id": 103367}  # Ernie4_5_VLMoeConfig
PADDLEOCR_IDS = {"image_token_id": 100295}  # PaddleOCRVLConfig (its processor marks no video token)
COSMOS3_EDGE_IDS = {"image_token_id": 19, "video_token_id": 18}  # Cosmos3EdgeConfig
COHERE_COMPASS_IDS = {"image_token_id": 255031, "video_token_id": 255032}  # CohereCompassConfig

# vision_config: the vision config class of the same file (glm46v: Glm4vVisionConfig through AutoConfig,
# configuration_glm4v.py; cosmos3_omni: Qwen3VLVisionConfig, configuration_qwen3_vl.py). Every one has
# spatial_merge_size = 2.
MERGE = {"spatial_merge_size": 2}
QWEN2_5_VL_VISION = {"spatial_merge_size": 2, "tokens_per_second": 4}  # Qwen2_5_VLVisionConfig (its docstring says 41)
ERNIE_VISION = {"spatial_merge_size": 2, "temporal_merge_size": 2}  # Ernie4_5_VLMoeVisionConfig

_PATH = "transformers/models/{0}/configuration_{0}.py"

FAMILIES: Mapping[str, Family] = MappingProxyType({
    family.model_type: family for family in (
        _family("qwen2_vl", "qwen2_vl", "by_id", QWEN2_VL_IDS, MERGE, _PATH.format("qwen2_vl")),
        _family("paddleocr_vl", "qwen2_vl", "images_only", PADDLEOCR_IDS, MERGE, _PATH.format("paddleocr_vl")),
        _family("qwen2_5_vl", "qwen2_5_vl", "by_id", QWEN2_VL_IDS, QWEN2_5_VL_VISION, _PATH.format("qwen2_5_vl")),
        _family("qwen3_vl", "qwen3_vl", "by_id", QWEN2_VL_IDS, MERGE, _PATH.format("qwen3_vl")),
        _family("qwen3_vl_moe", "qwen3_vl", "by_id", QWEN2_VL_IDS, MERGE, _PATH.format("qwen3_vl_moe")),
        _family("qwen3_5", "qwen3_vl", "by_id", QWEN3_5_IDS, MERGE, _PATH.format("qwen3_5")),
        _family("qwen3_5_moe", "qwen3_vl", "by_id", QWEN3_5_IDS, MERGE, _PATH.format("qwen3_5_moe")),
        _family("qwen4_exp", "qwen3_vl", "by_id", QWEN3_5_IDS, MERGE, _PATH.format("qwen4_exp")),
        _family("cosmos3_edge", "qwen3_vl", "by_id", COSMOS3_EDGE_IDS, MERGE, _PATH.format("cosmos3_edge")),
        _family("cosmos3_omni", "qwen3_vl", "by_id", QWEN2_VL_IDS, MERGE, _PATH.format("cosmos3_omni")),
        _family("cohere_compass", "qwen3_vl", "by_id", COHERE_COMPASS_IDS, MERGE, _PATH.format("cohere_compass")),
        _family("glm4v", "qwen3_vl", "glm_video_segments", GLM4V_IDS, MERGE, _PATH.format("glm4v")),
        _family("glm4v_moe", "qwen3_vl", "glm_video_segments", GLM4V_MOE_IDS, MERGE, _PATH.format("glm4v_moe")),
        _family("glm46v", "qwen3_vl", "glm_video_segments", GLM46V_IDS, MERGE, _PATH.format("glm46v")),
        _family("glm_ocr", "qwen3_vl", "glm_video_segments", GLM_OCR_IDS, MERGE, _PATH.format("glm_ocr")),
        _family("ernie4_5_vl_moe", "ernie4_5_vl_moe", "by_id", ERNIE_IDS, ERNIE_VISION,
                _PATH.format("ernie4_5_vl_moe")),
    )
})
"""Every supported model_type. Families sharing a rule run a ``get_rope_index`` whose code is the
same as the rule's (checked against transformers 5.24.0's source)."""

UNSUPPORTED: Mapping[str, str] = MappingProxyType({
    "glm_image": "its get_rope_index lays out image generation: source and target grids split per sample by "
                 "images_per_sample, and the positions of the grids still to generate cached on the model for "
                 "decoding",
    "hunyuan_vl": "its get_rope_index gives one axis per mrope_section entry (the last three: width, height, "
                  "image index), not (t, h, w)",
    "hy_v4_vl": "its get_rope_index ends every row of a frame with a newline token and starts each frame in a "
                "new block",
    "minicpmv4_7": "its get_rope_index lays image crops out on a canvas from target_sizes, not (t, h, w) grids",
    "qwen2_5_omni": "its get_rope_index interleaves audio with video (use_audio_in_video, audio_seqlens)",
    "qwen3_omni_moe": "its get_rope_index interleaves audio with video (use_audio_in_video, audio_seqlens)",
})
"""Every other model_type whose transformers 5.24.0 model class has a ``get_rope_index``, and why its
rule is not implemented: :func:`~ropekit.position_ids` refuses it by name with the reason."""
