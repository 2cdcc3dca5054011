"""``ropekit.load``: config in, one checked table per layer type out.

The path of a config: :func:`~ropekit.config.source.read_config` (source -> mapping),
:func:`~ropekit.config.parse.parse_config` (mapping -> one :class:`~ropekit.config.parse.RopeBlock` per layer
type, geometry resolved, every value's JSON path kept), the registry (rope_type ->
:class:`~ropekit.host.loaded.LoadedScheme`), :func:`~ropekit.config.validation.validate_params` (block ->
params), the scheme's contained ``check`` and ``build``, then a :class:`~ropekit.RopeTable`.
Each step hands its result down; none calls back up.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from .config.classes import class_facts
from .config.declared import as_declared
from .config.families import READ_KEYS, REMOTE_FAMILIES
from .config.identify import language_model
from .config.parse import RopeBlock, parse_config
from .config.remote import ARCHITECTURES, internlm_code
from .config.source import read_config
from .config.validation import validate_params
from .errors import RopeConfigError, SchemeDeclarationError
from .host.loaded import LoadedScheme
from .host.registry import Registry, default_registry
from .tables.table import ModelRope, RopeTable, SeqLenRule

if TYPE_CHECKING:
    from .contract.family import ModelFamily

__all__ = ["build_table", "load", "plugin_family"]

FAMILY_DEFAULT_KEYS = READ_KEYS - {"model_type", "text_config", "layer_types"}
"""Config keys a family plugin may give class defaults for: the keys ropekit reads."""


def plugin_family(registry: Registry, model_type: str) -> ModelFamily | None:
    """The family an installed plugin declares for ``model_type`` (``None``: none does), checked:
    its defaults may name only keys ropekit reads, else the distribution is blamed."""
    family = registry.families.family(model_type)
    if family is not None:
        unread = sorted(set(family.defaults) - FAMILY_DEFAULT_KEYS)
        if unread:
            owner = registry.families.owner(model_type)
            raise SchemeDeclarationError(
                model_type, owner.distribution if owner else "?",
                f"defaults name keys ropekit does not read: {unread}; it reads {sorted(FAMILY_DEFAULT_KEYS)}",
                kind="model_type",
            )
    return family


def load(
    source: Mapping[str, Any] | str | os.PathLike[str],
    *,
    strict: bool = True,
    registry: Registry | None = None,
) -> ModelRope:
    """Load the RoPE tables a model's config declares.

    ``source`` is a config mapping (never mutated), a path to ``config.json``, or a model
    directory. Every layer type's ``rope_type`` is dispatched to its plugin; an unregistered
    rope_type raises :class:`~ropekit.UnknownRopeTypeError` and nothing falls back to plain RoPE.
    Invalid values raise :class:`~ropekit.RopeConfigError` naming the JSON path.
    Every top-level key that bears on RoPE is read or refused; layers without RoPE are reported
    as such (:meth:`~ropekit.ModelRope.for_layer` returns ``None`` for them), never given a table.
    A ``model_type`` whose code ropekit does not know raises :class:`~ropekit.UnknownModelTypeError`;
    a model whose code applies no RoPE at all raises :class:`~ropekit.NoRopeError`.
    ``strict=False`` turns unknown keys into warnings and reads an unknown ``model_type`` as a plain
    Llama-style config (with a warning naming the guess); nothing else is relaxed.
    """
    config, origin = read_config(source)
    registry = registry or default_registry()
    config = _named_by_architecture(config, registry)
    if config.get("model_type") == "internlm":
        config = internlm_code(config)  # the InternLM code its repository ships, read as that code reads it
    family = _declared_family(config, registry)
    if family is not None and family.variants:
        config, family = _variant(config, family, registry)
    if family is not None and family.same_as:  # code that reads its config as a class ropekit knows
        config, family = MappingProxyType({**config, "model_type": family.same_as}), None
    wrapped = language_model(config) or _declared_language_model(config, family)
    if wrapped is not None:  # a wrapper keeping its language model under its own key: load that, paths kept
        inner, prefix = wrapped
        with _under(prefix):
            model = load(inner, strict=strict, registry=registry)
        return attrs.evolve(model, source=origin)
    if family is not None:
        config = as_declared(config, family)
    parsed = parse_config(config, strict=strict, plugin_family=functools.partial(plugin_family, registry))
    tables = {
        block.layer_type: build_table(block, registry.loaded(block.rope_type, path=block.rope_type_path), strict=strict)
        for block in parsed.blocks
    }
    parsed.check_layers_placed()
    return ModelRope(
        MappingProxyType(tables),
        parsed.layer_types,
        origin,
        no_rope_types=parsed.no_rope_types,
        no_rope_layers=parsed.no_rope_layers,
    )


_WRAPPER_ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "head_dim")


def _named_by_architecture(config: Mapping[str, Any], registry: Registry) -> Mapping[str, Any]:
    """A config stating no ``model_type`` whose ``architectures`` name a class a family declaration
    claims (as vLLM chooses code by ``architectures``): read as that family's config."""
    text = config.get("text_config")
    architectures = config.get("architectures")
    if config.get("model_type") is not None or (isinstance(text, Mapping) and text.get("model_type") is not None) \
            or not isinstance(architectures, list):
        return config
    names = [name for name in architectures if isinstance(name, str)]
    if any(name in ARCHITECTURES for name in names):
        return config
    family = registry.families.by_architecture(names)
    if family is None:
        return config
    return MappingProxyType({**config, "model_type": family.model_type})


