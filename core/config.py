"""Reading a ``config.json`` into one rope block per layer type, with its geometry and JSON paths.

This module knows the config shapes found in the wild (transformers v4 ``rope_scaling``, v5
``rope_parameters``, per-layer-type nesting, Gemma-3's ``rope_local_base_freq``, multimodal
``text_config``, GPT-NeoX and DeepSeek geometry keys). It knows nothing of any rope_type: the
scheme a block names validates the block's own keys.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .errors import ConfigSourceError, RopeConfigError
from .scheme import Geometry
from .validation import LOADER_KEYS

__all__ = ["ConfigView", "ParsedConfig", "RopeBlock", "parse_config", "read_config"]

DEFAULT_THETA = 10_000.0
"""transformers' ``default_theta``: the base used when a config declares none anywhere."""

FLAT_LAYER_TYPE = "full_attention"


class ConfigView(Mapping[str, Any]):
    """The model's language config: ``text_config`` (if any) layered over the top level.

    A key whose value is ``null`` counts as absent. :meth:`path` says where a key was found.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        text = config.get("text_config")
        if text is not None and not isinstance(text, Mapping):
            raise RopeConfigError("text_config", f"expected an object, got {type(text).__name__}")
        self._layers: list[tuple[str, Mapping[str, Any]]] = [("text_config.", text)] if text else []
        self._layers.append(("", config))

    def _find(self, name: str) -> tuple[str, Any] | None:
        for prefix, layer in self._layers:
            if layer.get(name) is not None:
                return prefix, layer[name]
        return None

    def __getitem__(self, name: str) -> Any:
        found = self._find(name)
        if found is None:
            raise KeyError(name)
        return found[1]

    def __iter__(self) -> Iterator[str]:
        seen = {name for _, layer in self._layers for name in layer}
        return iter(sorted(name for name in seen if self._find(name) is not None))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def path(self, name: str) -> str:
        """The JSON path of ``name`` (``text_config.name`` when it came from there)."""
        found = self._find(name)
        prefix = found[0] if found is not None else self._layers[0][0]
        return prefix + name


@attrs.frozen
class RopeBlock:
    """The rope parameters of one layer type, before its scheme validates them."""

    layer_type: str
    rope_type: str
    rope_type_path: str
    path: str
    values: Mapping[str, Any]
    geometry: Geometry
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False


@attrs.frozen
class ParsedConfig:
    """Every layer type's block, the per-layer layer types (empty when unknown), and the view."""

    blocks: tuple[RopeBlock, ...]
    layer_types: tuple[str, ...]
    view: ConfigView


