"""The audit's result as typed values: :class:`AuditReport` (one artifact against one declaration),
:class:`LayerReport` (one layer type), :class:`TableReport` (one served table against its declared
one) and :class:`LayerEntry` (one layer of a per-layer plan: a GGUF's blocks, an ONNX pack's
attention layers). Every reader of an audit (the CLI, ``scan --audit``, repair, ``audit_module``,
the vLLM plugin) reads these; ``to_json()`` gives the ``ropekit audit --json`` document of
docs/cli.md, with its keys in one fixed order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .served import ServedArtifact

__all__ = ["VERDICTS", "ArtifactFacts", "AuditReport", "AuditScope", "Judgement", "LayerEntry", "LayerReport",
           "TableReport", "worst"]

VERDICTS = ("match", "mismatch", "no_table")
"""An audit's verdicts: the served table is the declared one, is not, or the artifact carries none."""


def worst(verdicts: Any) -> str:
    """``mismatch`` when any of ``verdicts`` is one, else ``match``."""
    return "mismatch" if "mismatch" in set(verdicts) else "match"


@attrs.frozen
class AuditScope:
    """What an audit compares: every layer type or the one named, the positions the angle errors
    are shown at, and a relative tolerance for ``inv_freq`` tables (``None``: from the dtype)."""

    layer_type: str | None = None
    positions: tuple[int, ...] = ()
    rtol: float | None = None

    @property
    def default(self) -> bool:
        """The audit ``ropekit repair`` decides from: every layer type, the tolerances from the dtype."""
        return self.layer_type is None and self.rtol is None


@attrs.frozen
class TableReport:
    """One served table (``where``, ``kind``, ``dtype``) judged against its ``declared`` table.

    ``comparisons`` has one measurement per declaration it was held against (longrope's regimes,
    an engine's lengths); ``difference`` (a mismatch's pairs, ratio and angle errors per position),
    ``composition`` (a multimodal table's axes), ``served_as`` (one line naming what was served),
    ``assigned`` (why a table no layer is known to read was paired with this layer type)."""

    where: str
    kind: str
    dtype: str
    declared: Mapping[str, Any]
    verdict: str
    comparisons: tuple[Mapping[str, Any], ...] = ()
    regime: str | None = None
    difference: Mapping[str, Any] | None = None
    composition: str | None = None
    served_as: str = ""
    attention_factor_unverified: str | None = None
    assigned: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The table's entry under ``layers.LT.tables`` of ``ropekit audit --json``."""
        found: dict[str, Any] = {"where": self.where, "kind": self.kind, "dtype": self.dtype,
                                 "declared": dict(self.declared)}
        if self.regime:
            found["regime"] = self.regime
        found["comparisons"] = [dict(comparison) for comparison in self.comparisons]
        if self.difference:
            found.update(self.difference)
        if self.composition is not None:
            found["composition"] = self.composition
        found["verdict"] = self.verdict
        if self.served_as:
            found["served_as"] = self.served_as
        if self.attention_factor_unverified is not None:
            found["attention_factor_unverified"] = self.attention_factor_unverified
        if self.assigned is not None:
            found["assigned"] = self.assigned
        return found


@attrs.frozen
class LayerEntry:
    """One layer of an artifact's per-layer plan: whether it ``rotates``, the ``cache`` (table or
    llama.cpp set) it reads, its ``rotary_dim`` and pairing, and the ``verdict`` with its ``reason``."""

    index: int
    layer_type: str | None
    rotates: bool
    cache: str | None
    rotary_dim: int | None
    interleaved: bool | None
    verdict: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The layer's entry under ``artifact.layers`` of ``ropekit audit --json``."""
        return {"index": self.index, "layer_type": self.layer_type, "rotates": self.rotates, "cache": self.cache,
                "rotary_dim": self.rotary_dim, "interleaved": self.interleaved, "verdict": self.verdict,
                "reason": self.reason}


