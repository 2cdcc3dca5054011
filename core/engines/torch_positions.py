"""A live multimodal model's own position ids against the family's rule.

A vision-language model's table can be right while the positions it is indexed with are wrong: a
``get_rope_index`` that gives an image's patches text positions (the same on all three axes), or
swaps its height and width. :func:`audit_position_ids` runs the model's own ``get_rope_index`` on
a small prompt (text, one image of a non-square grid, text) and compares it with
:func:`ropekit.position_ids` for the same input; :func:`ropekit.engines.torch.audit_module` adds
the result as ``position_ids`` to its document.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..config.source import read_config
from ..errors import RopekitError

__all__ = ["audit_position_ids", "rope_index_owner"]

_TEXT_BEFORE, _TEXT_AFTER = 3, 4


def rope_index_owner(model: Any) -> Any:
    """The module of ``model`` that defines ``get_rope_index`` (the model itself or a submodule,
    such as ``Qwen2_5_VLForConditionalGeneration.model``), or ``None``."""
    if callable(getattr(model, "get_rope_index", None)):
        return model
    modules = getattr(model, "named_modules", None)
    if modules is None:
        return None
    for _, module in modules():
        if callable(getattr(module, "get_rope_index", None)):
            return module
    return None


def _text_token(reserved: set[int]) -> int:
    return next(token for token in range(10, 10 + len(reserved) + 1) if token not in reserved)


def audit_position_ids(model: Any, config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """Run ``model``'s own ``get_rope_index`` on text, one image of ``(1, 2m, 4m)`` patches (``m``
    the config's ``spatial_merge_size``) and text again, and compare with
    :func:`ropekit.position_ids` on the same tokens.

    Returns ``{"verdict", "served_as", "input", "expected", "served"}``: ``match``, ``mismatch``
    (``served_as`` says how: text positions on every axis, height and width swapped, or the first
    token that differs), ``not_applicable`` (no ``get_rope_index``), or ``refused`` (ropekit has no
    rule for the family; ``served_as`` says why).
    """
    import torch

    from ..positions import position_ids
    from ..positions.settings import read_settings
    from ..positions.token_types import build_token_types

    owner = rope_index_owner(model)
    if owner is None:
        return {"verdict": "not_applicable", "served_as": "the model has no get_rope_index"}
    mapping, _ = read_config(config)
    try:
        settings = read_settings(mapping)
    except RopekitError as error:
        return {"verdict": "refused", "served_as": str(error)}
    merge = int(settings.vision.get("spatial_merge_size", 1))
    grid = [1, 2 * merge, 4 * merge]
    image = settings.token_ids["image_token_id"]
    text = _text_token(set(settings.token_ids.values()))
    ids = np.array([[text] * _TEXT_BEFORE + [image] * 8 + [text] * _TEXT_AFTER], dtype=np.int64)
    expected, _ = position_ids(mapping, ids, image_grid_thw=[grid])
    types, _ = build_token_types(settings, ids)
    offered = {"input_ids": torch.from_numpy(ids), "mm_token_type_ids": torch.from_numpy(types),
               "image_grid_thw": torch.tensor([grid]), "attention_mask": torch.ones(ids.shape, dtype=torch.long)}
    accepted = inspect.signature(owner.get_rope_index).parameters
    anything = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in accepted.values())
    arguments = {name: value for name, value in offered.items() if anything or name in accepted}
    with torch.no_grad():
        served_ids = owner.get_rope_index(**arguments)[0]
    served = np.asarray(served_ids.detach().cpu().numpy(), dtype=np.int64)
    document: dict[str, Any] = {"verdict": "match", "served_as": "",
                                "input": {"input_ids": ids.tolist(), "image_grid_thw": [grid]},
                                "expected": expected[:, 0].tolist(), "served": served[:, 0].tolist()
                                if served.ndim == 3 else served.tolist()}
    if served.shape == expected.shape and np.array_equal(served, expected):
        return document
    document["verdict"] = "mismatch"
    document["served_as"] = _describe(served, expected, type(owner).__name__)
    return document


def _describe(served: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], owner: str) -> str:
    where = f"{owner}.get_rope_index"
    if served.shape != expected.shape:
        return f"{where} returns position ids of shape {tuple(served.shape)}, the family's rule {tuple(expected.shape)}"
    image = slice(_TEXT_BEFORE, _TEXT_BEFORE + 8)
    if np.array_equal(served[0], served[1]) and np.array_equal(served[1], served[2]):
        return (f"{where} gives the image's tokens text positions (the same on every axis): their height and width "
                "positions are not applied")
    swapped = expected[:, :, image][[0, 2, 1]]
    if np.array_equal(served[:, :, image], swapped):
        return f"{where} swaps the image's height and width positions"
    token = int(np.argwhere(np.any(served != expected, axis=(0, 1)))[0, 0])
    return (f"{where} gives token {token} positions (t, h, w) = {tuple(int(v) for v in served[:, 0, token])}, the "
            f"family's rule {tuple(int(v) for v in expected[:, 0, token])}")
