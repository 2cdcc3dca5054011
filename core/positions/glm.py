"""GLM-4V's families (glm4v, glm4v_moe, glm46v, glm_ocr): one image token for images and video frames.

Their ``get_rope_index`` is the ``qwen3_vl`` rule (:mod:`ropekit.positions.qwen`: each video frame
is its own run, frames separated by ``<|end_of_image|>`` and timestamp text). What differs is
the processor: video frames are written with ``image_token_id`` too, so
``Glm4vProcessor.create_mm_token_type_ids`` (transformers/models/glm4v/processing_glm4v.py, the same
in glm46v) types an image token as video (2) when more ``video_start_token_id`` than
``video_end_token_id`` precede it in its row, else as image (1). ``video_token_id`` itself is text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["video_segment_types"]


def video_segment_types(
    input_ids: npt.NDArray[Any], image_token_id: int, video_start_token_id: int, video_end_token_id: int
) -> tuple[npt.NDArray[np.int64], str]:
    """Token types of ``(batch, seq)`` ``input_ids`` as GLM-4V's processor builds them, and a description."""
    starts = np.cumsum(input_ids == video_start_token_id, axis=1)
    ends = np.cumsum(input_ids == video_end_token_id, axis=1)
    in_video = starts > ends
    image = input_ids == image_token_id
    types = np.zeros(input_ids.shape, dtype=np.int64)
    types[image & in_video] = 2
    types[image & ~in_video] = 1
    return types, (f"input_ids (image_token_id {image_token_id} read as video between video_start_token_id "
                   f"{video_start_token_id} and video_end_token_id {video_end_token_id}, else as image)")
