"""Repairing onnxruntime-genai ONNX packs: caches recomputed from the declared tables, per-layer
rotary wiring fixed with ``onnx``."""

from __future__ import annotations

import os
import shutil
from typing import Any

import attrs
import numpy as np

from ....errors import ArgumentError
from ....tables.table import ModelRope, RopeTable
from ...files import copy_tree, keep_mode
from ...fixing import NotRepairableError, RepairPlan, one_line, same_table
from ...format import Written
from ...report import AuditReport
from ...served import ServedArtifact
from .pack import CACHE_NAME, LAYER_TYPES, onnx_module, tensors
from .wiring import cache_layer_type, judge_wiring, rotations

__all__ = ["CacheFix", "OnnxEdits", "WireFix", "external_data_files", "plan_onnx", "write_onnx"]


@attrs.frozen
class CacheFix:
    """One cache tensor to recompute: rows from each ``(table, rows)`` segment, cos or sin."""

    name: str
    scope: str
    layer_type: str
    index: int
    segments: tuple[tuple[RopeTable, int], ...]

    def compute(self, dtype: Any) -> np.ndarray[Any, Any]:
        """The cache's new values in ``dtype`` (float32 for a dtype the tables are not computed in)."""
        wanted = dtype if dtype in (np.float16, np.float32, np.float64) else np.float32
        parts = [table.cos_sin(rows, layout="half", dtype=wanted)[self.index] for table, rows in self.segments]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


@attrs.frozen
class WireFix:
    """One layer's wiring edit: ``remove`` (bypass ``bypass``, turn off ``switch_off``'s
    ``do_rotary``) or ``rewire`` (``nodes`` read ``wanted`` instead of ``cache``)."""

    index: int
    layer_type: str
    action: str
    nodes: tuple[str, ...] = ()
    bypass: tuple[str, ...] = ()
    switch_off: tuple[str, ...] = ()
    cache: str = ""
    wanted: str = ""


@attrs.define
class OnnxEdits:
    """A pack's planned edits: caches to recompute (by scope and name) and layers to rewire."""

    caches: dict[tuple[str, str], CacheFix] = attrs.field(factory=dict)
    wiring: list[WireFix] = attrs.field(factory=list)


