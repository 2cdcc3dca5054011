"""What transformers' model classes do, as derived from their own code: for every ``model_type`` of
the pinned transformers release, whether its modeling code applies RoPE (and if not, what it uses
instead), where a wrapper keeps its language model, and the class defaults a saved config leaves
out.

The facts live in ``transformers_classes.json`` beside this module, written by
``scripts/transformers_classes.py`` from transformers itself (never typed by hand) and read on
first use, once per process.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

__all__ = ["ClassFacts", "class_facts", "facts_for", "layer_type_renames", "model_types", "rope_keys",
           "transformers_version"]

_DATA = os.path.join(os.path.dirname(__file__), "transformers_classes.json")

Kind = Literal["rope", "no_rope", "composite", "unreadable"]


class ClassFacts(NamedTuple):
    """One model_type's class, as its code behaves.

    ``kind``: ``rope`` (its code rotates queries and keys), ``no_rope`` (``reason`` says what it
    uses instead), ``composite`` (a wrapper: its language model is the sub-config ``text``, of
    model_type ``text_type`` by default). ``defaults``: the class's own defaults for the keys
    ropekit reads, used where a config leaves them out. ``mrope``: for a multimodal rotary module,
    its ``composition`` (see :mod:`ropekit.tables.mrope`) and the ``section`` it uses when the
    config states none (``None``: it has no default).
    """

    kind: Kind
    reason: str = ""
    text: str | None = None
    text_type: str | None = None
    defaults: Mapping[str, Any] = MappingProxyType({})
    mrope: Mapping[str, Any] | None = None
    theta: float | Mapping[str, float] | None = None
    """The base the class uses when a config states none (one per layer type when nested)."""
    rope_block: Mapping[str, Any] | None = None
    """The rope block (without its base) the class uses when a config states none, when it is
    more than plain RoPE."""
    renames: Mapping[str, str] = MappingProxyType({})
    """Text ``model_type`` names the wrapper builds as another class (EXAONE-4.5: ``exaone4_5_text`` is
    ``exaone4``); ``"*"``: any name unknown to transformers is built as that class."""
    text_defaults: Mapping[str, Any] = MappingProxyType({})
    """A wrapper's defaults for the language model it builds when the config has no ``text_config``,
    where they differ from the text class's own (Voxtral's base 1e8)."""
    text_defaults_merged: Mapping[str, Any] = MappingProxyType({})
    """Those of :attr:`text_defaults` the wrapper also lays under a ``text_config`` the config states (Voxtral)."""
    own_keys: frozenset[str] = frozenset()
    """A wrapper's keys that configure a rotary module of its own, not its text model's (MusicFlamingo's
    audio time embedding): they are not read from the top level as the text model's."""
    unread: frozenset[str] = frozenset()
    """Geometry keys the class's config declares that its rotary module is observed not to follow."""
    flat_scaling: Mapping[str, Any] | None = None
    """For a class with rope parameters per layer type: ``layer_types``, the layer types a flat
    (transformers v4) ``rope_scaling`` block is applied to, and ``reads_type``, whether its legacy
    ``type`` key is read."""
    last_layer: str | None = None
    """The layer type the class forces on its last layer whatever ``layer_types`` says (Gemma-4)."""
    folds: str | None = None
    """A ``layer_types`` entry the class folds into the layer before it (Dory's ``"mlp"``): each
    ``(attention type, folds)`` pair is one decoder layer."""
    spellings: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None
    """Which top-level keys the config class converts into which field of its rope parameters
    (``rope_theta``, ``partial_rotary_factor``), per layer type (``""``: its one block), the
    winning spelling first (GPT-NeoX: ``rotary_pct``, ``rotary_emb_base``). ``None``: the class
    keeps no rope parameters (GPT-J, CodeGen)."""
    spellings_beside_block: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None
    """The same, when the config also states a flat rope block, where that differs (``None``: as
    :attr:`spellings`)."""
    reads: frozenset[str] = frozenset()
    """Rope keys the modeling code reads as attributes of its config (GPT-J's ``rotary_dim``)."""
    rope_blocks: Mapping[str, Mapping[str, Any] | None] | None = None
    """For a class keeping rope parameters per layer type: each type's default block without its base,
    where one is more than plain RoPE (``None`` for a type: it applies none)."""
    nope_default: Mapping[str, Any] | None = None
    """The layers the class leaves without RoPE when a config states no list: ``every``-th layer,
    ``counted_from`` the ``first`` or the ``last`` (Llama-4's ``no_rope_layers``, Muse's zero bases)."""
    pairing: str | None = None
    """``gptj``: the class's code rotates interleaved pairs of its MLA rope sub-head whatever the
    config's ``rope_interleave`` says (observed in the frame of the projection's channels)."""
    attending: Mapping[str, Any] | None = None
    """For a class whose config rewrites ``num_hidden_layers`` (HRM's text model counts a cache slot per
    recurrent invocation): ``key``, the config key holding the number of layers its code builds and attends
    with; the layers past it never call attention (observed by the probe)."""
    layer_plan: Mapping[str, Any] | None = None
    """The layer plan the config class builds when a config states no ``layer_types``: ``pattern``
    (repeated over the layers; ``None``: no repetition ropekit derived) and ``keys``, the config keys
    that change it, each with its ``default`` and ``patterns`` (the pattern per JSON-spelt value)."""


@functools.cache
def _raw() -> bytes:
    with open(_DATA, "rb") as file:
        return file.read()


