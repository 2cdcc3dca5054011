"""Repairing an OpenVINO IR: the rope constants' bytes rewritten in a copy of the ``.bin`` (same offsets,
shapes and element types: the ``.xml`` and every other byte unchanged). A baked ``inv_freq`` gets the
declared table, the attention-factor ``Multiply`` Consts the declared factor, longrope's factor vectors
``1 / (inv_freq * base_powers)`` for each regime and its threshold the declared switch. A declaration
that depends on the length where the trace froze one branch (dynamic NTK) is refused: no constant holds
the other branch."""

from __future__ import annotations

import os
import shutil
from typing import Any

import attrs
import numpy as np

from ....tables.table import ModelRope, RopeTable
from ...files import copy_tree, keep_mode
from ...fixing import RepairPlan, same_table
from ...format import Written
from ...report import AuditReport
from ...served import ServedArtifact
from .ir import ConstRef, IrGraph, Rotary, find_rotaries, read_graph

__all__ = ["OpenVinoFix", "plan_openvino", "write_openvino"]

WHAT_WORKS = "what works: feed cos/sin from the host (`ropekit export CONFIG` writes them)"
_NUMPY = {"f32": "<f4", "f16": "<f2", "i64": "<i8", "i32": "<i4"}


@attrs.frozen
class OpenVinoFix:
    """Bytes to write into the ``.bin`` at given offsets, and what each write changes."""

    writes: tuple[tuple[int, bytes], ...]
    changes: tuple[dict[str, Any], ...]


def _declared(model: ModelRope, rotary: Rotary) -> tuple[RopeTable | None, str]:
    """The one table the layers reading ``rotary`` declare (``None`` and why when there is not one)."""
    names = {model.layer_types[index] for index in rotary.layers if index < len(model.layer_types)}
    tables = [model.tables[name] for name in model.tables if name in names] or (
        list(model.tables.values()) if len(model.tables) == 1 else [])
    if not tables:
        return None, "the graph does not say which layers read this rotary, and the config declares several tables"
    if any(not same_table(tables[0], other) for other in tables[1:]):
        return None, f"layers {list(rotary.layers)} read one rotary but the config declares different tables for them"
    return tables[0], ""


def _encode(ref: ConstRef, values: np.ndarray[Any, Any]) -> bytes | None:
    dtype = _NUMPY.get(ref.element_type)
    if dtype is None:
        return None
    data = np.asarray(values).astype(dtype).tobytes()
    return data if len(data) == ref.size else None


