"""The Qwen-VL rules: ``qwen2_vl``, ``qwen2_5_vl`` (video time scaled) and ``qwen3_vl`` (one run per frame).

transformers 5.24.0, ``Qwen2VLModel.get_rope_index`` and ``get_vision_position_ids``
(transformers/models/qwen2_vl/modeling_qwen2_vl.py): every grid ``(t, h, w)`` is one run of
``t * (h/m) * (w/m)`` tokens (``m = vision_config.spatial_merge_size``), temporal offsets
``0 .. t-1``. ``Qwen2_5_VLModel`` (modeling_qwen2_5_vl.py) multiplies a *video*'s temporal offsets by
``tokens_per_second * second_per_grid_ts[i]`` and truncates (``.long()``), computed in the dtype of
the tensor the processor gives (float32); without ``second_per_grid_ts`` the factor is
``tokens_per_second``. ``Qwen3VLModel`` (modeling_qwen3_vl.py) first splits every video into
``t`` grids ``(1, h, w)``: its processor writes each frame as its own run behind a timestamp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from . import arrays
from .grids import IMAGE, VIDEO, Block, Media, Timing, grid_blocks, mismatch
from .settings import Settings

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["qwen2_5_vl", "qwen2_vl", "qwen3_vl", "refuse_seconds"]


def refuse_seconds(settings: Settings, media: Media) -> None:
    """``second_per_grid_ts`` given to a rule that never reads it: refused, not ignored."""
    if media.second_per_grid_ts is not None:
        raise ArgumentError("second_per_grid_ts", f"{settings.model_type}'s get_rope_index does not read it "
                            "(only qwen2_5_vl scales video time by it); leave it None")


def qwen2_vl(settings: Settings, media: Media) -> dict[int, list[Block]]:
    """Blocks of the ``qwen2_vl`` rule (also PaddleOCR-VL's)."""
    refuse_seconds(settings, media)
    merge = settings.vision["spatial_merge_size"]
    return {IMAGE: grid_blocks(media.images, IMAGE, merge), VIDEO: grid_blocks(media.videos, VIDEO, merge)}


def qwen2_5_vl(settings: Settings, media: Media) -> dict[int, list[Block]]:
    """Blocks of the ``qwen2_5_vl`` rule: video temporal offsets scaled by seconds per grid."""
    merge = settings.vision["spatial_merge_size"]
    per_second = settings.vision["tokens_per_second"]
    count = media.videos.shape[0]
    given = media.second_per_grid_ts
    seconds = np.ones(count, dtype=np.int64) if given is None else arrays.seconds(given, count)
    for index, (t, _, _) in enumerate(media.videos.tolist()):
        if (t - 1) * per_second * float(seconds[index]) >= arrays.LARGEST:
            raise ArgumentError("second_per_grid_ts", f"second_per_grid_ts[{index}] = {seconds[index]} places "
                                f"video_grid_thw[{index}]'s last frame past 2**62")

    def timing(index: int) -> Timing:
        return _scaled(per_second, seconds[index])

    return {IMAGE: grid_blocks(media.images, IMAGE, merge), VIDEO: grid_blocks(media.videos, VIDEO, merge, 1, timing)}


def _scaled(per_second: int, second: np.generic) -> Timing:
    """Temporal offsets ``trunc(i * (tokens_per_second * second))``, in ``second``'s dtype as torch computes them."""
    if np.issubdtype(second.dtype, np.integer):
        factor = per_second * int(second)

        def exact(count: int) -> npt.NDArray[np.int64]:
            return np.arange(count, dtype=np.int64) * factor

        return exact
    dtype = np.dtype(second.dtype)
    # a Python int times a 0-d tensor, then an int64 arange times that: both computed in the tensor's dtype
    interval = np.multiply(np.asarray(per_second, dtype=dtype), np.asarray(second, dtype=dtype), dtype=dtype)

    def truncated(count: int) -> npt.NDArray[np.int64]:
        scaled: npt.NDArray[Any] = np.multiply(np.arange(count).astype(dtype), interval, dtype=dtype)
        return scaled.astype(np.int64)  # .long(): toward zero

    return truncated


def qwen3_vl(settings: Settings, media: Media) -> dict[int, list[Block]]:
    """Blocks of the ``qwen3_vl`` rule (also the GLM-4V families'): a video is one block per frame."""
    refuse_seconds(settings, media)
    merge = settings.vision["spatial_merge_size"]
    frames = sum(media.videos[:, 0].tolist())
    if frames != media.runs[VIDEO]:
        raise mismatch(VIDEO, f"{media.videos.shape[0]} video grid(s) of {frames} frame(s) in all given",
                       media.runs[VIDEO], media.source,
                       f"; {settings.model_type} gives every frame its own run (frames are separated by "
                       "timestamp text), so each video needs t runs")
    videos: list[Block] = []
    for video in grid_blocks(media.videos, VIDEO, merge):
        videos.extend(Block(f"{video.label} frame {frame}", 1, video.h, video.w, video.detail, video.timing)
                      for frame in range(video.t))
    return {IMAGE: grid_blocks(media.images, IMAGE, merge), VIDEO: videos}
