"""Deciding a repair: :func:`plan_repair` (what would be rewritten, or why not), and the audit's
``repairable`` from the same decision."""

from __future__ import annotations

from typing import Any

from ...tables.table import ModelRope
from ..audit import audit_artifact
from ..served import ServedArtifact
from .gguf_fix import plan_gguf
from .onnx_fix import plan_onnx
from .plans import RepairPlan

__all__ = ["annotate", "plan_repair", "repairability"]


def plan_repair(model: ModelRope, artifact: ServedArtifact, document: dict[str, Any]) -> RepairPlan:
    """What :func:`repair` does to ``artifact`` given its audit ``document`` (made with the default
    tolerances, as :func:`repair` makes it): the same function decides ``audit``'s prediction and
    the repair itself, so the two cannot disagree."""
    plan = RepairPlan()
    if artifact.kind == "onnx" and "graph_rotary" in artifact.engine:
        plan.refuse(None, "the rotary is computed in the graph (no baked cache): re-export it with a fixed exporter")
    elif artifact.kind not in ("onnx", "gguf"):
        plan.refuse(None, f"{artifact.kind} artifacts are not repaired: {_unsupported(artifact)}")
    elif document["verdict"] == "no_table":
        plan.refuse(None, str(document.get("reason") or document.get("request") or "the artifact carries no table"))
    elif document["verdict"] == "match":
        return plan
    elif artifact.kind == "onnx":
        plan_onnx(model, artifact, document, plan)
    else:
        plan_gguf(model, artifact, document, plan)
    if plan.repairable:  # every mismatching layer type must be accounted for
        for name, layer in document["layers"].items():
            if layer.get("verdict") == "mismatch" and name not in plan.notes:
                plan.refuse(name, f"its mismatch ({layer.get('served_as', 'unidentified')}) is not one repair rewrites")
    return plan


def repairability(
    model: ModelRope, artifact: ServedArtifact, document: dict[str, Any], *, default: bool = False
) -> tuple[bool, dict[str, tuple[bool, str]]]:
    """Whether ``repair`` fixes ``artifact`` (the first value: exactly when it would repair it),
    and per mismatching layer type of the audit ``document`` ``(repairable, reason)``.

    ``default``: ``document`` was made as :func:`repair` makes its own (the default tolerances, every
    layer type), so the decision is taken from it and the audit is not computed a second time."""
    basis = document if default else audit_artifact(model, artifact)  # repair's own audit
    try:
        plan = plan_repair(model, artifact, basis)
    except Exception as error:  # an artifact the audit read but repair cannot open: audit still answers
        plan = RepairPlan()
        plan.refuse(None, f"repair cannot read it: {type(error).__name__}: {error}")
    if basis["verdict"] == "match":
        plan.refuse(None, "with the default tolerances it already audits as match: repair leaves it unchanged")
    found: dict[str, tuple[bool, str]] = {}
    for name, layer in document["layers"].items():
        if layer.get("verdict") != "mismatch":
            continue
        if name in plan.refusals or None in plan.refusals:
            found[name] = (False, plan.refusals.get(name) or plan.refusals[None])
        elif plan.refusals:
            found[name] = (False, f"repair rewrites the artifact whole or not at all, and {plan.reason}")
        else:
            found[name] = (True, "; ".join(plan.notes.get(name, ())) or "repair rewrites it")
    return plan.repairable, found


def annotate(
    model: ModelRope, artifact: ServedArtifact, document: dict[str, Any], *, default: bool = False
) -> dict[str, Any]:
    """``document`` (an audit) with ``repairable`` / ``repairable_reason`` for a mismatch: per
    mismatching layer type and at the top level (exactly whether ``repair`` repairs it).
    ``default``: the document is the default audit (see :func:`repairability`): it is decided from as is."""
    if document.get("verdict") != "mismatch":
        return document
    everything, found = repairability(model, artifact, document, default=default)
    for name, (ok, why) in found.items():
        document["layers"][name]["repairable"] = ok
        document["layers"][name]["repairable_reason"] = why
    document["repairable"] = everything
    document["repairable_reason"] = "; ".join(f"{name}: {why}" for name, (_, why) in found.items())
    return document


def _unsupported(artifact: ServedArtifact) -> str:
    if artifact.kind == "executorch":
        return "an ExecuTorch program's constants are not rewritten; re-export it from a fixed model"
    return "fix the model or exporter that wrote it, then dump again"
