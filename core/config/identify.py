"""Which code a config runs, decided before anything else is read from it.

A config's ``model_type`` names the code that will apply its RoPE. ropekit serves a table only
for code it knows: a class of the transformers release its facts were derived from
(:mod:`~ropekit.config.classes`), a remote-code family it has checked against that family's own
code (:data:`~ropekit.config.families.REMOTE_FAMILIES`), or a family an installed plugin declares
(entry-point group ``ropekit.families``). Any other model_type is refused in strict mode; with
``strict=False`` it is read as a plain Llama-style config, with a warning that names the guess. A
config without ``model_type`` (a hand-written dict stating its RoPE) is read as stated. A model
whose code applies no RoPE is refused by name: it has no table to serve.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..errors import NoRopeError, RopeConfigError, UnknownModelTypeError
from .classes import ClassFacts, class_facts, transformers_version
from .families import REMOTE_FAMILIES, Family
from .remote import ARCHITECTURES

if TYPE_CHECKING:
    from ..contract.family import ModelFamily

__all__ = ["Identity", "identify", "language_model"]

Origin = Literal["stated", "transformers", "remote", "plugin", "guessed"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Identity(NamedTuple):
    """The code a config runs. ``model_type`` is its language model's (``text_config``'s, else
    the top level's; ``None`` when the config states none); ``origin`` where ropekit's knowledge
    of that code comes from; ``defaults`` the class defaults for keys the config leaves out;
    ``family`` the facts a family plugin declares (``None``: ropekit's own); ``wrapper_keys`` the
    top-level keys that configure a wrapper's own rotary module, not its language model."""

    model_type: str | None
    origin: Origin
    defaults: Mapping[str, Any] = _EMPTY
    family: Family | None = None
    wrapper_keys: frozenset[str] = frozenset()


FamilyLookup = Callable[[str], "ModelFamily | None"]
"""Finds a family declared by an installed plugin (entry-point group ``ropekit.families``), or ``None``."""


def identify(config: Mapping[str, Any], *, strict: bool, plugin_family: FamilyLookup | None = None) -> Identity:
    """The :class:`Identity` of ``config``; raises :class:`~ropekit.UnknownModelTypeError` for
    unknown code (strict), :class:`~ropekit.NoRopeError` for code without RoPE."""
    outer = _model_type(config, "model_type")
    text = config.get("text_config")
    inner = _model_type(text, "text_config.model_type") if text is not None and isinstance(text, Mapping) else None
    wrapper = class_facts(outer) if outer is not None and inner is not None else None
    if wrapper is not None and wrapper.renames:  # the wrapper's class builds that name as another
        renamed = wrapper.renames.get(str(inner))
        if renamed is None and "*" in wrapper.renames and class_facts(str(inner)) is None:
            renamed = wrapper.renames["*"]
        inner = renamed or inner
    if outer is None and inner is None:
        return _unnamed(config, strict)
    effective, path = (inner, "text_config.model_type") if inner is not None else (outer, "model_type")
    wrapper_keys: frozenset[str] = frozenset()
    wrapper_defaults: Mapping[str, Any] = _EMPTY
    if outer is not None:
        known = _knowledge(outer, "model_type", strict, plugin_family)
        facts = known[1] if known is not None else None
        if facts is not None and facts.kind == "composite":
            _check_text_key(config, outer, facts)
            wrapper_keys = facts.own_keys
            # what the wrapper builds its language model with: its own defaults, or those it lays under a stated one
            wrapper_defaults = facts.text_defaults_merged if isinstance(text, Mapping) else facts.text_defaults
            if inner is None and facts.text_type is not None:
                effective, path = facts.text_type, "model_type"
        elif known is None and inner is None:
            return Identity(outer, "guessed")
    assert effective is not None
    known = _knowledge(effective, path, strict, plugin_family)
    if known is None:
        return Identity(effective, "guessed")
    origin, facts, defaults = known
    if facts is not None and facts.kind == "no_rope":
        raise NoRopeError(path, f"model_type {effective!r} applies no RoPE: {facts.reason} (per transformers "
                          f"{transformers_version()}'s modeling code); there is no RoPE table to serve")
    if origin == "plugin":
        declared = plugin_family(effective) if plugin_family is not None else None
        assert declared is not None
        if declared.no_rope:
            raise NoRopeError(path, f"model_type {effective!r} applies no RoPE: {declared.no_rope} (declared by its "
                              "family plugin); there is no RoPE table to serve")
        family = Family(partial_rotary_factor=declared.partial_rotary_factor, layout=declared.layout,
                        no_rope_layer_types=declared.no_rope_layer_types, fixed_theta=declared.fixed_theta,
                        unserved=declared.unserved, rope_types=declared.rope_types, code=declared.code,
                        refused_types=declared.refused_types, schemes=declared.schemes,
                        inert_keys=declared.inert_keys,
                        layer_configs=declared.layer_configs, no_rope_if=declared.no_rope_if)
        return Identity(effective, origin, declared.defaults, family, wrapper_keys)
    if wrapper_defaults and facts is not None and effective == (_text_type_of(outer) or effective):
        defaults = {**defaults, **wrapper_defaults}
    return Identity(effective, origin, defaults, wrapper_keys=wrapper_keys)


def _text_type_of(model_type: str | None) -> str | None:
    facts = class_facts(model_type) if model_type is not None else None
    return facts.text_type if facts is not None else None


def _unnamed(config: Mapping[str, Any], strict: bool) -> Identity:
    """A config that names no model_type: a hand-written dict is read as stated; a model's own
    config running remote code (``auto_map``) is identified by its ``architectures``, or refused."""
    architectures = config.get("architectures")
    names = [name for name in architectures if isinstance(name, str)] if isinstance(architectures, list) else []
    family = next((ARCHITECTURES[name] for name in names if name in ARCHITECTURES), None)
    if family is not None:
        return Identity(family, "remote")
    if config.get("auto_map") is None:
        return Identity(None, "stated")
    if strict:
        raise UnknownModelTypeError(
            "model_type", "",
            f"missing, and the config runs remote code (auto_map) of architectures {names or 'unnamed'}, which ropekit "
            "has not checked; it will not guess which RoPE that code applies. State the model_type of a family "
            "ropekit knows, install a plugin declaring it (entry-point group 'ropekit.families'), or load with "
            "strict=False (--lenient) to read it as a plain Llama-style config",
        )
    warnings.warn(f"model_type: missing, and the config runs remote code (auto_map) of architectures {names}: read as "
                  "a plain Llama-style config, a guess (strict=False)", UserWarning, stacklevel=4)
    return Identity(None, "guessed")


def _model_type(layer: Mapping[str, Any], path: str) -> str | None:
    value = layer.get("model_type")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise RopeConfigError(path, f"expected a model_type name, got {value!r}")
    return value


def _knowledge(
    model_type: str, path: str, strict: bool, plugin_family: FamilyLookup | None
) -> tuple[Origin, ClassFacts | None, Mapping[str, Any]] | None:
    """Where ropekit's knowledge of ``model_type`` comes from, or ``None`` (unknown, lenient)."""
    if model_type in REMOTE_FAMILIES:
        return "remote", None, _EMPTY
    facts = class_facts(model_type)
    if facts is not None and facts.kind != "unreadable":
        return "transformers", facts, facts.defaults
    declared = plugin_family(model_type) if plugin_family is not None else None
    if declared is not None:
        return "plugin", None, declared.defaults
    version = transformers_version()
    if strict:
        raise UnknownModelTypeError(
            path, model_type,
            f"model_type {model_type!r} is not a class of transformers {version} (the release ropekit's facts come "
            "from) nor a remote-code family ropekit has checked against its code, so ropekit will not guess which "
            "RoPE its code applies. To serve it: install a plugin declaring the family (entry-point group "
            "'ropekit.families'), or load with strict=False (--lenient) to read it as a plain Llama-style config",
        )
    warnings.warn(
        f"{path}: model_type {model_type!r} is unknown to ropekit (not in transformers {version}, not a checked "
        "remote-code family): read as a plain Llama-style config, a guess (strict=False)",
        UserWarning, stacklevel=5,
    )
    return None


def language_model(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | None:
    """``(sub-config, its path prefix)`` for a wrapper that keeps its language model under a key other
    than ``text_config`` (Qwen2.5-Omni's ``thinker_config``, ColPali's ``vlm_config``), as its class
    builds it: the stated sub-config (named with the wrapper's default model_type when it names none),
    else the wrapper's default language model. ``None``: not such a wrapper. A key of the wrapper's
    own top level that bears on RoPE is refused: its code reads the language model's, not the wrapper's."""
    outer = config.get("model_type")
    facts = class_facts(outer) if isinstance(outer, str) else None
    if facts is None or facts.kind != "composite" or facts.text in (None, "text_config"):
        return None
    assert facts.text is not None
    inner = config.get(facts.text)
    if inner is not None and not isinstance(inner, Mapping):
        raise RopeConfigError(facts.text, f"expected an object, got {type(inner).__name__}")
    if facts.text_type is None and (inner is None or inner.get("model_type") is None):
        raise RopeConfigError(f"{facts.text}.model_type", f"missing: {outer!r} names no default language model, "
                              "so ropekit cannot tell which code runs it")
    named = {"model_type": facts.text_type} if facts.text_type is not None else {}
    if inner is None:
        return MappingProxyType({**named, **facts.text_defaults}), facts.text + "."
    if inner.get("model_type") is None:
        return MappingProxyType({**named, **inner}), facts.text + "."
    return inner, facts.text + "."


def _check_text_key(config: Mapping[str, Any], model_type: str, facts: ClassFacts) -> None:
    """A wrapper whose language model lives under a key other than ``text_config`` is refused:
    ropekit would read the wrapper's top level instead and serve a table its model never uses."""
    if facts.text is not None and facts.text != "text_config":
        raise RopeConfigError(
            facts.text,
            f"model_type {model_type!r} keeps its language model under {facts.text!r}, which ropekit does not read "
            "(it reads text_config); load that sub-config on its own",
        )