def plan_openvino(model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
    """The Consts to rewrite, or OpenVINO's reason they cannot serve the declaration."""
    artifact = report.served
    assert artifact is not None  # a report made by audit_artifact
    if report.verdict == "no_table":
        plan.refuse(None, f"OpenVINO IR: {report.reason or report.request or 'no rotary found'}")
        return
    graph = read_graph(artifact.path)
    writes: dict[ConstRef, bytes] = {}
    changes: list[dict[str, Any]] = []
    for rotary in find_rotaries(graph):
        table, why = _declared(model, rotary)
        if table is None:
            plan.refuse(None, f"OpenVINO IR: {why}")
            continue
        name = table.layer_type
        planned = _plan_rotary(graph, rotary, table, plan)
        if planned is None:
            continue
        for ref, (data, change) in planned.items():
            if not _same_values(graph, ref, data):
                writes[ref] = data
                changes.append({"layer_type": name, "what": f"Const {ref.name!r} (offset {ref.offset}, "
                                f"{ref.element_type} {list(ref.shape)})", "change": change})
                plan.note(name, f"Const {ref.name!r}: {change}")
    if plan.refusals:
        return
    shared = _shared(graph, writes)
    if shared:
        plan.refuse(None, f"OpenVINO IR: {shared}")
        return
    plan.edits = OpenVinoFix(tuple((ref.offset, data) for ref, data in writes.items()), tuple(changes))
    for name in report.mismatching():
        plan.note(name, "served as declared once the rope constants above are rewritten")


def _plan_rotary(graph: IrGraph, rotary: Rotary, table: RopeTable,
                 plan: RepairPlan) -> dict[ConstRef, tuple[bytes, str]] | None:
    """The new bytes of each rope Const of ``rotary`` for ``table`` (``None``: refused in ``plan``)."""
    name = table.layer_type
    found: dict[ConstRef, tuple[bytes, str]] = {}

    def refuse(why: str) -> None:
        plan.refuse(name, f"OpenVINO IR cannot serve {table.rope_type}: {why}")

    if table.seq_len_dependent and rotary.select is None:
        refuse(f"the trace froze transformers' seq_len > "
               f"{table.switch_at} branch at the dummy input's length and baked one inv_freq Const "
               f"({rotary.inv_freq.name if rotary.inv_freq else 'none'}); no constant holds the other "
               f"branch, so rewriting constants cannot serve it; {WHAT_WORKS}")
        return None
    if rotary.select is None and rotary.inv_freq is None:
        refuse(f"the graph computes its frequencies from no single constant this repair rewrites; {WHAT_WORKS}")
        return None
    if table.attention_factor != 1.0 and not rotary.factors:
        refuse(f"the graph applies no attention-factor Multiply after Cos/Sin, and the "
               f"config declares {table.attention_factor:.6g}: no constant to rewrite; {WHAT_WORKS}")
        return None
    for ref in rotary.factors:
        data = _encode(ref, np.full(ref.shape, table.attention_factor))
        if data is None:
            refuse(f"the attention-factor Const {ref.name!r} is {ref.element_type}")
            return None
        found[ref] = (data, f"attention factor {table.attention_factor:.6g}")
    if rotary.inv_freq is not None:
        ref = rotary.inv_freq
        data = _encode(ref, table.inv_freq.reshape(ref.shape))
        if data is None:
            refuse(f"the inv_freq Const {ref.name!r} holds {ref.size} bytes of "
                   f"{ref.element_type}, not {len(table.inv_freq)} frequencies")
            return None
        found[ref] = (data, f"the declared {table.rope_type} inv_freq ({len(table.inv_freq)} pairs)")
        return found
    select = rotary.select or {}
    powers = select.get("base_powers")
    if powers is None:
        refuse(f"longrope's switch is not followed by the base powers this repair knows; "
               f"{WHAT_WORKS}")
        return None
    base = graph.value(powers).astype(np.float64).reshape(-1)
    switch = table.switch_at
    regimes = {"short": table.at(switch) if switch else table, "long": table.at(switch + 1) if switch else table}
    for regime, declared in regimes.items():
        ref = select[regime]
        data = _encode(ref, (1.0 / (declared.inv_freq * base)).reshape(ref.shape))
        if data is None or declared.attention_factor != table.attention_factor:
            refuse(f"longrope's {regime} factors cannot be written into {ref.name!r}")
            return None
        found[ref] = (data, f"longrope's {regime} factors (1 / (inv_freq * base powers))")
    if switch is not None:
        threshold = select["threshold"]
        data = _encode(threshold, np.full(threshold.shape, switch))
        if data is None:
            refuse(f"longrope's threshold Const {threshold.name!r} is {threshold.element_type}")
            return None
        found[threshold] = (data, f"longrope's switch at {switch} positions")
    return found


def _same_values(graph: IrGraph, ref: ConstRef, data: bytes) -> bool:
    """Whether ``data`` holds ``ref``'s values already (to an f32 rounding: a right constant is left alone)."""
    current = graph.value(ref).astype(np.float64).reshape(-1)
    wanted = np.frombuffer(data, dtype=_NUMPY[ref.element_type]).astype(np.float64)
    return bool(np.allclose(current, wanted, rtol=1e-6, atol=0.0))


def _shared(graph: IrGraph, writes: dict[ConstRef, bytes]) -> str:
    """Why the writes would change a Const outside the rotary (OpenVINO shares equal constants' bytes)."""
    rewritten = {ref.id for ref in writes}
    for ref, data in writes.items():
        for other in writes:
            if other.id != ref.id and other.offset == ref.offset and writes[other] != data:
                return f"Consts {ref.name!r} and {other.name!r} share their bytes but need different values"
        for layer in graph.layers.values():
            if layer.type != "Const" or layer.id in rewritten:
                continue
            other = graph.const(layer.id)
            if other.size and other.offset < ref.offset + ref.size and ref.offset < other.offset + other.size:
                return (f"the rope Const {ref.name!r} shares its bytes in the .bin with {other.name!r}, which is not a "
                        "rope constant: rewriting them would change it too")
    return ""


def write_openvino(plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
    """The IR copied into ``work`` with the planned bytes written into its ``.bin``."""
    fix = plan.edits
    assert isinstance(fix, OpenVinoFix)
    graph_xml, graph_bin = str(artifact.engine["xml"]), str(artifact.engine["bin"])
    staged = os.path.join(work, os.path.basename(target))
    if os.path.isdir(source):
        copy_tree(source, staged)
        weights = os.path.join(staged, os.path.relpath(graph_bin, source))
        moves: tuple[tuple[str, str], ...] = ((staged, target),)
    else:
        shutil.copy2(graph_xml, staged)
        weights = os.path.splitext(staged)[0] + ".bin"
        shutil.copy2(graph_bin, weights)
        moves = ((weights, os.path.splitext(target)[0] + ".bin"), (staged, target))
    with open(weights, "r+b") as file:
        for offset, data in fix.writes:
            file.seek(offset)
            file.write(data)
    keep_mode(graph_bin, weights)
    return Written(fix.changes, moves)
