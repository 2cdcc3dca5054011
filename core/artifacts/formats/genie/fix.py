"""Repairing a Genie ``genie_config.json``: the keys Genie builds cos/sin from, set to the declared table
where its schema can say it (plain RoPE at an integer ``rope-theta`` over the whole head, and llama3's
``rope-scaling`` block); refused, naming the missing key, for every other scaling. Only
``engine.model.positional-encoding`` and ``QnnHtp``'s ``rope-theta`` / ``pos-id-dim`` change."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import attrs

from ....tables.table import ModelRope, RopeTable
from ...files import copy_tree, keep_mode
from ...fixing import RepairPlan, same_table
from ...format import Written
from ...report import AuditReport
from ...served import ServedArtifact
from .config import CONFIG_NAME, config_path, load_config

__all__ = ["GenieFix", "plan_genie", "write_genie"]

WHAT_WORKS = ("what works: feed cos/sin from the host (the bundle's QNN graphs take them as inputs); "
              "`ropekit export CONFIG` writes them")


@attrs.frozen
class GenieFix:
    """The rope keys to write: the ``positional-encoding`` block (``None``: none) and ``QnnHtp``'s keys
    (``None``: removed)."""

    encoding: dict[str, Any] | None
    backend: dict[str, Any] | None
    changes: tuple[dict[str, Any], ...]


def _unsayable(model: ModelRope, table: RopeTable) -> str | None:
    """Why Genie's keys cannot say ``table`` (``None``: they can)."""
    if len(model.tables) > 1 and not all(same_table(table, other) for other in model.tables.values()):
        bases = ", ".join(f"{name} {other.rope_type} at base {other.geometry.theta:g}"
                          for name, other in model.tables.items())
        return (f"the config declares a table per layer type ({bases}); Genie's schema has one rope-theta for every "
                "layer and no key for per-layer bases")
    if table.rope_type not in ("default", "llama3"):
        keys = {"linear": "a linear factor", "yarn": "yarn's ramp and attention factor",
                "longrope": "longrope's per-pair factors, their switch and attention factor",
                "dynamic": "dynamic NTK's length-dependent base"}.get(table.rope_type,
                                                                      f"{table.rope_type}'s parameters")
        return (f"Genie's schema has no key for {keys} (only rope-theta, pos-id-dim / rope-dim and llama3's "
                "rope-scaling)")
    if table.rotary_dim != table.head_dim:
        return (f"partial rotary ({table.rotary_dim} of {table.head_dim} channels): Genie's schema has no key saying "
                "which channels rotate (qai-hub-models writes pos-id-dim = head_dim / 2, and whether Genie rotates "
                "only the first 2 * pos-id-dim channels is not documented)")
    if table.attention_factor != 1.0:
        return f"Genie's schema has no key for an attention factor ({table.attention_factor:.6g})"
    if float(table.geometry.theta) != int(table.geometry.theta):
        return f"rope_theta {table.geometry.theta!r} is not an integer, and Genie's rope-theta is written as one"
    return None


def plan_genie(model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
    """The keys that make Genie build the declared table, or the key its schema lacks."""
    artifact = report.served
    assert artifact is not None  # a report made by audit_artifact
    if report.verdict == "no_table":
        plan.refuse(None, f"Genie: {report.reason or report.request or 'the file names no table'}")
        return
    if not model.tables:
        plan.refuse(None, f"Genie: the model applies no RoPE; {WHAT_WORKS}")
        return
    table = model.tables.get("full_attention", next(iter(model.tables.values())))  # _unsayable checks the others
    why = _unsayable(model, table)
    if why is not None:
        plan.refuse(None, f"Genie cannot serve {table.rope_type} from genie_config.json: {why}; {WHAT_WORKS}")
        return
    pairs, theta = len(table.inv_freq), int(table.geometry.theta)
    engine = artifact.engine
    if table.rope_type == "llama3":
        params = table.params
        block = {"rope-type": "llama3", "factor": params["factor"], "low-freq-factor": params["low_freq_factor"],
                 "high-freq-factor": params["high_freq_factor"],
                 "original-max-position-embeddings": params["original_max_position_embeddings"]}
        fix = GenieFix({"type": "rope", "rope-dim": pairs, "rope-theta": theta, "rope-scaling": block}, None, (
            {"layer_type": table.layer_type, "what": "engine.model.positional-encoding",
             "change": f"llama3's rope-scaling block added (rope-dim {pairs}, rope-theta {theta}); QnnHtp rope-theta / "
                       "pos-id-dim removed, as create_genie_config writes it"},))
    elif engine.get("form") == "positional-encoding":
        fix = GenieFix({"type": "rope", "rope-dim": pairs, "rope-theta": theta}, None, (
            {"layer_type": table.layer_type, "what": "engine.model.positional-encoding",
             "change": f"rope-dim {engine.get('pairs')} -> {pairs}, rope-theta {engine.get('rope_theta')} -> {theta}, "
                       "no rope-scaling"},))
    else:
        fix = GenieFix(None, {"pos-id-dim": pairs, "rope-theta": theta}, (
            {"layer_type": table.layer_type, "what": "engine.backend.QnnHtp",
             "change": f"pos-id-dim {engine.get('pairs')} -> {pairs}, rope-theta {engine.get('rope_theta')} -> "
                       f"{theta}"},))
    plan.edits = fix
    for name in report.mismatching():
        plan.note(name, fix.changes[0]["change"])


def rewritten(config: dict[str, Any], fix: GenieFix) -> dict[str, Any]:
    """``config`` with ``fix``'s keys: every other key as it was, in its place."""
    found = copy.deepcopy(config)
    engine = found["dialog"]["engine"]
    backend = engine.setdefault("backend", {}).setdefault("QnnHtp", {})
    model = engine.setdefault("model", {})
    if fix.encoding is not None:
        model["positional-encoding"] = fix.encoding
        backend.pop("pos-id-dim", None)
        backend.pop("rope-theta", None)
    else:
        model.pop("positional-encoding", None)
        backend.update(fix.backend or {})
    return found


def write_genie(plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
    """The rewritten file (a folder: the bundle copied, its ``genie_config.json`` rewritten) in ``work``."""
    fix = plan.edits
    assert isinstance(fix, GenieFix)
    staged = os.path.join(work, os.path.basename(target))
    original = config_path(source)
    if os.path.isdir(source):
        copy_tree(source, staged)
        written = os.path.join(staged, CONFIG_NAME)
    else:
        written = staged
    with open(written, "w", encoding="utf-8") as file:
        file.write(json.dumps(rewritten(load_config(original), fix), indent=4) + "\n")
    keep_mode(original, written)
    return Written(fix.changes, ((staged, target),))