def read_config(source: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[Mapping[str, Any], str]:
    """The config mapping and a description of where it came from.

    ``source`` is a mapping (used as is, never mutated), a path to a JSON file, or a model
    directory holding ``config.json``.
    """
    if isinstance(source, Mapping):
        return source, "<mapping>"
    path = os.fspath(source)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ConfigSourceError("", f"{path}: no such file (give a config.json or a model directory)") from None
    except OSError as error:
        raise ConfigSourceError("", f"{path}: cannot read: {error.strerror or error}") from None
    try:
        config = json.loads(text)  # NaN/Infinity load as floats; validation names the key holding them
    except ValueError as error:
        raise ConfigSourceError("", f"{path}: not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ConfigSourceError("", f"{path}: expected a JSON object, got {type(config).__name__}")
    return config, path


def parse_config(config: Mapping[str, Any]) -> ParsedConfig:
    """Split ``config`` into one :class:`RopeBlock` per layer type."""
    view = ConfigView(config)
    source_path, source = _rope_source(view)
    nested = _is_nested(source)
    if nested:
        raw_blocks = {name: (f"{source_path}.{name}", value) for name, value in source.items()}
    elif view.get("rope_local_base_freq") is not None:  # Gemma-3 as transformers v4 wrote it
        raw_blocks = {
            FLAT_LAYER_TYPE: (source_path, source),
            "sliding_attention": ("", {}),
        }
    else:
        raw_blocks = {FLAT_LAYER_TYPE: (source_path, source)}

    blocks = tuple(_block(view, name, path, value) for name, (path, value) in raw_blocks.items())
    layer_types = _layer_types(view, nested or len(blocks) > 1)
    return ParsedConfig(blocks, layer_types, view)


def _rope_source(view: ConfigView) -> tuple[str, Mapping[str, Any]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for name in ("rope_parameters", "rope_scaling"):
        value = view.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise RopeConfigError(view.path(name), f"expected an object or null, got {value!r}")
        if value:
            found.append((view.path(name), value))
    if not found:
        return view.path("rope_parameters") if "rope_parameters" in view else view.path("rope_scaling"), {}
    if len(found) == 2:
        (new_path, new), (old_path, old) = found
        clashes = sorted(k for k in old if k in new and new[k] != old[k] and k not in ("type", "rope_type"))
        if clashes or _declared_type(new) != _declared_type(old):
            raise RopeConfigError(
                old_path,
                f"conflicts with {new_path} (differing keys: {clashes or ['rope_type']}); "
                "a config should carry one of them",
            )
        merged = {**old, **new}
        return new_path, merged
    return found[0]


def _declared_type(block: Mapping[str, Any]) -> object:
    return block.get("rope_type", block.get("type"))


def _is_nested(source: Mapping[str, Any]) -> bool:
    return bool(source) and not (LOADER_KEYS & set(source)) and all(
        isinstance(v, Mapping) or v is None for v in source.values()
    )


def _block(view: ConfigView, layer_type: str, path: str, block: Any) -> RopeBlock:
    if not isinstance(block, Mapping):
        if block is None:
            raise RopeConfigError(path, "null: ropekit serves no NoPE layer types yet")
        raise RopeConfigError(path, f"expected an object, got {block!r}")
    rope_type, rope_type_path = _rope_type(block, path)
    theta = _theta(view, layer_type, block, path)
    head_dim, factor = _head_dim_and_factor(view, layer_type, block, path)
    geometry = Geometry(
        head_dim=head_dim,
        theta=theta,
        partial_rotary_factor=factor,
        max_position_embeddings=_positive_int(view, "max_position_embeddings"),
    )
    section = block.get("mrope_section")
    interleaved = _mrope_interleaved(block, path)
    return RopeBlock(
        layer_type,
        rope_type,
        rope_type_path,
        path,
        block,
        geometry,
        _mrope_section(section, f"{path}.mrope_section"),
        bool(interleaved),
    )


def _rope_type(block: Mapping[str, Any], path: str) -> tuple[str, str]:
    new, old = block.get("rope_type"), block.get("type")
    for name, value in (("rope_type", new), ("type", old)):
        if value is not None and not isinstance(value, str):
            raise RopeConfigError(f"{path}.{name}", f"expected a string naming a rope_type, got {value!r}")
    if new is not None and old is not None and new != old:
        raise RopeConfigError(f"{path}.type", f"conflicts with rope_type ({old!r} vs {new!r}); keep one")
    if new is not None:
        return new, f"{path}.rope_type"
    if old is not None:
        return old, f"{path}.type"
    scaling_keys = sorted(set(block) - LOADER_KEYS)
    if scaling_keys:
        raise RopeConfigError(
            f"{path}.rope_type",
            f"missing: the block declares {scaling_keys} but no rope_type; ropekit does not guess a scheme "
            "from which keys are present (add \"rope_type\")",
        )
    return "default", f"{path}.rope_type"


def _theta(view: ConfigView, layer_type: str, block: Mapping[str, Any], path: str) -> float:
    candidates = [(f"{path}.rope_theta", block.get("rope_theta"))]
    if layer_type == "sliding_attention" and not path:
        candidates.append((view.path("rope_local_base_freq"), view.get("rope_local_base_freq")))
    for name in ("rope_theta", "rotary_emb_base"):
        candidates.append((view.path(name), view.get(name)))
    for where, value in candidates:
        if value is not None:
            return _positive_number(value, where)
    return DEFAULT_THETA


def _partial_rotary_factor(view: ConfigView, block: Mapping[str, Any], path: str) -> tuple[float, str | None]:
    """The factor and where it was declared (``None``: not declared, 1.0)."""
    candidates = [(f"{path}.partial_rotary_factor", block.get("partial_rotary_factor"))]
    for name in ("partial_rotary_factor", "rotary_pct"):
        candidates.append((view.path(name), view.get(name)))
    for where, value in candidates:
        if value is not None:
            factor = _positive_number(value, where)
            if factor > 1:
                raise RopeConfigError(where, f"must be in (0, 1], got {value!r}")
            return factor, where
    return 1.0, None


def _head_dim_and_factor(
    view: ConfigView, layer_type: str, block: Mapping[str, Any], path: str
) -> tuple[int, float]:
    """``(head_dim, partial_rotary_factor)`` for one layer type.

    MLA models (DeepSeek, Mistral-4) rotate ``qk_rope_head_dim`` channels. DeepSeek states no
    partial_rotary_factor: the rotated head is ``qk_rope_head_dim``. Mistral-4 states one over the
    whole head (``qk_nope_head_dim + qk_rope_head_dim``); it must then give ``qk_rope_head_dim``.
    """
    factor, factor_path = _partial_rotary_factor(view, block, path)
    if view.get("qk_rope_head_dim") is None:
        return _bounded(view, "head_dim", _raw_head_dim(view, layer_type)), factor
    rope = _bounded(view, "qk_rope_head_dim", _required_int(view, "qk_rope_head_dim"))
    if factor_path is None:
        return rope, 1.0
    nope = _positive_int(view, "qk_nope_head_dim")
    whole = _positive_int(view, "head_dim") or (nope + rope if nope is not None else rope)
    whole = _bounded(view, "head_dim", whole)
    if int(whole * factor) != rope:
        raise RopeConfigError(
            factor_path,
            f"int(head_dim {whole} * {factor}) = {int(whole * factor)} rotated channels, but qk_rope_head_dim "
            f"is {rope}; they must agree",
        )
    return whole, factor


def _bounded(view: ConfigView, name: str, value: int) -> int:
    if value > MAX_HEAD_DIM:
        raise RopeConfigError(view.path(name), f"head dim {value} exceeds {MAX_HEAD_DIM}; is the config right?")
    return value


def _raw_head_dim(view: ConfigView, layer_type: str) -> int:
    if layer_type == FLAT_LAYER_TYPE and view.get("global_head_dim") is not None:  # Gemma-4 global layers
        return _required_int(view, "global_head_dim")
    if view.get("head_dim") is not None:
        return _required_int(view, "head_dim")
    hidden = _positive_int(view, "hidden_size")
    heads = _positive_int(view, "num_attention_heads")
    if hidden is None or heads is None:
        raise RopeConfigError(
            view.path("head_dim"), "missing: declare head_dim, or hidden_size and num_attention_heads"
        )
    return hidden // heads


MAX_HEAD_DIM = 1 << 16
"""Larger head dims are refused as config errors (they would only allocate absurd tables)."""
MAX_LAYERS = 1 << 16
"""Likewise for ``num_hidden_layers`` (ropekit lists one layer type per layer)."""


def _required_int(view: ConfigView, name: str) -> int:
    value = _positive_int(view, name)
    if value is None:
        raise RopeConfigError(view.path(name), "missing")
    return value


def _positive_int(view: ConfigView, name: str) -> int | None:
    value = view.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise RopeConfigError(view.path(name), f"expected a positive integer, got {value!r}")
    return value


MAX_THETA = 1e30
"""Larger bases are refused: real models use up to ~1e9, and past this tables underflow."""


def _positive_number(value: object, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise RopeConfigError(where, f"expected a number, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise RopeConfigError(where, f"must be a finite number > 0, got {value!r}")
    if number > MAX_THETA:
        raise RopeConfigError(where, f"must be <= {MAX_THETA:g}, got {value!r}")
    return number


def _mrope_interleaved(block: Mapping[str, Any], path: str) -> bool:
    """``mrope_interleaved`` (Qwen3-VL), or its synonym ``interleaved`` (Qwen3-Omni); they must agree."""
    found = {}
    for name in ("mrope_interleaved", "interleaved"):
        value = block.get(name)
        if value is not None:
            if not isinstance(value, bool):
                raise RopeConfigError(f"{path}.{name}", f"expected true or false, got {value!r}")
            found[name] = value
    if len(set(found.values())) > 1:
        raise RopeConfigError(f"{path}.interleaved", f"conflicts with mrope_interleaved ({found}); keep one")
    return any(found.values())


def _mrope_section(value: object, path: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value:
        raise RopeConfigError(path, f"expected a non-empty list of positive integers, got {value!r}")
    for index, item in enumerate(value):
        if not isinstance(item, int) or isinstance(item, bool) or item <= 0:
            raise RopeConfigError(f"{path}[{index}]", f"expected a positive integer, got {item!r}")
    return tuple(value)


def _layer_types(view: ConfigView, per_type: bool) -> tuple[str, ...]:
    declared = view.get("layer_types")
    layers = _positive_int(view, "num_hidden_layers")
    if layers is not None and layers > MAX_LAYERS:
        problem = f"{layers} layers exceeds {MAX_LAYERS}; is the config right?"
        raise RopeConfigError(view.path("num_hidden_layers"), problem)
    if declared is None and not per_type:
        return (FLAT_LAYER_TYPE,) * (layers or 0)
    if declared is None:
        pattern = view.get("sliding_window_pattern", 6 if "rope_local_base_freq" in view else None)
        if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern <= 0 or layers is None:
            return ()
        return tuple("sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers))
    if not isinstance(declared, list) or not all(isinstance(t, str) for t in declared):
        raise RopeConfigError(view.path("layer_types"), "expected a list of layer type names")
    return tuple(declared)
