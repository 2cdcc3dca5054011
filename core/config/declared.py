"""A config as a family declaration says its code reads it: keys its code does not read dropped (each named
in a warning), keys that must equal another checked, its own width key read as the table's head, and its
layer kinds written as transformers 5's per-layer-type form (:mod:`ropekit.config.kinds`). Each step
changes a config only where the declaration says so; :func:`as_declared` runs them in order.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import RopeConfigError
from .kinds import per_kind_config
from .view import MAX_HEAD_DIM

if TYPE_CHECKING:
    from ..contract.family import ModelFamily

__all__ = ["as_declared"]


def as_declared(config: Mapping[str, Any], family: ModelFamily) -> Mapping[str, Any]:
    """``config`` read as ``family``'s code reads it (see the module docstring)."""
    config = _with_width(_without_equal(_without_unread(config, family), family), family)
    return per_kind_config(config, family) if family.layer_pattern else config


def _without_equal(config: Mapping[str, Any], family: ModelFamily) -> Mapping[str, Any]:
    """``config`` without its family's ``equal_keys`` once each equals the key it must (else refused naming it)."""
    if not family.equal_keys:
        return config
    stated = [key for key in family.equal_keys if config.get(key) is not None]
    for key in stated:
        other = family.equal_keys[key]
        expected = config.get(other, family.defaults.get(other))
        if type(config[key]) is not type(expected) or config[key] != expected:
            raise RopeConfigError(key, f"{config[key]!r}: {family.model_type}'s code ({family.code or family.doc}) "
                                  f"computes a table ropekit serves only when it equals {other} ({expected!r}): "
                                  "another value rotates channels that no table's layout places")
    return MappingProxyType({key: value for key, value in config.items() if key not in stated}) if stated else config


def _with_width(config: Mapping[str, Any], family: ModelFamily) -> Mapping[str, Any]:
    """``config`` read with its family's rotated width (``ModelFamily.width_key``) as the table's head."""
    if not family.width_key:
        return config
    key = family.width_key
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_HEAD_DIM or value % 2:
        raise RopeConfigError(key, f"expected a positive even number of channels up to {MAX_HEAD_DIM}: "
                              f"{family.model_type}'s code rotates that many ({family.code or family.doc}), got "
                              f"{value!r}")
    replaced = ("head_dim", "partial_rotary_factor", "rotary_dim", "qk_rope_head_dim", "qk_nope_head_dim")
    for name in replaced:
        if config.get(name) is not None and name != "head_dim":
            warnings.warn(f"{name}: {family.model_type}'s code does not read it: it rotates {key} ({value}) channels, "
                          "and ropekit serves that", UserWarning, stacklevel=4)
    rest = {name: item for name, item in config.items() if name not in (key, *replaced)}
    return MappingProxyType({**rest, "head_dim": value})


def _without_unread(config: Mapping[str, Any], family: ModelFamily) -> Mapping[str, Any]:
    """``config`` without the width keys its family's code does not read (``ModelFamily.unread_keys``),
    each named in a warning: the table is what the code applies without them."""
    stated = [key for key in family.unread_keys if config.get(key) is not None]
    if not stated:
        return config
    for key in sorted(stated):
        warnings.warn(f"{key}: {family.model_type}'s code does not read it ({family.code or family.doc}); ropekit "
                      "serves what the code applies without it", UserWarning, stacklevel=4)
    return MappingProxyType({key: value for key, value in config.items() if key not in stated})
