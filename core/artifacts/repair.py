"""Repair what an engine serves: a corrected copy of an ONNX pack or a GGUF, never the original.

One function, :func:`plan_repair`, decides what a repair would rewrite, or why the format or the
engine's own rules cannot serve the declaration; ``ropekit audit``'s ``repairable`` is that
decision, and ``ropekit repair`` carries it out. Every repair is then proved: the copy is written
into a hidden temporary folder beside ``--out``, read back by the readers ``ropekit audit`` uses and
audited; only a copy that audits as ``match`` is moved into place (never over an existing path),
and the moved copy is audited again. Anything else leaves no output behind.

- **ONNX packs** (onnxruntime-genai): every ``cos_cache``/``sin_cache`` (float32 or float16; the
  longrope ``If`` branches' small/large caches; DirectML's concatenated cache; Gemma-3's
  global/local) recomputed from the declared table with the same shape, dtype, one column per
  pair and the attention factor multiplied in; a NoPE layer's rotation removed (its
  ``RotaryEmbedding`` nodes bypassed, or its attention op's ``do_rotary`` turned off), a layer
  wired to the other layer type's cache rewired; external data rewritten into one file beside the
  copy (``<out>.data`` for a single ``.onnx``); every other file copied.
- **GGUF**: the keys and rope tensors that make llama.cpp's rules serve the declared tables (base,
  scaling keys, ``rope.scaling.attn_factor``, ``rope_freqs`` factors where the architecture's
  loader creates the tensor, the sliding layers' ``rope.freq_base_swa``), every other key and
  tensor copied byte for byte. The planned keys are first run through the reader ``audit`` uses;
  where llama.cpp's own rule cannot serve the declaration whatever the file says (ggml always
  truncates yarn's correction range, a loader that ignores the file's betas, longrope regimes
  chosen by n_ctx, which layers rotate or share a set), the repair is refused naming the rule.
- Rotary kept in a graph, ExecuTorch programs and array dumps are refused by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np

from ..contract.scheme import plain_inv_freq
from ..errors import ArgumentError, RopekitError
from ..tables.table import ModelRope, RopeTable
from .audit import audit_artifact
from .read import read_artifact
from .served import ServedArtifact

__all__ = ["NotRepairableError", "RepairPlan", "RepairResult", "annotate", "plan_repair", "repair", "repairability"]

VERDICTS = ("repaired", "unchanged", "not_repairable")

_ROPE_FREQS_LOADERS = frozenset({"llama", "exaone", "arcee", "mistral3", "granite", "llama4", "exaone4"})
"""Architectures whose loader creates ``rope_freqs`` (``LLM_TENSOR_ROPE_FREQS`` in
``src/models/<arch>.cpp``; llama, granite and mistral3 only when the scaling type is not longrope,
which the repair then removes). Any other architecture's loader would refuse a file carrying one
("wrong number of tensors")."""
_FACTOR_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")


class NotRepairableError(RopekitError):
    """The artifact cannot be made to serve the declared table in its own format (exit 1)."""


@attrs.frozen
class RepairResult:
    """What ``ropekit repair`` did: ``verdict`` (``repaired``, ``unchanged``, ``not_repairable``),
    ``out`` (the written path, or ``None``), ``changes`` (what was rewritten, per layer type or
    layer) and ``reason`` (one line)."""

    verdict: str
    out: str | None
    changes: tuple[dict[str, Any], ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The ``ropekit repair --json`` object."""
        return {"verdict": self.verdict, "out": self.out, "changes": list(self.changes), "reason": self.reason}


# ---- the plan: one decision for audit's ``repairable`` and for repair -------------------------------------


@attrs.frozen
class _CacheFix:
    """One cache tensor to recompute: rows from each ``(table, rows)`` segment, cos or sin."""

    name: str
    scope: str
    layer_type: str
    index: int
    segments: tuple[tuple[RopeTable, int], ...]

    def compute(self, dtype: Any) -> np.ndarray[Any, Any]:
        wanted = dtype if dtype in (np.float16, np.float32, np.float64) else np.float32
        parts = [table.cos_sin(rows, layout="half", dtype=wanted)[self.index] for table, rows in self.segments]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


@attrs.frozen
class _WireFix:
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


@attrs.frozen
class _GgufFix:
    """Keys to set (``None``: remove) and rope tensors to write (``None``: drop)."""

    keys: dict[str, Any]
    tensors: dict[str, Any]
    changes: tuple[dict[str, Any], ...]


