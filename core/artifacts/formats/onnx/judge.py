"""Judging an ONNX pack: its caches (or the rotary its graph computes) by the neutral judgement, then
each attention layer's wiring against the declared per-layer plan; a mismatching layer marks its
layer type (a NoPE layer's, its own type's)."""

from __future__ import annotations

from ....tables.table import ModelRope
from ...judge import Layers, judge_tables
from ...report import AuditScope, Judgement, worst
from ...served import ServedArtifact
from .wiring import judge_wiring

__all__ = ["judge_onnx"]


def judge_onnx(model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
    """The pack's tables, and its per-layer wiring when it was read."""
    layers = Layers()
    tables = judge_tables(model, artifact, scope, layers=layers)
    if not artifact.wiring:
        return tables
    entries = judge_wiring(model, artifact.wiring)
    if scope.layer_type is not None:
        entries = [entry for entry in entries if entry.layer_type in (scope.layer_type, None)]
    flags = list(tables.flags)
    count = len(model.layer_types)
    if count and count != len(entries) and scope.layer_type is None:
        flags.append(f"the config declares {count} layers; the graph has {len(entries)} attention layers")
    for entry in entries:
        if entry.verdict == "mismatch":
            layers.mark(entry.layer_type or next(iter(model.tables)), entry.reason)
    verdicts = layers.verdicts() | {entry.verdict for entry in entries} | {tables.verdict or "match"}
    return Judgement(layers.reports(), tuple(entries), tuple(flags), worst(verdicts))