@attrs.frozen
class LayerReport:
    """One layer type: its ``verdict``, the ``tables`` judged for it (``None``: the artifact carries
    none), ``served_as`` (the first mismatch's line), ``no_rope`` (a layer that must not rotate does),
    and whether ``ropekit repair`` can fix a mismatch (``repairable``, ``repairable_reason``)."""

    verdict: str
    tables: tuple[TableReport, ...] | None = ()
    served_as: str | None = None
    no_rope: bool = False
    repairable: bool | None = None
    repairable_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The layer type's entry under ``layers`` of ``ropekit audit --json``."""
        found: dict[str, Any] = {"verdict": self.verdict}
        if self.tables is not None:
            found["tables"] = [table.to_json() for table in self.tables]
        if self.no_rope:
            found["no_rope"] = True
        if self.served_as is not None:
            found["served_as"] = self.served_as
        if self.repairable is not None:
            found["repairable"] = self.repairable
            found["repairable_reason"] = self.repairable_reason
        return found


@attrs.frozen
class Judgement:
    """What a format's judgement found: per layer type, per layer (``entries``, ``None``: the
    format has no per-layer plan), and findings about the file (``flags``)."""

    layers: Mapping[str, LayerReport]
    entries: tuple[LayerEntry, ...] | None = None
    flags: tuple[str, ...] = ()
    verdict: str | None = None
    """The overall verdict (``None``: the worst of ``layers`` and ``entries``)."""


@attrs.frozen
class ArtifactFacts:
    """What the report says about the file: its path, format (``kind``), producer, where its tables
    were found, the engine facts it states, and its per-layer plan when it has one."""

    path: str
    kind: str
    producer: str
    tables: tuple[str, ...]
    engine: Mapping[str, Any] | None = None
    layers: tuple[LayerEntry, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``artifact`` object of ``ropekit audit --json``."""
        found: dict[str, Any] = {"path": self.path, "kind": self.kind, "producer": self.producer,
                                 "tables": list(self.tables)}
        if self.engine is not None:
            found["engine"] = dict(self.engine)
        if self.layers is not None:
            found["layers"] = [entry.to_json() for entry in self.layers]
        return found


@attrs.frozen
class AuditReport:
    """One artifact audited against one declaration (``ropekit audit``).

    ``verdict`` is ``match`` (every served table is the declared one), ``mismatch`` or ``no_table``
    (the artifact carries none: ``request`` says what to dump, ``reason`` why the reader found
    none). ``layers`` has one :class:`LayerReport` per layer type. ``repairable`` (a mismatch, once
    decided) says whether ``ropekit repair`` fixes it. ``extra`` holds what an engine's own audit
    adds (``modules``, ``position_ids``, ``vllm``). ``served`` is the artifact as read (not in the
    JSON), so a repair decides from this very report.
    """

    verdict: str
    artifact: ArtifactFacts
    layers: Mapping[str, LayerReport]
    scope: AuditScope = attrs.field(factory=AuditScope, eq=False, repr=False)
    served: ServedArtifact | None = attrs.field(default=None, eq=False, repr=False)
    engine_rules: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    request: str | None = None
    reason: str | None = None
    repairable: bool | None = None
    repairable_reason: str | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)

    def mismatching(self) -> dict[str, LayerReport]:
        """The layer types whose verdict is ``mismatch``, in the report's order."""
        return {name: layer for name, layer in self.layers.items() if layer.verdict == "mismatch"}

    def first_served_as(self) -> str:
        """The first mismatching layer type's ``served_as`` (empty when none says)."""
        return next((layer.served_as for layer in self.mismatching().values() if layer.served_as), "")

    def to_json(self) -> dict[str, Any]:
        """The ``ropekit audit --json`` document (docs/cli.md)."""
        found: dict[str, Any] = {"artifact": self.artifact.to_json(),
                                 "layers": {name: layer.to_json() for name, layer in self.layers.items()}}
        if self.engine_rules:
            found["engine_rules"] = list(self.engine_rules)
        if self.flags:
            found["flags"] = list(self.flags)
        found["verdict"] = self.verdict
        if self.request is not None:
            found["request"] = self.request
        if self.reason is not None:
            found["reason"] = self.reason
        if self.repairable is not None:
            found["repairable"] = self.repairable
            found["repairable_reason"] = self.repairable_reason
        found.update(self.extra)
        return found
