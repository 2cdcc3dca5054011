"""Reading a ``config.json`` into one rope block per layer type, with its geometry and JSON paths.

This module knows the config shapes found in the wild (transformers v4 ``rope_scaling``, v5
``rope_parameters``, per-layer-type nesting, Gemma-3's ``rope_local_base_freq``, multimodal
``text_config``, GPT-NeoX and DeepSeek geometry keys). It knows nothing of any rope_type.

It is the one owner of "where a value comes from": each :class:`RopeBlock` carries the JSON path
of every geometry value it resolved, :meth:`RopeBlock.lookup` reads a scheme key (with its
top-level fallback) and :meth:`RopeBlock.where` names the path of any key a scheme blames, so an
error always points at the key where it really is.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .errors import ConfigSourceError, RopeConfigError
from .scheme import RESERVED_KEYS, Geometry, Key

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


GEOMETRY_KEYS = ("rope_theta", "head_dim", "partial_rotary_factor", "max_position_embeddings")
"""The geometry values a block resolves, by the name a scheme's ``check`` may blame them under."""


@attrs.frozen
class RopeBlock:
    """The rope parameters of one layer type, before its scheme validates them.

    ``values`` is the block as written; ``geometry`` what the loader resolved for it, and
    ``geometry_paths`` the JSON path each geometry value came from (or where it would be declared,
    for a value defaulted because the config states none).
    """

    layer_type: str
    rope_type: str
    rope_type_path: str
    path: str
    values: Mapping[str, Any]
    geometry: Geometry
    geometry_paths: Mapping[str, str]
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False
    _view: ConfigView | None = attrs.field(default=None, repr=False, eq=False, alias="view")

    def key_path(self, name: str) -> str:
        """The JSON path of ``name`` inside this block."""
        return f"{self.path}.{name}" if self.path else name

    def where(self, name: str) -> str:
        """The JSON path of the key ``name`` as the config states it.

        A key of the block is blamed in the block; a geometry value where it was resolved from
        (``rope_theta`` may live at the top level or in ``text_config``); any other config key
        where the config has it; a key stated nowhere, where it belongs in the block.
        """
        if name in self.values:
            return self.key_path(name)
        if name in self.geometry_paths:
            return self.geometry_paths[name]
        if self._view is not None and name in self._view:
            return self._view.path(name)
        return self.key_path(name)

    def lookup(self, key: Key) -> tuple[Any, str]:
        """``key``'s value and JSON path: the block's own value, else its ``config_fallback``
        top-level key, else ``max_position_embeddings`` if the key says so; ``None`` if absent.

        A value in the block and a different one at ``config_fallback`` is a conflict, never
        silently resolved.
        """
        path = self.key_path(key.name)
        value = self.values.get(key.name)
        fallback = key.config_fallback
        if fallback is not None and self._view is not None and self._view.get(fallback) is not None:
            outer, outer_path = self._view[fallback], self._view.path(fallback)
            if value is None:
                return outer, outer_path
            if value != outer:
                raise RopeConfigError(
                    path, f"conflicts with {outer_path} ({value!r} vs {outer!r}); remove one or make them equal"
                )
        if value is None and key.default_from_max_positions and self.geometry.max_position_embeddings is not None:
            return self.geometry.max_position_embeddings, self.geometry_paths["max_position_embeddings"]
        return value, path

    def check_dims(self, table_length: int, *, covers_head: bool) -> None:
        """The dimensions a scheme needs: an even rotary dim of at least 2 (an even head for a
        ``covers_head`` scheme), and ``mrope_section`` summing to the table's ``table_length``."""
        geometry = self.geometry
        if covers_head:
            if geometry.head_dim % 2:
                raise RopeConfigError(
                    self.geometry_paths["head_dim"],
                    f"rope_type {self.rope_type!r} needs an even head_dim, got {geometry.head_dim}",
                )
        else:
            rotary = geometry.rotary_dim
            if rotary < 2 or rotary % 2:
                blamed = "partial_rotary_factor" if geometry.partial_rotary_factor != 1 else "head_dim"
                raise RopeConfigError(
                    self.geometry_paths[blamed],
                    f"rotary dim int(head_dim {geometry.head_dim} * partial_rotary_factor "
                    f"{geometry.partial_rotary_factor}) = {rotary} must be even and >= 2",
                )
        section = self.mrope_section
        if section is not None and sum(section) != table_length:
            raise RopeConfigError(
                self.key_path("mrope_section"),
                f"sections {list(section)} sum to {sum(section)}; they must sum to rotary_dim / 2 = {table_length}",
            )


@attrs.frozen
class ParsedConfig:
    """Every layer type's block and the per-layer layer types (empty when unknown)."""

    blocks: tuple[RopeBlock, ...]
    layer_types: tuple[str, ...]


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
    return ParsedConfig(blocks, layer_types)


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
    return bool(source) and not (RESERVED_KEYS & set(source)) and all(
        isinstance(v, Mapping) or v is None for v in source.values()
    )


