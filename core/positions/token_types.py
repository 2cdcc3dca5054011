"""``mm_token_type_ids`` built from ``input_ids`` the way the family's processor builds them, for a
caller that has none (0: text, 1: image, 2: video).

``ProcessorMixin.create_mm_token_type_ids`` (transformers/processing_utils.py) marks
``image_token_id`` as 1, then ``video_token_id`` as 2; a processor with no video token (PaddleOCR-VL)
marks only images; GLM-4V's processors mark their shared image token by video segment
(:func:`ropekit.positions.glm.video_segment_types`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .glm import video_segment_types
from .settings import Settings

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["build_token_types"]


def build_token_types(settings: Settings, input_ids: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], str]:
    """The token types of ``input_ids`` and a description of how they were found, for messages."""
    ids = settings.token_ids
    if settings.family.token_types == "glm_video_segments":
        return video_segment_types(input_ids, ids["image_token_id"], ids["video_start_token_id"],
                                   ids["video_end_token_id"])
    types = np.zeros(input_ids.shape, dtype=np.int64)
    types[input_ids == ids["image_token_id"]] = 1
    described = f"input_ids (image_token_id {ids['image_token_id']} read as image"
    if settings.family.token_types == "by_id":
        types[input_ids == ids["video_token_id"]] = 2
        described += f", video_token_id {ids['video_token_id']} as video"
    else:
        described += f"; {settings.model_type}'s processor marks no video token"
    return types, described + ")"
