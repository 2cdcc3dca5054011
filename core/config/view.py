"""The model's language config as one mapping, and the checks every geometry value goes through."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import RopeConfigError

__all__ = ["MAX_HEAD_DIM", "MAX_INT", "MAX_LAYERS", "MAX_POSITIONS", "MAX_THETA", "ConfigView", "positive_int",
           "positive_number", "required_int"]

ALIASES: Mapping[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd",),
    "num_attention_heads": ("n_head", "decoder_num_attention_heads"),
    "num_hidden_layers": ("n_layer", "num_layers"),
    "max_position_embeddings": ("n_positions",),
}
"""Older names transformers maps to the same attribute (GPT-2 style, ChatGLM; Moonshine's ``attribute_map``
sends ``num_attention_heads`` to its decoder's, the rotating text decoder); read when the transformers
name is absent."""

_ALIASED_BY: Mapping[str, tuple[str, ...]] = {
    alias: tuple(name for name, aliases in ALIASES.items() if alias in aliases)
    for aliases in ALIASES.values() for alias in aliases
}
"""The keys whose lookup reads each alias."""

_BLOCKS = ("rope_parameters", "rope_scaling")

_UNSEEN: Any = object()
"""A key not looked up yet (``None`` is a key the config and its class defaults do not have)."""


class ConfigView(Mapping[str, Any]):
    """The model's language config: ``text_config`` (if any) layered over the top level, over the
    class defaults of its model_type (the values its config class uses where a config is silent).
    ``model_type``, when given, is the code the config was identified as running (a wrapper's
    default text model, say); it wins over the text that names it.

    ``wrapper_keys`` are not read from the top level: there they configure a wrapper's own rotary
    module, not its language model (MusicFlamingo's audio time embedding).

    A key whose value is ``null`` counts as absent. :meth:`path` says where a key was found, or
    where it would be declared for a class default; :meth:`defaulted` says which it was.
    """

    def __init__(
        self, config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None, *, model_type: str | None = None,
        wrapper_keys: frozenset[str] = frozenset(),
    ) -> None:
        text = config.get("text_config")
        if text is not None and not isinstance(text, Mapping):
            raise RopeConfigError("text_config", f"expected an object, got {type(text).__name__}")
        self._layers: list[tuple[str, Mapping[str, Any]]] = [("text_config.", text)] if text else []
        self._layers.append(("", {key: value for key, value in config.items() if key not in wrapper_keys}
                                  if wrapper_keys else config))
        self._defaults: Mapping[str, Any] = {**(defaults or {}), "model_type": model_type}
        self._model_type = model_type
        self._found: dict[str, tuple[str, Any] | None] = {}
        self._named: frozenset[str] | None = _names(self._layers, self._defaults)

    def _find(self, name: str) -> tuple[str, Any] | None:
        found: tuple[str, Any] | None = self._found.get(name, _UNSEEN)  # a load asks for the same keys often
        if found is _UNSEEN:
            found = self._found[name] = self._search(name)
        return found

    def _search(self, name: str) -> tuple[str, Any] | None:
        if name == "model_type" and self._model_type is not None:  # the identified code, wherever it was named
            for prefix, layer in self._layers:
                if layer.get(name) == self._model_type:
                    return prefix + name, self._model_type
            return "model_type", self._model_type
        aliases = ALIASES.get(name)
        if aliases is None and self._named is not None and name not in self._named:
            return None  # named nowhere: most keys a load asks about (~30 of ~40)
        if aliases is None:  # most keys have no older name: no candidate tuple to build
            for prefix, layer in self._layers:
                value = layer.get(name)
                if value is not None:
                    return prefix + name, value
            candidates: tuple[str, ...] = (name,)
        else:
            candidates = (name, *aliases)
            for candidate in candidates:
                for prefix, layer in self._layers:
                    value = layer.get(candidate)
                    if value is not None:
                        return prefix + candidate, value
        if name in _BLOCKS and any(layer.get(other) is not None for other in _BLOCKS for _, layer in self._layers):
            return None  # a class's default rope block stands only where a config states neither block
        for candidate in candidates:
            if self._defaults.get(candidate) is not None:
                return self._layers[0][0] + candidate, self._defaults[candidate]
        return None

    def with_default(self, name: str, value: Any) -> ConfigView:
        """The same config with ``value`` as the class default of ``name``; the keys already looked
        up keep their result unless they read that default (``name`` itself, or an alias of it)."""
        view = ConfigView.__new__(ConfigView)
        view._layers = self._layers
        view._model_type = self._model_type
        view._defaults = {**self._defaults, name: value, "model_type": self._model_type}
        view._named = None if self._named is None else self._named | {name}
        view._found = dict(self._found)
        for key in (name, *_ALIASED_BY.get(name, ())):
            view._found.pop(key, None)
        return view

    def named(self) -> frozenset[str] | None:
        """Every key the config's layers and class defaults name (``None``: not known, a layer is not a
        plain dict). A key with no value here is named nowhere, unless it is ``model_type`` or has an alias."""
        return self._named

    def defaulted(self, name: str) -> bool:
        """Whether ``name``'s value is its class default (the config does not state it)."""
        if self._find(name) is None:
            return False
        for candidate in (name, *ALIASES[name]) if name in ALIASES else (name,):  # loops: no generator per call
            for _, layer in self._layers:
                if layer.get(candidate) is not None:
                    return False
        return True

    def get(self, name: str, default: Any = None) -> Any:
        """``name``'s value, else ``default`` (no KeyError raised and caught: geometry asks often)."""
        found: tuple[str, Any] | None = self._found.get(name, _UNSEEN)  # _find inlined: about 90 calls a load
        if found is _UNSEEN:
            found = self._found[name] = self._search(name)
        return default if found is None else found[1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    def __getitem__(self, name: str) -> Any:
        found = self._find(name)
        if found is None:
            raise KeyError(name)
        return found[1]

    def __iter__(self) -> Iterator[str]:
        seen = {name for _, layer in self._layers for name in layer if layer.get(name) is not None}
        seen.update(name for name, value in self._defaults.items() if value is not None)
        return iter(sorted(seen))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def path(self, name: str) -> str:
        """The JSON path of ``name`` (``text_config.name`` when it came from there; an alias's own
        name, ``n_embd``, when that is what the config states)."""
        found = self._find(name)
        return found[0] if found is not None else self._layers[0][0] + name


def _names(layers: list[tuple[str, Mapping[str, Any]]], defaults: Mapping[str, Any]) -> frozenset[str] | None:
    """Every key the layers and defaults name, when all are plain dicts (whose ``get`` finds only the keys
    they iterate); ``None`` otherwise: a lookup then asks each mapping."""
    if type(defaults) is not dict:
        return None
    names = set(defaults)
    for _, layer in layers:
        if type(layer) is not dict:
            return None
        names.update(layer)
    return frozenset(names)


MAX_HEAD_DIM = 1 << 16
"""Larger head dims are refused as config errors (they would only allocate absurd tables)."""
MAX_LAYERS = 1 << 16
"""Likewise for ``num_hidden_layers`` (ropekit lists one layer type per layer)."""


def required_int(view: ConfigView, name: str) -> int:
    """A positive integer the config must state (``missing`` otherwise)."""
    value = positive_int(view, name)
    if value is None:
        raise RopeConfigError(view.path(name), "missing")
    return value


def positive_int(view: ConfigView, name: str) -> int | None:
    """A positive integer (an integral float is accepted), within this key's sanity bound; ``None`` if absent."""
    value = view.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise RopeConfigError(view.path(name), f"expected a positive integer, got {_shown(value)}")
    most = _MOST.get(name, MAX_INT)
    if value > most:
        raise RopeConfigError(view.path(name), f"{_shown(value)} exceeds {most}; is the config right?")
    return value


def _shown(value: object) -> str:
    if isinstance(value, int) and len(str(value)) > 24:
        return f"an integer of {len(str(value))} digits"
    return repr(value)


MAX_POSITIONS = 1 << 40
"""Larger position counts are refused (``RopeTable.at`` accepts up to this length)."""
MAX_THETA = 1e30
"""Larger bases are refused: real models use up to ~1e9, and past this tables underflow. A base
must also exceed 1: at or below it frequencies no longer fall with the pair index (and a base
near 0 overflows every table)."""
MAX_INT = 1 << 53
"""Any other integer the geometry reads is at most this (exact as a float)."""
_MOST: Mapping[str, int] = {"max_position_embeddings": MAX_POSITIONS, "original_max_position_embeddings": MAX_POSITIONS,
         "num_hidden_layers": MAX_LAYERS, "head_dim": MAX_HEAD_DIM, "qk_rope_head_dim": MAX_HEAD_DIM,
         "qk_nope_head_dim": MAX_HEAD_DIM, "global_head_dim": MAX_HEAD_DIM, "kv_channels": MAX_HEAD_DIM}


def positive_number(value: object, where: str, *, above: float, most: float) -> float:
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