@attrs.define
class RepairPlan:
    """What :func:`repair` would rewrite in one artifact, or why it cannot.

    ``refusals`` maps a layer type (``None``: the artifact as a whole) to why it cannot be made to
    serve the declared table; ``notes`` maps a layer type to what would be rewritten. The plan is
    repairable when there is no refusal.
    """

    refusals: dict[str | None, str] = attrs.field(factory=dict)
    notes: dict[str, list[str]] = attrs.field(factory=dict)
    caches: dict[tuple[str, str], _CacheFix] = attrs.field(factory=dict)
    wiring: list[_WireFix] = attrs.field(factory=list)
    gguf: _GgufFix | None = None

    @property
    def repairable(self) -> bool:
        return not self.refusals

    @property
    def reason(self) -> str:
        """The refusals in one line (one reason alone when they all say the same)."""
        reasons = list(dict.fromkeys(self.refusals.values()))
        if len(reasons) == 1:
            return reasons[0]
        return "; ".join(f"{name or 'the artifact'}: {why}" for name, why in self.refusals.items())

    def refuse(self, layer_type: str | None, why: str) -> None:
        self.refusals.setdefault(layer_type, why)

    def note(self, layer_type: str, what: str) -> None:
        found = self.notes.setdefault(layer_type, [])
        if what not in found:
            found.append(what)


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
        _plan_onnx(model, artifact, document, plan)
    else:
        _plan_gguf(model, artifact, document, plan)
    if plan.repairable:  # every mismatching layer type must be accounted for
        for name, layer in document["layers"].items():
            if layer.get("verdict") == "mismatch" and name not in plan.notes:
                plan.refuse(name, f"its mismatch ({layer.get('served_as', 'unidentified')}) is not one repair rewrites")
    return plan


def repairability(
    model: ModelRope, artifact: ServedArtifact, document: dict[str, Any]
) -> tuple[bool, dict[str, tuple[bool, str]]]:
    """Whether ``repair`` fixes ``artifact`` (the first value: exactly when it would repair it),
    and per mismatching layer type of the audit ``document`` ``(repairable, reason)``."""
    basis = audit_artifact(model, artifact)  # repair's own audit: the default tolerances, every layer type
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