def plan_onnx(model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
    """The caches of every mismatching layer type recomputed, and every wrongly wired layer
    fixed, where that is a safe edit; refusals otherwise."""
    artifact = report.served
    assert artifact is not None  # a report made by audit_artifact
    if "graph_rotary" in artifact.engine:
        plan.refuse(None, "the rotary is computed in the graph (no baked cache): re-export it with a fixed exporter")
        return
    if report.verdict == "no_table":
        plan.refuse(None, report.reason or report.request or "the artifact carries no table")
        return
    edits = plan.edits = OnnxEdits()
    onnx = onnx_module()
    try:
        bare = onnx.load(artifact.path, load_external_data=False)
    except Exception as error:
        raise ArgumentError("served", f"{artifact.path}: not a readable ONNX model: {one_line(error)}") from None
    wrong: set[str] = set()
    for name, layer in report.layers.items():
        for table in layer.tables or ():
            if table.verdict != "mismatch":
                continue
            if table.kind == "inv_freq":
                plan.refuse(name, f"{table.where} is an inv_freq initializer: repair rewrites baked cos/sin caches "
                                  "only; re-export the model")
            else:
                wrong.add(name)
    for scope, name, tensor in tensors(bare.graph, "graph", onnx):
        match = CACHE_NAME.search(name)
        if match is None:
            continue
        suffix = match.group(2)
        stands_for = _cache_targets(model, suffix, list(tensor.dims))
        hit = [layer_type for layer_type in stands_for if layer_type in wrong]
        if not hit:
            continue  # a cache that audits right is left byte for byte
        try:
            fix = _cache_fix(model, scope, name, match.group(1), suffix, tensor, stands_for, onnx)
        except NotRepairableError as error:
            for layer_type in hit:
                plan.refuse(layer_type, str(error))
            continue
        edits.caches[(scope, name)] = fix
        for layer_type in stands_for:
            plan.note(layer_type, "its caches are recomputed from the declared table")
    _plan_wiring(model, artifact, bare.graph, plan, edits)


def _cache_targets(model: ModelRope, suffix: str | None, dims: list[int]) -> list[str]:
    """The layer types a cache stands for, as the audit pairs them: the one its name says, else
    every one of its width, else the first."""
    named = LAYER_TYPES.get(suffix or "")
    if named is not None and named in model.tables:
        return [named]
    width = dims[1] if len(dims) == 2 else -1
    return [name for name, table in model.tables.items() if len(table.inv_freq) == width] or [next(iter(model.tables))]


def _cache_fix(model: ModelRope, scope: str, name: str, which: str, suffix: str | None, tensor: Any,
               stands_for: list[str], onnx: Any) -> CacheFix:
    """How to recompute one cache from the declared table (same rows, one column per pair), or
    :class:`NotRepairableError` naming why the pack cannot hold it."""
    tables = [model.tables[layer_type] for layer_type in stands_for]
    table = tables[0]
    if any(not same_table(table, other) for other in tables[1:]):
        raise NotRepairableError(f"{name} serves layer types {', '.join(stands_for)}, whose declared tables differ: "
                                 "one cache cannot serve both; rebuild the pack with a cache per layer type")
    dims = [int(size) for size in tensor.dims]
    if len(dims) != 2 or dims[1] != len(table.inv_freq):
        raise NotRepairableError(f"{name} has shape {dims}; the declared {table.layer_type} table has "
                                 f"{len(table.inv_freq)} pairs: a cache of another width is not rewritten (the graph's "
                                 "rotary width would differ too); rebuild the pack")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    if dtype not in (np.float16, np.float32, np.float64):
        raise NotRepairableError(f"{name} is stored as {dtype}; repair rewrites float16, float32 and float64 caches")
    rows = dims[0]
    segments: tuple[tuple[RopeTable, int], ...] = ((table, rows),)
    if table.switch_at is not None and table.seq_len_dependent:
        switch, maximum = table.switch_at, table.geometry.max_position_embeddings
        long = table.at(switch + 1)
        if suffix == "large":
            segments = ((long, rows),)
        elif suffix != "small":
            if maximum is None or rows <= switch or rows != switch + maximum:
                raise NotRepairableError(
                    f"{name}: one cache of {rows} rows for a seq-len-dependent {table.rope_type} table (it switches at "
                    f"{switch}); the pack has no If branch (small/large) or DirectML concatenation ({switch} + "
                    f"{maximum} rows) to serve both regimes: rebuild it")
            segments = ((table, switch), (long, rows - switch))  # DirectML: short rows, then long
    return CacheFix(name, scope, table.layer_type, 0 if which == "cos" else 1, segments)


def _plan_wiring(model: ModelRope, artifact: ServedArtifact, graph: Any, plan: RepairPlan, edits: OnnxEdits) -> None:
    """Per mismatching layer: a NoPE layer's rotation removed, a layer moved to its own type's
    cache; anything else (no rotation where one is declared, another width or pairing) refused."""
    if not artifact.wiring:
        return
    by_name = {node.name: node for node in graph.node}
    outputs = {value.name for value in graph.output}
    names = sorted({tensor.name for tensor in graph.initializer}
                   | {name for node in graph.node for name in node.output})
    for entry, wiring in zip(judge_wiring(model, artifact.wiring), artifact.wiring, strict=True):
        if entry.verdict != "mismatch":
            continue
        owner = entry.layer_type or next(iter(model.tables))  # the layer type audit reports it under
        declared = model.for_layer(wiring.index)
        nodes = [by_name[name] for name in wiring.nodes if name in by_name]
        if declared is None:
            rotary = [node for node in nodes if node.op_type == "RotaryEmbedding"]
            switches = [node for node in nodes
                        if node.op_type != "RotaryEmbedding" and _int_attribute(node, "do_rotary")]
            if any(set(node.output) & outputs for node in rotary):
                plan.refuse(owner, f"{entry.reason}; its RotaryEmbedding output is a graph output, which cannot be "
                                   "bypassed: rebuild the pack")
            elif not rotary and not switches:
                plan.refuse(owner, f"{entry.reason}; no RotaryEmbedding node or do_rotary attribute to remove: "
                                   "rebuild the pack")
            else:
                edits.wiring.append(WireFix(wiring.index, owner, "remove", bypass=tuple(n.name for n in rotary),
                                            switch_off=tuple(n.name for n in switches)))
                plan.note(owner, f"layer {wiring.index}'s rotation is removed (a NoPE layer)")
            continue
        if not wiring.rotates:
            plan.refuse(owner, f"{entry.reason}; adding a rotation to a graph is not a safe edit: rebuild the pack")
            continue
        # every rotation of the layer counts (a query on its own cache, a key on the other type's)
        rotated = rotations(wiring)
        misread = {rotary.cache for rotary in rotated
                   if rotary.cache is not None and cache_layer_type(rotary.cache) not in (None, declared.layer_type)}
        refusal = (f"{entry.reason}; only removing a rotation or moving a layer to its own layer type's cache is a "
                   "safe graph edit: rebuild the pack")
        if len(misread) != 1:
            plan.refuse(owner, refusal)
            continue
        cache = misread.pop()
        wanted = next((name for name in names if (found := CACHE_NAME.search(name)) is not None
                       and found.group(1) == "cos" and cache_layer_type(name) == declared.layer_type), None)
        if wanted is None:
            plan.refuse(owner, f"{entry.reason}; the pack has no {declared.layer_type} cache to wire it to: rebuild "
                               "the pack")
            continue
        moved = [attrs.evolve(rotary, cache=wanted if rotary.cache == cache else rotary.cache) for rotary in rotated]
        rewired = attrs.evolve(wiring, cache=moved[0].cache, rotaries=tuple(moved))
        if judge_wiring(model, [rewired])[0].verdict != "match":  # another width, pairing, a missing rotation
            plan.refuse(owner, refusal)
            continue
        edits.wiring.append(WireFix(wiring.index, owner, "rewire", nodes=tuple(wiring.nodes), cache=cache,
                                    wanted=wanted))
        plan.note(owner, f"layer {wiring.index} is rewired from {cache} to {wanted}")


def _int_attribute(node: Any, name: str) -> int:
    return next((int(attribute.i) for attribute in node.attribute if attribute.name == name), 0)


def _sin_partner(name: str) -> str:
    match = CACHE_NAME.search(name)
    assert match is not None and match.group(1) == "cos"
    return name[: match.start(1)] + "sin" + name[match.end(1):]


def write_onnx(plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
    """The pack (or the single ``.onnx``) rewritten into ``work`` as ``plan`` says, and the moves that
    put it at ``target``. A single ``.onnx`` with external data gets its own ``<target>.data``
    (refused when that exists: repair never overwrites), so the copy never reads the original's."""
    extra = _data_target(source, target)
    staged = os.path.join(work, os.path.basename(target))
    changes = _rewrite(plan, artifact, source, staged, extra is not None)
    moves = [(staged, target)]
    if extra is not None:
        moves.insert(0, (os.path.join(work, os.path.basename(extra)), extra))
    return Written(tuple(changes), tuple(moves))


def _data_target(source: str, target: str) -> str | None:
    """For a single ``.onnx`` with external data: the copy's own data file, ``<target>.data``."""
    if os.path.isdir(source) or not external_data_files(source):
        return None
    extra = f"{target}.data"
    if os.path.lexists(extra):
        raise ArgumentError("out", f"{extra} exists: the copy's external data would go there and repair never "
                            "overwrites; give another --out")
    return extra


def external_data_files(model_file: str) -> list[str]:
    """The external data files ``model_file``'s tensors name (relative to its folder)."""
    onnx = onnx_module()
    bare = onnx.load(model_file, load_external_data=False)
    return sorted({entry.value for _, _, tensor in tensors(bare.graph, "graph", onnx)
                   for entry in tensor.external_data if entry.key == "location"})


def _rewrite(
    plan: RepairPlan, artifact: ServedArtifact, source: str, staged: str, single: bool
) -> list[dict[str, Any]]:
    """The pack (or the single ``.onnx``) rewritten at ``staged`` as ``plan`` says. A pack's
    external data keeps its file name in the copy's folder; a single ``.onnx``'s goes to
    ``<staged>.data`` (``single``), so the copy never reads the original's data."""
    edits = plan.edits
    assert isinstance(edits, OnnxEdits)
    onnx = onnx_module()
    from onnx import numpy_helper

    model_file = artifact.path
    locations = external_data_files(model_file)
    proto = onnx.load(model_file, load_external_data=True)
    changes: list[dict[str, Any]] = []
    for scope, name, tensor in tensors(proto.graph, "graph", onnx):  # the protos themselves
        fix = edits.caches.get((scope, name))
        if fix is None:
            continue
        old = numpy_helper.to_array(tensor)
        new = fix.compute(old.dtype).astype(old.dtype)
        if np.array_equal(new, old):
            continue
        tensor.CopyFrom(numpy_helper.from_array(new, tensor.name))
        changes.append({"what": f"{name} ({scope})", "shape": list(old.shape), "dtype": str(old.dtype),
                        "layer_type": fix.layer_type, "max_change": float(np.max(np.abs(
                            new.astype(np.float64) - old.astype(np.float64))))})
    changes += _apply_wiring(edits.wiring, proto.graph)
    if _checks(onnx.load(model_file, load_external_data=False), onnx):  # the original passes onnx.checker: so must it
        onnx.checker.check_model(proto)
    pack = os.path.isdir(source)
    if pack:
        os.makedirs(staged)
    target_model = os.path.join(staged, os.path.basename(model_file)) if pack else staged
    location = locations[0] if pack and locations else f"{os.path.basename(staged)}.data"
    if locations:
        onnx.save_model(proto, target_model, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=0)
        keep_mode(os.path.join(os.path.dirname(model_file), locations[0]),
                   os.path.join(os.path.dirname(target_model), location))
    else:
        onnx.save_model(proto, target_model)
    keep_mode(model_file, target_model)
    _loads(target_model)
    if pack:
        skip = {os.path.basename(model_file), *locations}
        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            if name in skip:
                continue
            if os.path.isdir(path):
                copy_tree(path, os.path.join(staged, name))
            else:
                shutil.copy2(path, os.path.join(staged, name))
    return changes


def _apply_wiring(fixes: list[WireFix], graph: Any) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    for fix in fixes:
        if fix.action == "remove":
            for node in [node for node in graph.node if node.name in fix.bypass]:
                _bypass(graph, node)
            for node in graph.node:
                if node.name in fix.switch_off:
                    for attribute in node.attribute:
                        if attribute.name == "do_rotary":
                            attribute.i = 0
            changes.append({"what": f"layer {fix.index}", "layer_type": fix.layer_type,
                            "change": "rotation removed (a NoPE layer)"})
            continue
        swap = {fix.cache: fix.wanted, _sin_partner(fix.cache): _sin_partner(fix.wanted)}
        for node in graph.node:
            if node.name in fix.nodes:
                for position, name in enumerate(node.input):
                    if name in swap:
                        node.input[position] = swap[name]
        changes.append({"what": f"layer {fix.index}", "layer_type": fix.layer_type,
                        "change": f"rewired from {fix.cache} to {fix.wanted}"})
    return changes


def _checks(proto: Any, onnx: Any) -> bool:
    try:
        onnx.checker.check_model(proto)
    except Exception:  # onnx.checker.ValidationError: onnxruntime contrib ops are unknown to onnx
        return False
    return True


def _loads(path: str) -> None:
    """The written model loads in onnxruntime (when installed): a graph edit left it runnable."""
    try:
        import onnxruntime
    except ImportError:
        return
    try:
        onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as error:
        text = str(error)
        if "DmlExecutionProvider" in text or "CUDA" in text or "not implemented" in text.lower():
            return  # built for another execution provider: onnxruntime's CPU build cannot say
        raise NotRepairableError(f"the rewritten model does not load in onnxruntime: {one_line(error)}") from None


def _bypass(graph: Any, node: Any) -> None:
    """Remove ``node``, feeding its consumers its first input instead (planned only when its
    output is not a graph output)."""
    source, result = node.input[0], node.output[0]
    for other in graph.node:
        for position, name in enumerate(other.input):
            if name == result:
                other.input[position] = source
    graph.node.remove(node)
