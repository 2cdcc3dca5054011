"""Deciding a repair from the audit's report: :func:`plan_repair` (what would be rewritten, or why
not; the artifact's format plans it) and the audit's ``repairable`` from the same decision
(:func:`annotate`)."""

from __future__ import annotations

import attrs

from ...tables.table import ModelRope
from ..audit import audit_artifact
from ..fixing import RepairPlan
from ..format import format_of
from ..report import AuditReport

__all__ = ["annotate", "plan_repair", "repairability"]


def plan_repair(model: ModelRope, report: AuditReport) -> RepairPlan:
    """What :func:`repair` does to the artifact ``report`` audited (with the default tolerances, as
    :func:`repair` decides from): the same function decides ``audit``'s prediction and the repair
    itself, so the two cannot disagree."""
    plan = RepairPlan()
    if report.verdict == "match":
        return plan
    assert report.served is not None, "a report made by audit_artifact"
    format_of(report.served).plan(model, report, plan)
    if plan.repairable:  # every mismatching layer type must be accounted for
        for name, layer in report.mismatching().items():
            if name not in plan.notes:
                plan.refuse(name, f"its mismatch ({layer.served_as or 'unidentified'}) is not one repair rewrites")
    return plan


def repairability(model: ModelRope, report: AuditReport) -> tuple[bool, dict[str, tuple[bool, str]]]:
    """Whether ``repair`` fixes the artifact ``report`` audited (the first value: exactly when it
    would repair it), and per mismatching layer type ``(repairable, reason)``.

    A report made with other tolerances or for one layer type is not the one repair decides from:
    repair's own audit is computed then; the default report is decided from as is."""
    assert report.served is not None, "a report made by audit_artifact"
    basis = report if report.scope.default else audit_artifact(model, report.served)  # repair's own audit
    try:
        plan = plan_repair(model, basis)
    except Exception as error:  # an artifact the audit read but repair cannot open: audit still answers
        plan = RepairPlan()
        plan.refuse(None, f"repair cannot read it: {type(error).__name__}: {error}")
    if basis.verdict == "match":
        plan.refuse(None, "with the default tolerances it already audits as match: repair leaves it unchanged")
    found: dict[str, tuple[bool, str]] = {}
    for name in report.mismatching():
        if name in plan.refusals or None in plan.refusals:
            found[name] = (False, plan.refusals.get(name) or plan.refusals[None])
        elif plan.refusals:
            found[name] = (False, f"repair rewrites the artifact whole or not at all, and {plan.reason}")
        else:
            found[name] = (True, "; ".join(plan.notes.get(name, ())) or "repair rewrites it")
    return plan.repairable, found


def annotate(model: ModelRope, report: AuditReport) -> AuditReport:
    """``report`` with ``repairable`` / ``repairable_reason`` for a mismatch: per mismatching layer type
    and at the top level (exactly whether ``repair`` repairs it)."""
    if report.verdict != "mismatch":
        return report
    everything, found = repairability(model, report)
    layers = {name: attrs.evolve(layer, repairable=found[name][0], repairable_reason=found[name][1])
              if name in found else layer for name, layer in report.layers.items()}
    return attrs.evolve(report, layers=layers, repairable=everything,
                        repairable_reason="; ".join(f"{name}: {why}" for name, (_, why) in found.items()))