def annotate(model: ModelRope, artifact: ServedArtifact, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (an audit) with ``repairable`` / ``repairable_reason`` for a mismatch: per
    mismatching layer type and at the top level (exactly whether ``repair`` repairs it)."""
    if document.get("verdict") != "mismatch":
        return document
    everything, found = repairability(model, artifact, document)
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


def _same(one: RopeTable, other: RopeTable) -> bool:
    return one is other or (one.inv_freq.shape == other.inv_freq.shape and bool(np.array_equal(
        one.inv_freq, other.inv_freq)) and one.attention_factor == other.attention_factor
        and one.switch_at == other.switch_at)


# ---- repair -------------------------------------------------------------------------------------------------


def repair(model: ModelRope, served: str | os.PathLike[str], out: str | os.PathLike[str], *,
           n_ctx: int | None = None) -> RepairResult:
    """Write a copy of ``served`` at ``out`` that serves ``model``'s declared tables.

    ``unchanged`` (nothing written) when it already does; ``not_repairable`` (nothing written)
    when its format or engine cannot express them; ``repaired`` once the copy, moved into place,
    audits as ``match``. Invalid input (``out`` existing or appearing meanwhile, inside
    ``served``, a symlink, an unreadable artifact) raises :class:`~ropekit.ArgumentError`; the
    original is never opened for writing.
    """
    source, target = _checked_paths(os.fspath(served), os.fspath(out))
    artifact = read_artifact(source, n_ctx=n_ctx)
    document = audit_artifact(model, artifact)
    if document["verdict"] == "match":
        return RepairResult("unchanged", None, (), "it already serves the declared table")
    try:
        plan = plan_repair(model, artifact, document)
    except RopekitError:
        raise
    except Exception as error:
        raise ArgumentError("served", f"{source}: cannot be read for repair: {_one(error)}") from None
    if not plan.repairable:
        return RepairResult("not_repairable", None, (), plan.reason)
    extra = _data_target(artifact, source, target)
    try:
        with _staging(target) as work:
            staged = os.path.join(work, os.path.basename(target))
            if artifact.kind == "onnx":
                changes = _repair_onnx(plan, artifact, source, staged, extra is not None)
            else:
                changes = _repair_gguf(plan, artifact, source, staged)
            _verify(model, staged, n_ctx, "the rewritten copy")
            moves = [(staged, target)]
            if extra is not None:
                moves.insert(0, (os.path.join(work, os.path.basename(extra)), extra))
            _publish(moves)
        try:
            _verify(model, target, n_ctx, f"the copy moved to {target}")
        except NotRepairableError as error:
            _remove([path for _, path in moves], moved=True)
            raise NotRepairableError(f"{error}; it was removed") from None
    except NotRepairableError as error:
        return RepairResult("not_repairable", None, (), str(error))
    except RopekitError:
        raise
    except OSError as error:  # a full disk, a folder that became read-only: nothing is left behind
        raise ArgumentError("out", f"cannot write {target}: {error.strerror or error}; nothing was written") from None
    except Exception as error:  # onnx's checker, protobuf, the gguf writer: the input, not a crash
        raise ArgumentError("served", f"{source}: cannot be rewritten: {_one(error)}; nothing was written") from None
    return RepairResult("repaired", target, tuple(changes), f"wrote {target}; it audits as match")


def _one(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def _verify(model: ModelRope, path: str, n_ctx: int | None, what: str) -> None:
    """``path`` read back by ``audit``'s readers audits as ``match`` (else :class:`NotRepairableError`)."""
    try:
        check = audit_artifact(model, read_artifact(path, n_ctx=n_ctx))
    except ArgumentError as error:  # a copy that does not even read back (external data lost, say)
        raise NotRepairableError(f"{what} does not read back: {error.problem}") from None
    if check["verdict"] != "match":
        still = next((str(layer.get("served_as", "")) for layer in check["layers"].values()
                      if layer.get("verdict") == "mismatch"), "")
        raise NotRepairableError(f"{what} still does not serve the declared table: {still or check['verdict']}")


def _checked_paths(served: str, out: str) -> tuple[str, str]:
    if os.path.islink(served):
        raise ArgumentError("served", f"{served} is a symlink; give the artifact itself")
    if not os.path.exists(served):
        raise ArgumentError("served", f"{served}: no such file or directory")
    if os.path.lexists(out):
        raise ArgumentError("out", f"{out} exists; repair never overwrites: give a new path")
    parent = os.path.dirname(os.path.abspath(out)) or "."
    if not os.path.isdir(parent):
        raise ArgumentError("out", f"{parent} is not a directory")
    real_served, real_out = os.path.realpath(served), os.path.join(os.path.realpath(parent), os.path.basename(out))
    if real_out == real_served or real_out.startswith(real_served.rstrip(os.sep) + os.sep):
        raise ArgumentError("out", f"{out} is inside the artifact {served}; write the copy elsewhere")
    if os.path.isdir(served):
        for folder, folders, files in os.walk(served):
            for name in (*folders, *files):
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    raise ArgumentError("served", f"{path} is a symlink; give a pack of plain files and folders")
                if not (os.path.isdir(path) or stat.S_ISREG(os.stat(path).st_mode)):
                    raise ArgumentError("served", f"{path} is not a regular file or folder; give a pack of plain "
                                        "files and folders")
    else:
        suffix = os.path.splitext(served)[1].lower()
        if os.path.splitext(out)[1].lower() != suffix:
            raise ArgumentError("out", f"{out}: the copy of {served} must end in {suffix or 'the same suffix'} "
                                "(ropekit tells an artifact's format by its suffix)")
    return served, out


def _data_target(artifact: ServedArtifact, source: str, target: str) -> str | None:
    """For a single ``.onnx`` with external data: the copy's own data file, ``<out>.data``."""
    if artifact.kind != "onnx" or os.path.isdir(source) or not _locations(source):
        return None
    extra = f"{target}.data"
    if os.path.lexists(extra):
        raise ArgumentError("out", f"{extra} exists: the copy's external data would go there and repair never "
                            "overwrites; give another --out")
    return extra


@contextlib.contextmanager
def _staging(target: str) -> Iterator[str]:
    """A hidden temporary folder beside ``target``, removed whatever happens (after a successful
    move it holds only the claims the move replaced)."""
    parent = os.path.dirname(os.path.abspath(target))
    work = tempfile.mkdtemp(prefix=".ropekit-repair-", dir=parent)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _publish(moves: list[tuple[str, str]]) -> None:
    """Move each staged path onto its target without ever replacing what someone else put there:
    every target name is claimed first (``O_EXCL`` for a file, ``mkdir`` for a folder), then the
    staged path is renamed over its own claim. On failure nothing of ours is left."""
    claimed: list[str] = []
    try:
        for staged, target in moves:
            if os.path.isdir(staged):
                os.mkdir(target)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            claimed.append(target)
    except FileExistsError:
        _remove(claimed, moved=False)
        raise ArgumentError("out", f"{moves[len(claimed)][1]} appeared while the copy was written; repair never "
                            "overwrites: nothing was written") from None
    except OSError:
        _remove(claimed, moved=False)
        raise
    done: list[str] = []
    try:
        for staged, target in moves:
            os.replace(staged, target)  # onto our own claim (an empty folder is replaced too)
            done.append(target)
    except OSError:
        _remove(done, moved=True)
        _remove([path for path in claimed if path not in done], moved=False)
        raise


def _remove(paths: list[str], *, moved: bool) -> None:
    """Remove what this process put at ``paths``: a claim (an empty folder, an empty file) or,
    once ``moved``, the copy itself."""
    for path in paths:
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                if moved:
                    shutil.rmtree(path)
                else:
                    os.rmdir(path)
            else:
                os.unlink(path)


def _keep_mode(original: str, copy: str) -> None:
    """``copy`` gets ``original``'s permission bits (the writers create files 0600 or by umask)."""
    if os.path.isfile(original) and os.path.isfile(copy):
        os.chmod(copy, stat.S_IMODE(os.stat(original).st_mode))


# ---- ONNX ---------------------------------------------------------------------------------------------------


def _locations(model_file: str) -> list[str]:
    """The external data files ``model_file``'s tensors name (relative to its folder)."""
    from . import onnx_pack

    onnx = onnx_pack._onnx()
    bare = onnx.load(model_file, load_external_data=False)
    return sorted({entry.value for _, _, tensor in onnx_pack._tensors(bare.graph, "graph", onnx)
                   for entry in tensor.external_data if entry.key == "location"})


def _plan_onnx(model: ModelRope, artifact: ServedArtifact, document: dict[str, Any], plan: RepairPlan) -> None:
    """The caches of every mismatching layer type recomputed, and every wrongly wired layer
    fixed, where that is a safe edit; refusals otherwise."""
    from . import onnx_pack

    onnx = onnx_pack._onnx()
    try:
        bare = onnx.load(artifact.path, load_external_data=False)
    except Exception as error:
        raise ArgumentError("served", f"{artifact.path}: not a readable ONNX model: {_one(error)}") from None
    wrong: set[str] = set()
    for name, layer in document["layers"].items():
        for report in layer.get("tables", ()):
            if report.get("verdict") != "mismatch":
                continue
            if report.get("kind") == "inv_freq":
                plan.refuse(name, f"{report['where']} is an inv_freq initializer: repair rewrites baked cos/sin caches "
                                  "only; re-export the model")
            else:
                wrong.add(name)
    for scope, name, tensor in onnx_pack._tensors(bare.graph, "graph", onnx):
        match = onnx_pack._CACHE.search(name)
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
        plan.caches[(scope, name)] = fix
        for layer_type in stands_for:
            plan.note(layer_type, "its caches are recomputed from the declared table")
    _plan_wiring(model, artifact, bare.graph, plan, onnx)


def _cache_targets(model: ModelRope, suffix: str | None, dims: list[int]) -> list[str]:
    """The layer types a cache stands for, as the audit pairs them: the one its name says, else
    every one of its width, else the first."""
    from .onnx_pack import _LAYER_TYPES

    named = _LAYER_TYPES.get(suffix or "")
    if named is not None and named in model.tables:
        return [named]
    width = dims[1] if len(dims) == 2 else -1
    return [name for name, table in model.tables.items() if len(table.inv_freq) == width] or [next(iter(model.tables))]


def _cache_fix(model: ModelRope, scope: str, name: str, which: str, suffix: str | None, tensor: Any,
               stands_for: list[str], onnx: Any) -> _CacheFix:
    """How to recompute one cache from the declared table (same rows, one column per pair), or
    :class:`NotRepairableError` naming why the pack cannot hold it."""
    tables = [model.tables[layer_type] for layer_type in stands_for]
    table = tables[0]
    if any(not _same(table, other) for other in tables[1:]):
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
    return _CacheFix(name, scope, table.layer_type, 0 if which == "cos" else 1, segments)


def _plan_wiring(model: ModelRope, artifact: ServedArtifact, graph: Any, plan: RepairPlan, onnx: Any) -> None:
    """Per mismatching layer: a NoPE layer's rotation removed, a layer moved to its own type's
    cache; anything else (no rotation where one is declared, another width or pairing) refused."""
    from . import onnx_pack
    from .onnx_wiring import cache_layer_type, judge_wiring

    if not artifact.wiring:
        return
    by_name = {node.name: node for node in graph.node}
    outputs = {value.name for value in graph.output}
    names = sorted({tensor.name for tensor in graph.initializer}
                   | {name for node in graph.node for name in node.output})
    for entry, wiring in zip(judge_wiring(model, artifact.wiring), artifact.wiring, strict=True):
        if entry["verdict"] != "mismatch":
            continue
        owner = entry["layer_type"] or next(iter(model.tables))  # the layer type audit reports it under
        declared = model.for_layer(wiring.index)
        nodes = [by_name[name] for name in wiring.nodes if name in by_name]
        if declared is None:
            rotary = [node for node in nodes if node.op_type == "RotaryEmbedding"]
            switches = [node for node in nodes
                        if node.op_type != "RotaryEmbedding" and _int_attribute(node, "do_rotary")]
            if any(set(node.output) & outputs for node in rotary):
                plan.refuse(owner, f"{entry['reason']}; its RotaryEmbedding output is a graph output, which cannot be "
                                   "bypassed: rebuild the pack")
            elif not rotary and not switches:
                plan.refuse(owner, f"{entry['reason']}; no RotaryEmbedding node or do_rotary attribute to remove: "
                                   "rebuild the pack")
            else:
                plan.wiring.append(_WireFix(wiring.index, owner, "remove", bypass=tuple(n.name for n in rotary),
                                            switch_off=tuple(n.name for n in switches)))
                plan.note(owner, f"layer {wiring.index}'s rotation is removed (a NoPE layer)")
            continue
        if not wiring.rotates:
            plan.refuse(owner, f"{entry['reason']}; adding a rotation to a graph is not a safe edit: rebuild the pack")
            continue
        wired = cache_layer_type(wiring.cache)
        other_shape = (wiring.rotary_dim is not None and wiring.rotary_dim != declared.rotary_dim) or (
            wiring.interleaved is not None and wiring.interleaved != (declared.layout == "gptj"))
        if other_shape or wired is None or wired == declared.layer_type or wiring.cache is None:
            plan.refuse(owner, f"{entry['reason']}; only removing a rotation or moving a layer to its own layer type's "
                               "cache is a safe graph edit: rebuild the pack")
            continue
        wanted = next((name for name in names if (found := onnx_pack._CACHE.search(name)) is not None
                       and found.group(1) == "cos" and cache_layer_type(name) == declared.layer_type), None)
        if wanted is None:
            plan.refuse(owner, f"{entry['reason']}; the pack has no {declared.layer_type} cache to wire it to: rebuild "
                               "the pack")
            continue
        plan.wiring.append(_WireFix(wiring.index, owner, "rewire", nodes=tuple(wiring.nodes), cache=wiring.cache,
                                    wanted=wanted))
        plan.note(owner, f"layer {wiring.index} is rewired from {wiring.cache} to {wanted}")


def _int_attribute(node: Any, name: str) -> int:
    return next((int(attribute.i) for attribute in node.attribute if attribute.name == name), 0)


def _sin_partner(name: str) -> str:
    from .onnx_pack import _CACHE

    match = _CACHE.search(name)
    assert match is not None and match.group(1) == "cos"
    return name[: match.start(1)] + "sin" + name[match.end(1):]


def _repair_onnx(plan: RepairPlan, artifact: ServedArtifact, source: str, staged: str,
                 single: bool) -> list[dict[str, Any]]:
    """The pack (or the single ``.onnx``) rewritten at ``staged`` as ``plan`` says. A pack's
    external data keeps its file name in the copy's folder; a single ``.onnx``'s goes to
    ``<staged>.data`` (``single``), so the copy never reads the original's data."""
    from . import onnx_pack

    onnx = onnx_pack._onnx()
    from onnx import numpy_helper

    model_file = artifact.path
    locations = _locations(model_file)
    proto = onnx.load(model_file, load_external_data=True)
    changes: list[dict[str, Any]] = []
    for scope, name, tensor in onnx_pack._tensors(proto.graph, "graph", onnx):  # the protos themselves
        fix = plan.caches.get((scope, name))
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
    changes += _apply_wiring(plan.wiring, proto.graph)
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
        _keep_mode(os.path.join(os.path.dirname(model_file), locations[0]),
                   os.path.join(os.path.dirname(target_model), location))
    else:
        onnx.save_model(proto, target_model)
    _keep_mode(model_file, target_model)
    _loads(target_model)
    if pack:
        skip = {os.path.basename(model_file), *locations}
        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            if name in skip:
                continue
            if os.path.isdir(path):
                _copy_tree(path, os.path.join(staged, name))
            else:
                shutil.copy2(path, os.path.join(staged, name))
    return changes


def _apply_wiring(fixes: list[_WireFix], graph: Any) -> list[dict[str, Any]]:
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


def _copy_tree(source: str, target: str) -> None:
    """``source``'s folders and files under ``target`` (an error is the first ``OSError`` itself)."""
    for folder, _, files in os.walk(source):
        destination = os.path.join(target, os.path.relpath(folder, source))
        os.makedirs(destination, exist_ok=True)
        for name in files:
            shutil.copy2(os.path.join(folder, name), os.path.join(destination, name))


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
        raise NotRepairableError(f"the rewritten model does not load in onnxruntime: {_one(error)}") from None


def _bypass(graph: Any, node: Any) -> None:
    """Remove ``node``, feeding its consumers its first input instead (planned only when its
    output is not a graph output)."""
    source, result = node.input[0], node.output[0]
    for other in graph.node:
        for position, name in enumerate(other.input):
            if name == result:
                other.input[position] = source
    graph.node.remove(node)


# ---- GGUF ---------------------------------------------------------------------------------------------------


def _plan_gguf(model: ModelRope, artifact: ServedArtifact, document: dict[str, Any], plan: RepairPlan) -> None:
    """The keys and tensors that make llama.cpp serve the declared tables, proved on the reader
    ``audit`` uses before anything is written; refusals naming llama.cpp's rule otherwise."""
    from .llama_cpp import ARCHITECTURES

    arch = str(artifact.engine.get("arch"))
    rules = ARCHITECTURES.get(arch)
    if rules is None:
        plan.refuse(None, f"llama.cpp's rules for architecture {arch!r} are not known to ropekit")
        return
    groups: dict[str, dict[str, RopeTable]] = {}
    members: dict[str, list[int]] = {}
    layers: list[dict[str, Any]] = artifact.engine.get("layers", [])
    for layer in layers:
        index = int(layer["index"])
        try:
            declared = model.for_layer(index)
        except IndexError:
            plan.refuse(None, f"the config declares {len(model.layer_types)} layers, the GGUF's block_count is "
                              f"{len(layers)}: not the same model")
            return
        except LookupError as error:
            plan.refuse(None, f"cannot tell which table layer {index} uses: {error}")
            return
        name = model.layer_types[index] if index < len(model.layer_types) else (
            declared.layer_type if declared is not None else "full_attention")
        if declared is None and layer["rotates"]:
            plan.refuse(name, f"layer {index} ({name}) rotates in llama.cpp (its {layer['cache']} set) but the config "
                              f"declares no RoPE on it: which layers rotate is llama.cpp's {arch} rule "
                              f"({rules.source}), not a key the file can change")
        elif declared is not None and not layer["rotates"]:
            why = f" ({layer['why']})" if layer.get("why") else ""
            plan.refuse(declared.layer_type, f"layer {index} ({name}) applies no RoPE in llama.cpp{why}; the config "
                                             f"declares {declared.rope_type} on it: which layers rotate is llama.cpp's "
                                             f"{arch} rule, not a RoPE key the file can change")
        elif declared is not None:
            groups.setdefault(str(layer["cache"]), {})[declared.layer_type] = declared
            members.setdefault(str(layer["cache"]), []).append(index)
    chosen: dict[str, RopeTable] = {}
    for cache, tables in groups.items():
        distinct = list(tables.values())
        if any(not _same(distinct[0], other) for other in distinct[1:]):
            described = ", ".join(f"{name} {table.rope_type} at base {table.geometry.theta:g}"
                                  for name, table in tables.items())
            why = (f"llama.cpp rotates layers {members[cache]} with its one {cache} set, but the config declares "
                   f"different tables for them ({described}): which layers share a set is llama.cpp's {arch} layout "
                   f"({rules.source}), which no RoPE key changes")
            for name in tables:
                plan.refuse(name, why)
        else:
            chosen[cache] = distinct[0]
    if plan.refusals or not chosen:
        return
    mismatching = {name for name, layer in document["layers"].items() if layer.get("verdict") == "mismatch"}
    fix = _gguf_fix(model, artifact, chosen, mismatching, plan)
    if fix is None:
        return
    plan.gguf = fix
    for change in fix.changes:
        plan.note(str(change["layer_type"]), f"{change['what']}: {change['change']}")
    for name in sorted(mismatching - set(plan.notes)):  # proved by the dry run: served once the keys are rewritten
        plan.note(name, "served as declared once the rope keys above are rewritten")


def _gguf_fields(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A GGUF's key values and rope tensors (float64), as :mod:`~ropekit.artifacts.gguf_file` reads them."""
    from .gguf_file import _gguf

    reader = _gguf().GGUFReader(path)
    fields = {key: field.contents() for key, field in reader.fields.items()}
    tensors = {tensor.name: np.asarray(tensor.data, dtype=np.float64) for tensor in reader.tensors
               if tensor.name in _FACTOR_TENSORS}
    return fields, tensors


def _dry_run(artifact: ServedArtifact, fields: dict[str, Any], tensors: dict[str, Any], keys: dict[str, Any],
             replace: dict[str, Any]) -> ServedArtifact:
    """What llama.cpp would serve from the file with ``keys`` and ``replace`` applied, by the
    reader ``audit`` uses, without writing anything."""
    from .gguf_file import _Keys, _Reader
    from .llama_cpp import ARCHITECTURES

    arch = str(artifact.engine["arch"])
    changed = dict(fields)
    for name, value in keys.items():
        if value is None:
            changed.pop(f"{arch}.{name}", None)
        else:
            changed[f"{arch}.{name}"] = value
    rope = {name: value for name, value in tensors.items() if name not in replace}
    rope.update((name, np.asarray(value, dtype=np.float64)) for name, value in replace.items() if value is not None)
    reader = _Reader(artifact.path, arch, _Keys(artifact.path, arch, changed), rope, artifact.engine.get("n_ctx"))
    return reader.artifact(ARCHITECTURES[arch])


def _f32(value: float) -> float:
    """``value`` as the file will hold it (GGUF float keys are float32)."""
    return float(np.float32(value))


def _gguf_fix(model: ModelRope, artifact: ServedArtifact, chosen: dict[str, RopeTable], mismatching: set[str],
              plan: RepairPlan) -> _GgufFix | None:
    from .llama_cpp import ARCHITECTURES

    arch = str(artifact.engine["arch"])
    rules = ARCHITECTURES[arch]
    fields, tensors = _gguf_fields(artifact.path)
    keys: dict[str, Any] = {}
    replace: dict[str, Any] = {}
    changes: list[dict[str, Any]] = []
    main = chosen.get("global")
    if main is not None and main.layer_type in mismatching:
        try:
            keys, replace, what = _gguf_plan(main, arch, tensors, artifact)
        except NotRepairableError as error:
            plan.refuse(main.layer_type, str(error))
            return None
        changes.append({"layer_type": main.layer_type, "what": "rope keys" + (
            " and rope_freqs.weight" if replace.get("rope_freqs.weight") is not None else ""), "change": what,
            "keys": dict(keys)})
    swa = chosen.get("swa")
    if swa is not None and swa.geometry.theta != artifact.engine.get("freq_base_swa"):
        keys["rope.freq_base_swa"] = _f32(swa.geometry.theta)
        changes.append({"layer_type": swa.layer_type, "what": "rope.freq_base_swa",
                        "change": f"base {swa.geometry.theta:g} for llama.cpp's sliding-window layers",
                        "keys": {"rope.freq_base_swa": keys["rope.freq_base_swa"]}})
    dry = _dry_run(artifact, fields, tensors, keys, replace)
    sets = list(dry.engine.get("caches", {}))
    anchor = main if main is not None else swa
    anchor_set = "global" if main is not None else "swa"
    position = sets.index(anchor_set) if anchor_set in sets else -1
    served = dry.tables[position].magnitude if 0 <= position < len(dry.tables) else None
    if anchor is not None and anchor.layer_type in mismatching and served and \
            abs(served - anchor.attention_factor) > 1e-7 * anchor.attention_factor:
        key = "rope.scaling.attn_factor"
        stated = keys.get(key) if keys.get(key) is not None else fields.get(f"{arch}.{key}")
        current = 1.0 if stated is None else float(stated)
        keys[key] = _f32(current * anchor.attention_factor / served)
        own = served / current
        rule = f" times its own yarn magnitude {own:.6g}" if abs(own - 1.0) > 1e-9 else ""
        changes.append({"layer_type": anchor.layer_type, "what": key, "change": (
            f"attn_factor {keys[key]:.6g}: llama.cpp multiplies every rope type's cos/sin by "
            f"rope.scaling.attn_factor{rule} (llama-context.cpp), giving the declared attention factor "
            f"{anchor.attention_factor:.6g}"), "keys": {key: keys[key]}})
        dry = _dry_run(artifact, fields, tensors, keys, replace)
    check = audit_artifact(model, dry)
    if check["verdict"] == "match":
        return _GgufFix(keys, replace, tuple(changes))
    for name, layer in check["layers"].items():
        if layer.get("verdict") != "mismatch":
            continue
        table = model.tables.get(name)
        blocker = _gguf_blocker(table, rules, artifact, swa is not None and swa.layer_type == name and
                                main is not None and main.layer_type != name) if table is not None else None
        plan.refuse(name, blocker or f"with its rope keys rewritten, llama.cpp would still serve "
                                     f"{layer.get('served_as', 'another table')}")
    if not plan.refusals:
        plan.refuse(None, f"with its rope keys rewritten, the file still audits as {check['verdict']}")
    return None


def _gguf_blocker(table: RopeTable, rules: Any, artifact: ServedArtifact, sliding: bool) -> str | None:
    """The llama.cpp rule that keeps ``table`` from being served whatever the file says, in words
    (``None``: none of the known ones)."""
    if table.seq_len_dependent and table.switch_at is not None:
        n_ctx = artifact.engine.get("n_ctx")
        if table.rope_type == "longrope":
            return (f"longrope switches factors at sequence length {table.switch_at}, but llama.cpp picks one factor "
                    f"set by n_ctx ({n_ctx}, padded to a multiple of 256) for every position: no file serves both "
                    "regimes; the engine would need a per-length rule")
        return (f"{table.rope_type} depends on the sequence length ({table.seq_len_rule}), which llama.cpp does not "
                f"implement: with n_ctx {n_ctx} past {table.switch_at} it serves the load-time table at every length; "
                "the engine would need a per-length rule")
    if sliding and rules.swa is not None and rules.swa.scale == "one":
        return (f"llama.cpp's {rules.name} rotates its sliding-window layers with freq_scale 1 (no key sets "
                f"rope_freq_scale_train_swa; {rules.source}), so their declared {table.rope_type} table cannot be "
                "served; the engine would need a sliding-layer scaling key")
    if table.rope_type == "yarn":
        if not table.params.get("truncate", True):
            return ("yarn with truncate: false: ggml always truncates yarn's correction range "
                    "(ggml_rope_yarn_corr_dims floors the low and ceils the high dimension whatever the file says), so "
                    "the untruncated ramp cannot be served; the engine would need a flag to skip the rounding")
        betas = (table.params.get("beta_fast") or 32.0, table.params.get("beta_slow") or 1.0)
        if rules.betas is None and betas != (32.0, 1.0):
            return (f"yarn betas {betas[0]:g}/{betas[1]:g}: llama.cpp's {rules.name} loader ignores the file's betas "
                    "(it uses 32/1); the engine would need to read them")
    return None


def _gguf_plan(
    table: RopeTable, arch: str, tensors: dict[str, Any], artifact: ServedArtifact
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The global set's rope keys (``None``: remove) and rope tensors (``None``: drop) for ``table``,
    and what they say in words."""
    from .llama_cpp import ARCHITECTURES

    rules = ARCHITECTURES[arch]
    if table.rope_type == "longrope" and table.switch_at is not None:
        blocker = _gguf_blocker(table, rules, artifact, False)
        assert blocker is not None
        n_ctx = artifact.engine.get("n_ctx")
        if n_ctx is not None and int(n_ctx) <= table.switch_at:  # only the short factors are served
            blocker = (f"at n_ctx {n_ctx} llama.cpp serves rope_factors_short at every position; repair does not "
                       "rewrite longrope factor tensors: fix the converter")
        raise NotRepairableError(blocker)
    theta, pairs = table.geometry.theta, len(table.inv_freq)
    plain = plain_inv_freq(theta, table.rotary_dim, pairs)
    keys: dict[str, Any] = {"rope.freq_base": _f32(theta)}
    replace: dict[str, Any] = {name: None for name in _FACTOR_TENSORS if name in tensors}
    ratio = plain / np.where(table.inv_freq > 0, table.inv_freq, np.inf)
    uniform = bool(np.allclose(ratio, ratio[0], rtol=1e-9))
    if table.rope_type == "yarn":
        original = table.params.get("original_max_position_embeddings") or table.geometry.max_position_embeddings
        if original is None:
            raise NotRepairableError("yarn without original_max_position_embeddings: llama.cpp needs "
                                     "rope.scaling.original_context_length")
        keys.update({"rope.scaling.type": "yarn", "rope.scaling.factor": _f32(table.params["factor"]),
                     "rope.scaling.original_context_length": int(original)})
        if rules.betas is not None:  # this loader reads the file's betas
            keys.update({"rope.scaling.yarn_beta_fast": _f32(table.params.get("beta_fast") or 32.0),
                         "rope.scaling.yarn_beta_slow": _f32(table.params.get("beta_slow") or 1.0)})
        return keys, replace, f"yarn factor {table.params['factor']:g}, original context {original}"
    if uniform:
        factor = float(ratio[0])
        keys.update({"rope.scaling.type": "linear" if factor != 1.0 else None,
                     "rope.scaling.factor": _f32(factor) if factor != 1.0 else None})
        linear = f", linear factor {factor:.6g}" if factor != 1.0 else ""
        return keys, replace, f"plain RoPE at base {theta:g}{linear}"
    if arch not in _ROPE_FREQS_LOADERS:
        reads = "its graph passes rope factors, but" if rules.factors else "its graph passes no rope factors, and"
        raise NotRepairableError(f"{table.rope_type} needs per-pair frequency factors over plain RoPE; llama.cpp's "
                                 f"{arch} {reads} its loader creates no rope_freqs tensor ({rules.source}); the engine "
                                 "would need to load one")
    keys.update({"rope.scaling.type": None, "rope.scaling.factor": None})
    replace["rope_freqs.weight"] = ratio.astype(np.float32)
    return keys, replace, f"{table.rope_type} as rope_freqs factors over base {theta:g}"


def _repair_gguf(plan: RepairPlan, artifact: ServedArtifact, source: str, staged: str) -> list[dict[str, Any]]:
    from .gguf_file import _gguf

    assert plan.gguf is not None
    gguf = _gguf()
    reader = gguf.GGUFReader(source)
    _write_gguf(gguf, reader, staged, str(artifact.engine["arch"]), plan.gguf.keys, plan.gguf.tensors)
    _keep_mode(source, staged)
    return [dict(change) for change in plan.gguf.changes]


def _write_gguf(gguf: Any, reader: Any, staged: str, arch: str, keys: dict[str, Any], replace: dict[str, Any]) -> None:
    """The GGUF of ``reader`` with ``keys`` set or removed and the rope tensors in ``replace``
    written (or dropped when ``None``); every other key and tensor copied as it is."""
    writer = gguf.GGUFWriter(staged, arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        short = field.name[len(arch) + 1:] if field.name.startswith(f"{arch}.") else None
        if short is not None and short in keys:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for name, value in keys.items():
        if value is not None:
            writer.add_key_value(f"{arch}.{name}", value, _value_type(gguf, value))
    tensors = [item for item in reader.tensors if item.name not in replace]
    added = {name: np.asarray(value, dtype=np.float32) for name, value in replace.items() if value is not None}
    for item in tensors:
        writer.add_tensor_info(item.name, item.data.shape, item.data.dtype, item.data.nbytes, item.tensor_type)
    for name, value in added.items():
        writer.add_tensor_info(name, value.shape, value.dtype, value.nbytes, gguf.GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for item in tensors:
        writer.write_tensor_data(item.data, tensor_endianess=reader.endianess)
    for value in added.values():
        writer.write_tensor_data(value)
    writer.close()


def _value_type(gguf: Any, value: Any) -> Any:
    if isinstance(value, str):
        return gguf.GGUFValueType.STRING
    if isinstance(value, float):
        return gguf.GGUFValueType.FLOAT32
    return gguf.GGUFValueType.UINT32
