"""The ``ernie4_5_vl_moe`` rule: video frames merged in time.

transformers 5.24.0, ``Ernie4_5_VLMoeModel.get_rope_index``
(transformers/models/ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py): the ``qwen2_vl`` layout, but a
video grid ``(t, h, w)`` has ``t / vision_config.temporal_merge_size`` temporal steps (its
processor writes ``t * h * w / (m * m * temporal_merge_size)`` video tokens); images are not merged
in time.
"""

from __future__ import annotations

from .grids import IMAGE, VIDEO, Block, Media, grid_blocks
from .qwen import refuse_seconds
from .settings import Settings

__all__ = ["ernie4_5_vl_moe"]


def ernie4_5_vl_moe(settings: Settings, media: Media) -> dict[int, list[Block]]:
    """Blocks of the ``ernie4_5_vl_moe`` rule."""
    refuse_seconds(settings, media)
    merge = settings.vision["spatial_merge_size"]
    return {IMAGE: grid_blocks(media.images, IMAGE, merge),
            VIDEO: grid_blocks(media.videos, VIDEO, merge, settings.vision["temporal_merge_size"])}
