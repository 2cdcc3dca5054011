"""Which top-level keys a config's class reads, under which spelling, and which it ignores.

transformers 4.x spelled RoPE per class (GPT-NeoX's ``rotary_pct`` and ``rotary_emb_base``,
Gemma-3's ``rope_local_base_freq``, ModernBERT's ``global_rope_theta`` / ``local_rope_theta``);
5.24's config classes convert them into their rope parameters in their own code, and ignore the
spellings they do not convert (GPT-NeoX drops a top-level ``partial_rotary_factor``; GPT-J's code
reads no rope block at all). :func:`key_reading` gives what ``scripts/transformers_classes.py``
derived for the config's class (``spellings``, ``spellings_beside_block``, ``reads`` in
``transformers_classes.json``), so the loader reads exactly the keys the class reads, in the order
in which the class lets them win, and names every key the class ignores.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from .classes import ClassFacts, class_facts, facts_for, rope_keys
from .view import ALIASES, ConfigView

__all__ = ["FIELD_OF", "KeyReading", "key_reading"]

FIELD_OF: Mapping[str, str] = {
    "rope_theta": "rope_theta", "rotary_emb_base": "rope_theta", "rope_local_base_freq": "rope_theta",
    "global_rope_theta": "rope_theta", "local_rope_theta": "rope_theta", "swa_rope_theta": "rope_theta",
    "rope_embedding_base": "rope_theta",
    "partial_rotary_factor": "partial_rotary_factor", "rotary_pct": "partial_rotary_factor",
    "rotary_dim": "partial_rotary_factor",
}
"""The rope field a top-level key states (``rotary_dim`` as a width: the factor ``rotary_dim / head_dim``);
used for keys a modeling code reads as attributes, which no conversion names."""


class KeyReading(NamedTuple):
    """What one config's class reads of its top-level rope keys (derived from its code)."""

    model_type: str
    table: Mapping[str, Mapping[str, tuple[str, ...]]]
    reads: frozenset[str]
    block_read: bool
    """Whether the class reads a rope block (``rope_scaling`` / ``rope_parameters``) at all."""

    def keys_for(self, field: str, layer_type: str) -> tuple[str, ...]:
        """The top-level keys the class reads into ``field`` for ``layer_type``, the winner first."""
        per_type = self.table.get(field, {})
        found = per_type.get(layer_type, per_type.get("", ()))
        extra = tuple(key for key in _read_for(self.reads, field) if key not in found)
        return (*found, *extra)

    def read(self, key: str) -> bool:
        """Whether the class reads ``key`` for any field and layer type."""
        if key in ("rope_scaling", "rope_parameters"):
            return self.block_read
        return key in self.reads or any(key in keys for per_type in self.table.values() for keys in per_type.values())

    def ignored(self, view: Mapping[str, Any]) -> list[str]:
        """The rope keys ``view`` states that this class neither converts nor reads."""
        named = view.named() if isinstance(view, ConfigView) else None
        candidates = _candidates() if named is None else sorted(named.intersection(_candidates()) | _unnamed_held())
        return [key for key in candidates if _stated(view, key) and not self.read(key)]  # (sorted, as before)


@functools.lru_cache(maxsize=1)
def _candidates() -> tuple[str, ...]:
    """Every rope key a class may convert or read, sorted (static: the pinned facts and :data:`FIELD_OF`)."""
    return tuple(sorted(rope_keys() | set(FIELD_OF) | {"rope_scaling", "rope_parameters"}))


@functools.lru_cache(maxsize=1)
def _unnamed_held() -> frozenset[str]:
    """The candidates a view may hold a value for without naming them (see :meth:`ConfigView.named`)."""
    return frozenset(key for key in _candidates() if key == "model_type" or key in ALIASES)


@functools.lru_cache(maxsize=256)
def _read_for(reads: frozenset[str], field: str) -> tuple[str, ...]:
    """The keys of ``reads`` that state ``field``, sorted (static per class)."""
    return tuple(key for key in sorted(reads) if FIELD_OF.get(key) == field)


def _stated(view: Mapping[str, Any], key: str) -> bool:
    value = view.get(key)
    if key in ("rope_scaling", "rope_parameters"):
        return value is not None and isinstance(value, Mapping) and bool(value)  # None first: no ABC check
    return value is not None and not _defaulted(view, key)


def _defaulted(view: Mapping[str, Any], key: str) -> bool:
    defaulted = getattr(view, "defaulted", None)
    return bool(defaulted(key)) if callable(defaulted) else False


def key_reading(view: Mapping[str, Any]) -> KeyReading | None:
    """What the config's class reads of its rope keys, or ``None`` where nothing was derived (a
    config of no transformers class, or a class whose rope parameters could not be observed while
    its code reads a rope block: ropekit then reads every spelling it knows, as before)."""
    facts = facts_for(view)
    if facts is None or facts.kind != "rope":
        return None
    block_stated = _stated(view, "rope_parameters") or _stated(view, "rope_scaling")
    return _reading(str(view.get("model_type")), block_stated)


@functools.lru_cache(maxsize=1024)
def _reading(model_type: str, block_stated: bool) -> KeyReading | None:
    """:func:`key_reading` for a class and whether its config states a rope block (static per class)."""
    facts = class_facts(model_type)
    assert facts is not None
    table = _table(facts, block_stated)
    if table is None:
        if facts.reads & {"rope_parameters", "rope_scaling"}:
            return None
        return KeyReading(model_type, {}, facts.reads, block_read=False)
    return KeyReading(model_type, table, facts.reads, block_read=True)


def _table(facts: ClassFacts, block_stated: bool) -> Mapping[str, Mapping[str, tuple[str, ...]]] | None:
    if block_stated and facts.spellings_beside_block is not None:
        return facts.spellings_beside_block
    return facts.spellings