def _declared_language_model(
    config: Mapping[str, Any], family: ModelFamily | None
) -> tuple[Mapping[str, Any], str] | None:
    """``(sub-config, path prefix)`` for a family declared as a wrapper (``ModelFamily.language_model``:
    InternVL's ``llm_config``); ``None`` otherwise. A RoPE key at the wrapper's own top level is
    refused: its code builds the language model from the sub-config alone."""
    if family is None or not family.language_model:
        return None
    model_type = family.model_type
    key = family.language_model
    inner = config.get(key)
    if not isinstance(inner, Mapping):
        raise RopeConfigError(key, f"{'missing' if inner is None else 'expected an object'}: {model_type}'s code "
                              f"builds its language model from {key!r} ({family.code or family.doc}), so its RoPE "
                              "is stated there")
    for name in _WRAPPER_ROPE_KEYS:
        if config.get(name) is not None:
            raise RopeConfigError(name, f"{model_type}'s code builds its language model from {key!r} alone and "
                                  f"never reads its own top-level {name!r}; state it under {key!r}, or remove it")
    if family.language_model_type and inner.get("model_type") is None:  # the class its code builds it as
        inner = MappingProxyType({**inner, "model_type": family.language_model_type})
    return inner, key + "."


def _declared_family(config: Mapping[str, Any], registry: Registry) -> ModelFamily | None:
    """The family declaration serving ``config``'s own model_type (``None``: ropekit's own knowledge serves it)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or class_facts(model_type) is not None or model_type in REMOTE_FAMILIES:
        return None
    return plugin_family(registry, model_type)


def _variant(
    config: Mapping[str, Any], family: ModelFamily, registry: Registry
) -> tuple[Mapping[str, Any], ModelFamily]:
    """The family whose code a config of a shared ``model_type`` runs (``ModelFamily.variants``), decided
    by the classes its ``architectures`` name, as engines choose code; refused naming that evidence when
    they name neither code."""
    stated = config.get("architectures")
    names = [name for name in stated if isinstance(name, str)] if isinstance(stated, list) else []
    both = sorted({name for name in names if name in family.variants or name in family.architectures})
    if len(both) > 1 and any(name in family.architectures for name in both):
        raise RopeConfigError("architectures", f"{names}: names the classes of more than one code that model_type "
                              f"{family.model_type!r} covers ({', '.join(both)}); state the checkpoint's one class")
    for name in names:
        if name in family.variants:
            variant = plugin_family(registry, family.variants[name])
            if variant is None:
                raise RopeConfigError("architectures", f"{name!r} names the code of {family.variants[name]!r}, whose "
                                      "family declaration is not installed")
            return MappingProxyType({**config, "model_type": variant.model_type}), variant
    if any(name in family.architectures for name in names):
        return config, family
    codes = "; ".join([f"{', '.join(family.architectures)} ({family.model_type}: {family.doc})",
                       *(f"{arch} ({variant})" for arch, variant in sorted(family.variants.items()))])
    raise RopeConfigError("architectures", f"{names or 'missing'}: model_type {family.model_type!r} names more than "
                          f"one code, told apart by the class a config's architectures name: {codes}; state the "
                          "checkpoint's architectures")


@contextlib.contextmanager
def _under(prefix: str) -> Iterator[None]:
    """Errors and warnings about a wrapped language model's config name its keys where the wrapper
    keeps them (``thinker_config.text_config.rope_theta``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except RopeConfigError as error:
            error.path = prefix + error.path if error.path else prefix.rstrip(".")
            error.args = (f"{error.path}: {error.problem}",)
            raise
    for warning in caught:
        warnings.warn_explicit(f"{prefix}{warning.message}", warning.category, warning.filename, warning.lineno)


def build_table(block: RopeBlock, loaded: LoadedScheme, *, strict: bool = True) -> RopeTable:
    """Validate ``block`` against ``loaded``'s scheme and build its load-time table."""
    scheme, geometry = loaded.scheme, block.geometry
    block.check_dims(scheme.table_length(geometry), covers_head=scheme.covers_head)
    if block.mrope_composition is not None:
        from .tables.mrope import section_problem

        problem = section_problem(block.mrope_composition, block.mrope_section or (), scheme.table_length(geometry))
        if problem is not None:
            raise RopeConfigError(block.key_path("mrope_section"), problem)
    params = MappingProxyType(validate_params(scheme, block, strict=strict))
    for key, problem in loaded.check(params, geometry):
        raise RopeConfigError(block.where(key), problem)
    frequencies = loaded.build(params, geometry, None)
    switch_at = loaded.switch_at(params, geometry)
    return RopeTable(
        layer_type=block.layer_type,
        rope_type=scheme.name,
        params=params,
        geometry=geometry,
        inv_freq=frequencies.inv_freq,
        attention_factor=frequencies.attention_factor,
        rule=SeqLenRule(scheme.seq_len_rule, switch_at) if switch_at is not None else None,
        mrope_section=block.mrope_section,
        mrope_interleaved=block.mrope_interleaved,
        mrope_composition=block.mrope_composition,
        layout=block.layout,
        landmarks=loaded.landmarks(params, geometry),
        scheme=loaded,
    )
