"""Layer kinds a family's code tells apart by keys of its own: a per-layer list naming each layer's kind,
and per kind, the config keys its rotary reads in place of the usual ones (``ModelFamily.layer_pattern``,
``layer_pattern_types`` and ``layer_keys``).

MiMo-V2's code (``modeling_mimo_v2.py``) builds two rotary modules: its full-attention layers rotate
at ``rope_theta`` over ``int(head_dim * partial_rotary_factor)`` channels, its sliding-window layers
(``hybrid_layer_pattern[i] == 1``) at ``swa_rope_theta`` over ``int(swa_head_dim *
partial_rotary_factor)``, each falling back to the usual key when the config leaves its own out, and
both apply the config's scaling block. Such a config is read as the per-layer-type form transformers
5 writes (``layer_types``, ``rope_parameters`` per layer type, ``per_layer_config`` for a layer's
``head_dim``), which ropekit serves like any other; every value is checked first under the key the
config states it with.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import RopeConfigError
from .view import MAX_HEAD_DIM, MAX_THETA, positive_number

if TYPE_CHECKING:
    from ..contract.family import ModelFamily

__all__ = ["per_kind_config"]

_BLOCK_KEYS = ("rope_parameters", "rope_scaling")


def per_kind_config(config: Mapping[str, Any], family: ModelFamily) -> Mapping[str, Any]:
    """``config`` with ``family``'s layer kinds written as transformers 5's per-layer-type form (unchanged
    when the family declares no ``layer_pattern`` or the config states no pattern: one kind, as its code's
    class default)."""
    key = family.layer_pattern
    if not key:
        return config
    text = config.get("text_config")
    nested = sorted(name for name in ({key} | _own_keys(family)) - {"rope_theta", "partial_rotary_factor"}
                    if isinstance(text, Mapping) and text.get(name) is not None)
    if nested:  # its code reads them where the model's config keeps them, the top level
        raise RopeConfigError(f"text_config.{nested[0]}", f"{family.model_type}'s code reads its layer kinds from the "
                              f"top level ({family.code or family.doc}); state {', '.join(nested)} there")
    pattern = config.get(key)
    if pattern is None:
        derived = [name for name in family.layer_pattern_from if config.get(name) is not None]
        if derived:
            raise RopeConfigError(derived[0], f"{family.model_type}'s code derives {key} from it when a config states "
                                  f"none ({family.code or family.doc}); ropekit does not derive it: state {key}")
        return config
    types = _layer_types(config, family, pattern)
    block = _block(config)
    rest = {name: value for name, value in config.items()
            if name not in (key, "layer_types", *_BLOCK_KEYS) and name not in _own_keys(family)}
    rope_parameters: dict[str, Any] = {}
    per_layer: dict[str, Any] = {}
    for kind in dict.fromkeys(types):
        own = family.layer_keys.get(kind, {})
        values = {name: _value(config, family, name, own.get(name)) for name in ("rope_theta", "partial_rotary_factor")}
        rope_parameters[kind] = {**block, **{name: value for name, value in values.items() if value is not None}}
        width = own.get("head_dim")
        if width is not None and config.get(width) is not None:
            head_dim = _checked(width, config[width], "head_dim")
            per_layer.update({str(index): {"head_dim": head_dim} for index, name in enumerate(types) if name == kind})
    rewritten = {**rest, "layer_types": types, "rope_parameters": rope_parameters}
    if per_layer:
        rewritten["per_layer_config"] = per_layer
    return MappingProxyType(rewritten)


def _layer_types(config: Mapping[str, Any], family: ModelFamily, pattern: Any) -> list[str]:
    key = family.layer_pattern
    if not isinstance(pattern, list) or not pattern:
        raise RopeConfigError(key, f"expected a list with one entry per layer ({family.model_type}'s code reads each "
                              f"layer's kind from it: {family.code or family.doc}), got {pattern!r}")
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and not isinstance(layers, bool) and len(pattern) != layers:
        raise RopeConfigError(key, f"lists {len(pattern)} layers, but the model has {layers}; they must agree")
    types = []
    for index, value in enumerate(pattern):
        kind = family.layer_pattern_types.get(str(value)) if isinstance(value, (int, str)) and \
            not isinstance(value, bool) else None
        if kind is None:
            valid = ", ".join(sorted(family.layer_pattern_types))
            raise RopeConfigError(f"{key}[{index}]", f"{value!r} is not a layer kind {family.model_type}'s code knows; "
                                  f"valid: {valid}")
        types.append(kind)
    return types


def _block(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's flat scaling block (its code applies it to every kind), without the keys read per kind."""
    for name in _BLOCK_KEYS:
        block = config.get(name)
        if block is None:
            continue
        if not isinstance(block, Mapping):
            raise RopeConfigError(name, f"expected an object, got {type(block).__name__}")
        return {key: value for key, value in block.items() if key not in ("rope_theta", "partial_rotary_factor")} \
            or {"rope_type": "default"}
    return {"rope_type": "default"}


def _own_keys(family: ModelFamily) -> set[str]:
    return {name for keys in family.layer_keys.values() for name in keys.values()} | {"rope_theta",
                                                                                      "partial_rotary_factor"}


def _value(config: Mapping[str, Any], family: ModelFamily, name: str, own: str | None) -> Any:
    """A kind's value of ``name``: its own key's, else the usual key's, else the scaling block's, else the family's
    default (``None``: ropekit's default)."""
    for key in (own, name):
        if key is not None and config.get(key) is not None:
            return _checked(key, config[key], name)
    for block_name in _BLOCK_KEYS:
        block = config.get(block_name)
        if isinstance(block, Mapping) and block.get(name) is not None:
            return _checked(f"{block_name}.{name}", block[name], name)
    return family.defaults.get(name)


def _checked(path: str, value: Any, name: str) -> Any:
    """``value`` once it is what ``name`` must be (a base above 1, a fraction in (0, 1], an even width), else
    an error naming the key the config states it with."""
    if name == "head_dim":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_HEAD_DIM:
            raise RopeConfigError(path, f"expected a head width in [1, {MAX_HEAD_DIM}], got {value!r}")
        return value
    if name == "rope_theta":
        positive_number(value, path, above=1.0, most=MAX_THETA)
    else:
        positive_number(value, path, above=0.0, most=1.0)
    return value
