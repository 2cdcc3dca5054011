"""A config, read for position ids: its family and the token ids and merge sizes its rule uses.

The config is read with :func:`~ropekit.config.source.read_config`, as :func:`ropekit.load` reads
it. A key absent from the config takes its config class's default (see
:mod:`~ropekit.positions.families`); a key present must hold what the class accepts (an int, not a
bool, float or null), else :class:`~ropekit.RopeConfigError` names its JSON path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.source import read_config
from ..errors import RopeConfigError
from .families import FAMILIES, UNSUPPORTED, Family

__all__ = ["Settings", "read_settings"]

_SMALLEST = {"spatial_merge_size": 1, "temporal_merge_size": 1, "tokens_per_second": 0}
"""The smallest value each vision key may hold (a merge size of 0 divides by zero)."""


@dataclass(frozen=True)
class Settings:
    """What a family's rule reads from one config."""

    family: Family
    token_ids: Mapping[str, int]
    vision: Mapping[str, int]

    @property
    def model_type(self) -> str:
        """The config's model_type."""
        return self.family.model_type


def supported_text() -> str:
    """The supported model_types, for messages."""
    return ", ".join(sorted(FAMILIES))


def read_settings(source: Mapping[str, Any] | str | os.PathLike[str]) -> Settings:
    """The family of ``source``'s model_type and the values its rule reads, defaults filled in."""
    config, _ = read_config(source)
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        problem = "missing" if model_type is None else f"expected a string, got {type(model_type).__name__}"
        raise RopeConfigError("model_type", f"{problem}; position ids are computed for: {supported_text()}")
    family = FAMILIES.get(model_type)
    if family is None:
        why = f" ({UNSUPPORTED[model_type]}; not implemented)" if model_type in UNSUPPORTED else ""
        raise RopeConfigError("model_type", f"no multimodal position rule for model_type {model_type!r}{why}; "
                              f"supported: {supported_text()}")
    token_ids = {key: _integer(config, key, default, key) for key, default in family.token_ids.items()}
    vision_config = config.get("vision_config")
    if vision_config is None:
        vision_config = {}  # the config class builds its vision config with every default
    elif not isinstance(vision_config, Mapping):
        raise RopeConfigError("vision_config", f"expected an object, got {type(vision_config).__name__}")
    vision = {key: _integer(vision_config, key, default, f"vision_config.{key}", _SMALLEST.get(key))
              for key, default in family.vision.items()}
    return Settings(family, token_ids, vision)


def _integer(config: Mapping[str, Any], key: str, default: int, path: str, smallest: int | None = None) -> int:
    if key not in config:
        return default
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RopeConfigError(path, f"expected an integer, got {value!r}")
    if smallest is not None and value < smallest:
        raise RopeConfigError(path, f"expected an integer >= {smallest}, got {value}")
    return value