def _block(view: ConfigView, layer_type: str, path: str, block: Any) -> RopeBlock:
    if not isinstance(block, Mapping):
        if block is None:
            raise RopeConfigError(path, "null: ropekit serves no NoPE layer types yet")
        raise RopeConfigError(path, f"expected an object, got {block!r}")
    rope_type, rope_type_path = _rope_type(block, path)
    theta, theta_path = _theta(view, layer_type, block, path)
    (head_dim, head_path), (factor, factor_path) = _head_dim_and_factor(view, layer_type, block, path)
    max_positions = _positive_int(view, "max_position_embeddings")
    geometry = Geometry(
        head_dim=head_dim, theta=theta, partial_rotary_factor=factor, max_position_embeddings=max_positions
    )
    paths = {
        "rope_theta": theta_path,
        "head_dim": head_path,
        "partial_rotary_factor": factor_path,
        "max_position_embeddings": view.path("max_position_embeddings"),
    }
    return RopeBlock(
        layer_type,
        rope_type,
        rope_type_path,
        path,
        block,
        geometry,
        paths,
        _mrope_section(block.get("mrope_section"), _join(path, "mrope_section")),
        _mrope_interleaved(block, path),
        view=view,
    )


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


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
    scaling_keys = sorted(set(block) - RESERVED_KEYS)
    if scaling_keys:
        raise RopeConfigError(
            f"{path}.rope_type",
            f"missing: the block declares {scaling_keys} but no rope_type; ropekit does not guess a scheme "
            "from which keys are present (add \"rope_type\")",
        )
    return "default", f"{path}.rope_type"


def _theta(view: ConfigView, layer_type: str, block: Mapping[str, Any], path: str) -> tuple[float, str]:
    """The base and where it was declared (a config declaring none gets 10000 at ``rope_theta``)."""
    candidates = [(_join(path, "rope_theta"), block.get("rope_theta"))]
    if layer_type == "sliding_attention" and not path:
        candidates.append((view.path("rope_local_base_freq"), view.get("rope_local_base_freq")))
    for name in ("rope_theta", "rotary_emb_base"):
        candidates.append((view.path(name), view.get(name)))
    for where, value in candidates:
        if value is not None:
            return _positive_number(value, where, above=1.0, most=MAX_THETA), where
    return DEFAULT_THETA, view.path("rope_theta")


def _partial_rotary_factor(view: ConfigView, block: Mapping[str, Any], path: str) -> tuple[float, str | None]:
    """The factor and where it was declared (``None``: not declared, 1.0)."""
    candidates = [(_join(path, "partial_rotary_factor"), block.get("partial_rotary_factor"))]
    for name in ("partial_rotary_factor", "rotary_pct"):
        candidates.append((view.path(name), view.get(name)))
    for where, value in candidates:
        if value is not None:
            return _positive_number(value, where, above=0.0, most=1.0), where
    return 1.0, None


def _head_dim_and_factor(
    view: ConfigView, layer_type: str, block: Mapping[str, Any], path: str
) -> tuple[tuple[int, str], tuple[float, str]]:
    """``((head_dim, its path), (partial_rotary_factor, its path))`` for one layer type.

    MLA models (DeepSeek, Mistral-4) rotate ``qk_rope_head_dim`` channels. DeepSeek states no
    partial_rotary_factor: the rotated head is ``qk_rope_head_dim``. Mistral-4 states one over the
    whole head (``qk_nope_head_dim + qk_rope_head_dim``); it must then give ``qk_rope_head_dim``.
    """
    factor, factor_path = _partial_rotary_factor(view, block, path)
    default_factor_path = view.path("partial_rotary_factor")
    if view.get("qk_rope_head_dim") is None:
        head_dim, head_path = _raw_head_dim(view, layer_type)
        return (_bounded(head_path, head_dim), head_path), (factor, factor_path or default_factor_path)
    rope_path = view.path("qk_rope_head_dim")
    rope = _bounded(rope_path, _required_int(view, "qk_rope_head_dim"))
    if factor_path is None:
        return (rope, rope_path), (1.0, default_factor_path)
    nope = _positive_int(view, "qk_nope_head_dim")
    declared = _positive_int(view, "head_dim")
    whole_path = view.path("head_dim") if declared is not None else rope_path
    whole = _bounded(whole_path, declared or (nope + rope if nope is not None else rope))
    if int(whole * factor) != rope:
        raise RopeConfigError(
            factor_path,
            f"int(head_dim {whole} * {factor}) = {int(whole * factor)} rotated channels, but qk_rope_head_dim "
            f"is {rope}; they must agree",
        )
    return (whole, whole_path), (factor, factor_path)


def _bounded(path: str, value: int) -> int:
    if value > MAX_HEAD_DIM:
        raise RopeConfigError(path, f"head dim {value} exceeds {MAX_HEAD_DIM}; is the config right?")
    return value


def _raw_head_dim(view: ConfigView, layer_type: str) -> tuple[int, str]:
    if layer_type == FLAT_LAYER_TYPE and view.get("global_head_dim") is not None:  # Gemma-4 global layers
        return _required_int(view, "global_head_dim"), view.path("global_head_dim")
    if view.get("head_dim") is not None:
        return _required_int(view, "head_dim"), view.path("head_dim")
    hidden = _positive_int(view, "hidden_size")
    heads = _positive_int(view, "num_attention_heads")
    if hidden is None or heads is None:
        raise RopeConfigError(
            view.path("head_dim"), "missing: declare head_dim, or hidden_size and num_attention_heads"
        )
    return hidden // heads, view.path("hidden_size")


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
"""Larger bases are refused: real models use up to ~1e9, and past this tables underflow. A base
must also exceed 1: at or below it frequencies no longer fall with the pair index (and a base
near 0 overflows every table)."""


def _positive_number(value: object, where: str, *, above: float, most: float) -> float:
    """``value`` as a float in ``(above, most]``, else a config error naming ``where`` and the range."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise RopeConfigError(where, f"expected a number, got {value!r} ({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not (math.isfinite(number) and above < number <= most):
        huge = number == math.inf and not isinstance(value, float)
        shown = f"an integer of {len(str(value))} digits" if huge else repr(value)
        raise RopeConfigError(where, f"must be a finite number in ({above:g}, {most:g}], got {shown}")
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