@functools.cache
def _catalogue() -> tuple[str, Mapping[str, Any]]:
    document = json.loads(_raw())
    return str(document["transformers"]), document["classes"]


def _entry(model_type: str) -> Mapping[str, Any] | None:
    """One model_type's record, read without parsing the others: the file holds one class per
    line (``scripts/transformers_classes.py`` writes it so), and the line is found by its key."""
    raw = _raw()
    key = b"\n" + json.dumps(model_type).encode() + b":"
    start = raw.find(key)
    if start < 0:
        if raw.count(b"\n") > 2:  # one class a line: the model_type is not there
            return None
        found: Mapping[str, Any] | None = _catalogue()[1].get(model_type)  # another layout: parse it whole
        return found
    end = raw.find(b"\n", start + 1)
    record: Mapping[str, Any] = json.loads(raw[start + len(key) : end].rstrip(b","))
    return record


@functools.cache
def _head() -> Mapping[str, Any]:
    """The document without its classes (the first line, when the file holds one class a line)."""
    raw = _raw()
    header = raw[: raw.find(b"\n")]
    if header.endswith(b'"classes":{'):
        found: Mapping[str, Any] = json.loads(header + b"}}")
        return found
    document = json.loads(raw)
    return {key: value for key, value in document.items() if key != "classes"}


def rope_keys() -> frozenset[str]:
    """Every top-level key some config class of the pinned transformers converts into its rope
    parameters (``rotary_pct``, ``rope_local_base_freq``, ``global_rope_theta``, ...), as derived
    from the classes' own code."""
    return _rope_keys()


@functools.cache
def _rope_keys() -> frozenset[str]:
    return frozenset(_head()["rope_keys"])


def layer_type_renames() -> Mapping[str, str]:
    """Legacy layer-type names every config class of the pinned transformers renames, and the name each
    becomes (``deepseek_sparse_attention`` is ``indexed_attention``), as derived from its code."""
    return _layer_type_renames()


@functools.cache
def _layer_type_renames() -> Mapping[str, str]:
    return MappingProxyType(dict(_head().get("layer_type_renames", {})))


def _spelling_table(value: Any) -> Mapping[str, Mapping[str, tuple[str, ...]]] | None:
    if value is None:
        return None
    return MappingProxyType({field: MappingProxyType({name: tuple(keys) for name, keys in per_type.items()})
                             for field, per_type in value.items()})


def transformers_version() -> str:
    """The transformers release the facts were derived from (the ``reference`` extra pins it)."""
    raw = _raw()
    header = raw[: raw.find(b"\n")] if raw.count(b"\n") > 2 else b""
    if header.endswith(b'"classes":{'):  # the first line: everything before the classes
        return str(json.loads(header + b"}}")["transformers"])
    return _catalogue()[0]


def model_types() -> tuple[str, ...]:
    """Every model_type of the pinned transformers, sorted."""
    return tuple(sorted(_catalogue()[1]))


def facts_for(config: Mapping[str, Any]) -> ClassFacts | None:
    """The facts for the class a config (or :class:`~ropekit.config.view.ConfigView`) names by its
    ``model_type``, or ``None`` (no model_type, or not a class of the pinned transformers)."""
    model_type = config.get("model_type")
    return class_facts(model_type) if isinstance(model_type, str) else None


@functools.lru_cache(maxsize=256)
def class_facts(model_type: str) -> ClassFacts | None:
    """The facts for ``model_type``, or ``None`` if the pinned transformers has no such class."""
    entry = _entry(model_type)
    if entry is None:
        return None
    return ClassFacts(
        kind=entry["kind"],
        reason=entry.get("reason", ""),
        text=entry.get("text"),
        text_type=entry.get("text_type"),
        defaults=MappingProxyType(dict(entry.get("defaults", {}))),
        mrope=MappingProxyType(dict(entry["mrope"])) if entry.get("mrope") else None,
        theta=MappingProxyType(dict(entry["theta"])) if isinstance(entry.get("theta"), dict) else entry.get("theta"),
        rope_block=MappingProxyType(dict(entry["rope_block"])) if entry.get("rope_block") else None,
        own_keys=frozenset(entry.get("own_keys", ())),
        text_defaults=MappingProxyType(dict(entry.get("text_defaults", {}))),
        renames=MappingProxyType(dict(entry.get("renames", {}))),
        text_defaults_merged=MappingProxyType(dict(entry.get("text_defaults_merged", {}))),
        unread=frozenset(entry.get("unread", ())),
        folds=entry.get("folds"),
        last_layer=entry.get("last_layer"),
        flat_scaling=MappingProxyType(dict(entry["flat_scaling"])) if entry.get("flat_scaling") else None,
        spellings=_spelling_table(entry.get("spellings")),
        spellings_beside_block=_spelling_table(entry.get("spellings_beside_block")),
        reads=frozenset(entry.get("reads", ())),
        pairing=entry.get("pairing"),
        nope_default=MappingProxyType(dict(entry["nope_default"])) if entry.get("nope_default") else None,
        layer_plan=MappingProxyType(dict(entry["layer_plan"])) if entry.get("layer_plan") else None,
        attending=MappingProxyType(dict(entry["attending"])) if entry.get("attending") else None,
        rope_blocks=MappingProxyType({name: None if block is None else MappingProxyType(dict(block))
                                      for name, block in entry["rope_blocks"].items()})
        if entry.get("rope_blocks") else None,
    )
