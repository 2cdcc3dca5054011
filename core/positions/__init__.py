"""Multimodal (3-axis, "mrope") position ids, equal to transformers' ``get_rope_index``.

:func:`position_ids` reads a config as :func:`ropekit.load` does, picks the family's rule
(:data:`SUPPORTED`: model_type -> rule) and lays ``input_ids`` out in numpy: text tokens advance
one position on all three axes, each image or video grid becomes a (temporal, height, width) block.
The result equals transformers 5.24.0's ``get_rope_index`` for the same inputs. Modules:
:mod:`~ropekit.positions.families` (the table and the config classes' defaults),
:mod:`~ropekit.positions.settings` (reading a config), :mod:`~ropekit.positions.arrays` (checking
arguments), :mod:`~ropekit.positions.token_types` (token types as processors build them),
:mod:`~ropekit.positions.grids` (the shared layout), and one module per rule family:
:mod:`~ropekit.positions.qwen`, :mod:`~ropekit.positions.glm`, :mod:`~ropekit.positions.ernie`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentTypeError
from . import arrays
from .ernie import ernie4_5_vl_moe
from .families import FAMILIES, UNSUPPORTED, Rule
from .grids import Block, Media, assemble, count_runs, row_runs
from .qwen import qwen2_5_vl, qwen2_vl, qwen3_vl
from .settings import Settings, read_settings
from .token_types import build_token_types

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["EXTRAS", "SUPPORTED", "UNSUPPORTED", "position_ids"]

SUPPORTED: Mapping[str, Rule] = MappingProxyType({name: family.rule for name, family in sorted(FAMILIES.items())})
"""Every model_type :func:`position_ids` serves, and the rule its ``get_rope_index`` follows."""

EXTRAS: Mapping[str, tuple[str, ...]] = MappingProxyType(dict.fromkeys(SUPPORTED, ()))
"""Family-specific keywords each model_type accepts (none of the supported families has any)."""

_LAYOUTS: Mapping[Rule, Callable[[Settings, Media], dict[int, list[Block]]]] = MappingProxyType({
    "qwen2_vl": qwen2_vl,
    "qwen2_5_vl": qwen2_5_vl,
    "qwen3_vl": qwen3_vl,
    "ernie4_5_vl_moe": ernie4_5_vl_moe,
})


def position_ids(
    config: Mapping[str, Any] | str | os.PathLike[str],
    input_ids: Any,
    *,
    image_grid_thw: Any = None,
    video_grid_thw: Any = None,
    second_per_grid_ts: Any = None,
    attention_mask: Any = None,
    mm_token_type_ids: Any = None,
    **family_extras: Any,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(position_ids, deltas)`` for a multimodal model: int64 of shapes ``(3, batch, seq)`` and
    ``(batch, 1)``, equal to transformers 5.24.0's ``get_rope_index`` for the config's model_type.

    ``config``: anything :func:`ropekit.load` accepts (a mapping, a ``config.json`` path, a model
    directory); absent keys take the config class's default. ``input_ids``: ``(batch, seq)``
    integers, padded rows with ``attention_mask`` (masked tokens are left out and get position 0).
    ``image_grid_thw`` / ``video_grid_thw``: ``(n, 3)`` grids, one per run of image / video tokens,
    in order across the batch. ``second_per_grid_ts``: one duration per video (``qwen2_5_vl`` only;
    a list is read as float32, as the processor's tensor; an array keeps its dtype).
    ``mm_token_type_ids``: 0/1/2 per token as the processor returns it; when ``None`` it is built
    from the config's token ids the way the family's processor builds it.

    Raises :class:`~ropekit.RopeConfigError` for a model_type without a rule (the message lists
    :data:`SUPPORTED`) or an invalid config value, :class:`~ropekit.ArgumentError` /
    :class:`~ropekit.ArgumentTypeError` naming the argument for wrong shapes, dtypes, grids that do
    not match the runs of media tokens, and unknown keywords.
    """
    settings = read_settings(config)
    accepted = EXTRAS[settings.model_type]
    for name in family_extras:
        if name not in accepted:
            raise ArgumentTypeError(name, f"unknown keyword for model_type {settings.model_type!r}; its "
                                    f"family-specific keywords: {', '.join(accepted) or 'none'}")
    ids = arrays.input_ids(input_ids)
    kept = arrays.mask(attention_mask, ids.shape)
    if mm_token_type_ids is None:
        types, source = build_token_types(settings, ids)
    else:
        types, source = arrays.token_types(mm_token_type_ids, ids.shape), "mm_token_type_ids"
    rows = row_runs(types, kept)
    media = Media(arrays.grid(image_grid_thw, "image_grid_thw"), arrays.grid(video_grid_thw, "video_grid_thw"),
                  second_per_grid_ts, count_runs(rows), source)
    blocks = _LAYOUTS[settings.family.rule](settings, media)
    return assemble(rows, kept, blocks, source)
