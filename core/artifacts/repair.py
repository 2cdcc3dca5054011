"""Repair what an engine serves: a corrected copy of an ONNX pack or a GGUF, never the original.

Only what the format can express is rewritten, and every repair is proved before it is kept: the
copy is written into a hidden temporary sibling of ``--out``, read back by the same readers
``ropekit audit`` uses, audited, and moved into place only when it audits as ``match``. Anything
else leaves no output behind.

- **ONNX packs** (onnxruntime-genai): every ``cos_cache``/``sin_cache`` (float32 or float16; the
  longrope ``If`` branches' small/large caches; DirectML's concatenated cache; Gemma-3's
  global/local) recomputed from the declared table with the same shape, dtype, one column per
  pair and the attention factor multiplied in; a NoPE layer's rotation removed (its
  ``RotaryEmbedding`` nodes bypassed, or ``do_rotary`` turned off), a layer wired to the other
  layer type's cache rewired; external data rewritten consistently; every other file copied.
- **GGUF**: the keys and rope tensors that make llama.cpp's rules serve the declared table (base,
  scaling keys, ``rope_freqs`` factors where the architecture reads them), every other key and
  tensor copied byte for byte. Where llama.cpp's own rule cannot serve the declaration (a yarn
  attention factor its mscale rule overwrites, ``truncate: false``, longrope regimes chosen by
  n_ctx, dynamic NTK), the repair is refused naming the rule.
- Rotary kept in a graph, ExecuTorch programs and array dumps are refused by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
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

__all__ = ["NotRepairableError", "RepairResult", "annotate", "repair", "repairability"]

VERDICTS = ("repaired", "unchanged", "not_repairable")


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


# ---- repairability, for audit's JSON ------------------------------------------------------------------------


def repairability(
    model: ModelRope, artifact: ServedArtifact, document: dict[str, Any]
) -> tuple[bool, dict[str, tuple[bool, str]]]:
    """Whether ``repair`` can fix each mismatching layer type of an audit ``document``: per layer
    type ``(repairable, reason)``, and whether all of them are (the first value). A prediction
    from the format and the engine's rules; ``repair`` itself proves each repair by auditing its
    output."""
    found = {name: _predict(model, artifact, name, document) for name, layer in document["layers"].items()
             if layer.get("verdict") == "mismatch"}
    return (bool(found) and all(ok for ok, _ in found.values())), found


def annotate(model: ModelRope, artifact: ServedArtifact, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (an audit) with ``repairable`` / ``repairable_reason`` for a mismatch: per
    mismatching layer type and at the top level (true only when every one is repairable)."""
    if document.get("verdict") != "mismatch":
        return document
    everything, found = repairability(model, artifact, document)
    for name, (ok, why) in found.items():
        document["layers"][name]["repairable"] = ok
        document["layers"][name]["repairable_reason"] = why
    document["repairable"] = everything
    document["repairable_reason"] = "; ".join(f"{name}: {why}" for name, (_, why) in found.items())
    return document


def _predict(model: ModelRope, artifact: ServedArtifact, name: str, document: dict[str, Any]) -> tuple[bool, str]:
    if artifact.kind == "onnx":
        if "graph_rotary" in artifact.engine:
            return False, "the rotary is computed in the graph (no baked cache): re-export with the fix, not repair"
        layers = [entry for entry in document["artifact"].get("layers", ()) if entry["verdict"] == "mismatch"]
        for entry in layers:
            if entry["layer_type"] in (name, None) and not entry["rotates"]:
                return False, (f"layer {entry['index']} does not rotate but should: adding a rotation to a graph is "
                               "not a safe edit; rebuild the pack")
        return True, "the caches are recomputed from the declared table" + (
            "; the wrongly wired layers are rewired" if layers else "")
    if artifact.kind == "gguf":
        table = model.tables.get(name)
        if table is None:
            return False, f"layer type {name} applies no RoPE in the model; llama.cpp's per-layer rule decides it"
        why = _gguf_blocker(table, artifact)
        return (why is None), (why or "llama.cpp serves it once the file's rope keys or rope_freqs say so")
    return False, f"{artifact.kind} artifacts are not repaired: {_unsupported(artifact)}"


def _unsupported(artifact: ServedArtifact) -> str:
    if artifact.kind == "executorch":
        return "an ExecuTorch program's constants are not rewritten; re-export it from a fixed model"
    return "fix the model or exporter that wrote it, then dump again"


# ---- repair -------------------------------------------------------------------------------------------------


def repair(model: ModelRope, served: str | os.PathLike[str], out: str | os.PathLike[str], *,
           n_ctx: int | None = None) -> RepairResult:
    """Write a copy of ``served`` at ``out`` that serves ``model``'s declared tables.

    ``unchanged`` (nothing written) when it already does; ``not_repairable`` (nothing written)
    when its format or engine cannot express them; ``repaired`` once the written copy audits as
    ``match``. Invalid paths (``out`` existing, inside ``served``, a symlink) raise
    :class:`~ropekit.ArgumentError`; the original is never opened for writing.
    """
    source, target = _checked_paths(os.fspath(served), os.fspath(out))
    artifact = read_artifact(source, n_ctx=n_ctx)
    document = audit_artifact(model, artifact)
    if document["verdict"] == "match":
        return RepairResult("unchanged", None, (), "it already serves the declared table")
    if artifact.kind not in ("onnx", "gguf") or "graph_rotary" in artifact.engine:
        reason = ("the rotary is computed in the graph (no baked cache): re-export it with a fixed exporter"
                  if artifact.kind == "onnx" else
                  f"{artifact.kind} artifacts are not repaired: {_unsupported(artifact)}")
        return RepairResult("not_repairable", None, (), reason)
    if document["verdict"] == "no_table":
        return RepairResult("not_repairable", None, (), document.get("reason", document.get("request", "no table")))
    try:
        with _staging(target) as staged:
            if artifact.kind == "onnx":
                wrong = {name for name, layer in document["layers"].items()
                         if any(table.get("verdict") == "mismatch" for table in layer.get("tables", ()))}
                changes = _repair_onnx(model, artifact, source, staged, wrong)
            else:
                changes = _repair_gguf(model, artifact, source, staged, n_ctx)
            check = audit_artifact(model, read_artifact(staged, n_ctx=n_ctx))
            if check["verdict"] != "match":
                still = next((str(layer.get("served_as", "")) for layer in check["layers"].values()
                              if layer.get("verdict") == "mismatch"), "")
                raise NotRepairableError(f"the rewritten copy still does not serve the declared table: {still}")
            os.rename(staged, target)
    except NotRepairableError as error:
        return RepairResult("not_repairable", None, (), str(error))
    except OSError as error:  # a full disk, a folder that became read-only: nothing is left behind
        raise ArgumentError("out", f"cannot write {target}: {error.strerror or error}; nothing was written") from None
    return RepairResult("repaired", target, tuple(changes), f"wrote {target}; it audits as match")


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
        for folder, _, files in os.walk(served):
            for name in files:
                if os.path.islink(os.path.join(folder, name)):
                    raise ArgumentError("served", f"{os.path.join(folder, name)} is a symlink; give a pack of files")
    return served, out


@contextlib.contextmanager
def _staging(target: str) -> Iterator[str]:
    """A path in a hidden temporary sibling of ``target``; the sibling is removed whatever happens
    (after a successful rename it is empty)."""
    parent = os.path.dirname(os.path.abspath(target))
    work = tempfile.mkdtemp(prefix=".ropekit-repair-", dir=parent)
    try:
        yield os.path.join(work, os.path.basename(target))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- ONNX ---------------------------------------------------------------------------------------------------


def _repair_onnx(model: ModelRope, artifact: ServedArtifact, source: str, staged: str,
                 wrong: set[str]) -> list[dict[str, Any]]:
    """The pack rewritten into ``staged``: the caches of the layer types in ``wrong`` recomputed,
    the wiring fixed, everything else copied."""
    from . import onnx_pack

    onnx = onnx_pack._onnx()
    from onnx import numpy_helper

    model_file = onnx_pack._model_file(source)
    bare = onnx.load(model_file, load_external_data=False)
    locations = sorted({entry.value for _, _, tensor in onnx_pack._tensors(bare.graph, "graph", onnx)
                        for entry in tensor.external_data
                        if entry.key == "location"})
    proto = onnx.load(model_file, load_external_data=True)
    changes: list[dict[str, Any]] = []
    for scope, name, tensor in onnx_pack._tensors(proto.graph, "graph", onnx):  # the protos themselves
        match = onnx_pack._CACHE.search(name)
        if match is None:
            continue
        which, suffix = match.group(1), match.group(2)
        if _cache_layer_type(model, suffix) not in wrong:
            continue  # a cache that audits right is left byte for byte
        old = numpy_helper.to_array(tensor)
        new = _recomputed(model, old, suffix, which, name)
        if np.array_equal(new, old):
            continue
        replacement = numpy_helper.from_array(new.astype(old.dtype), tensor.name)
        tensor.CopyFrom(replacement)
        changes.append({"what": f"{name} ({scope})", "shape": list(old.shape), "dtype": str(old.dtype),
                        "layer_type": _cache_layer_type(model, suffix), "max_change": float(np.max(np.abs(
                            new.astype(np.float64) - old.astype(np.float64))))})
    changes += _rewire(model, artifact, proto.graph, onnx)
    if _checks(bare, onnx):  # the original passes onnx.checker (contrib-op packs do not): so must the copy
        onnx.checker.check_model(proto)
    folder = staged if os.path.isdir(source) else os.path.dirname(staged)
    os.makedirs(folder, exist_ok=True)
    target_model = os.path.join(folder, os.path.basename(model_file)) if os.path.isdir(source) else staged
    if locations:
        onnx.save_model(proto, target_model, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=locations[0], size_threshold=0)
    else:
        onnx.save_model(proto, target_model)
    _loads(target_model)
    if os.path.isdir(source):
        skip = {os.path.basename(model_file), *locations}
        for name in sorted(os.listdir(source)):
            path = os.path.join(source, name)
            if name in skip:
                continue
            if os.path.isdir(path):
                _copy_tree(path, os.path.join(folder, name))
            else:
                shutil.copy2(path, os.path.join(folder, name))
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
        raise NotRepairableError(f"the rewritten model does not load in onnxruntime: {type(error).__name__}: "
                                 f"{text[:300]}") from None


def _cache_layer_type(model: ModelRope, suffix: str | None) -> str:
    from .onnx_pack import _LAYER_TYPES

    name = _LAYER_TYPES.get(suffix or "")
    if name is not None and name in model.tables:
        return name
    if len(model.tables) == 1 or "full_attention" in model.tables:
        return next(iter(model.tables)) if len(model.tables) == 1 else "full_attention"
    raise NotRepairableError(f"a cache named without a layer type, for a model with several ({sorted(model.tables)})")


def _recomputed(model: ModelRope, old: np.ndarray[Any, Any], suffix: str | None, which: str,
                name: str) -> np.ndarray[Any, Any]:
    """The cache ``old`` stands for, from the declared table: same rows, one column per pair."""
    table = model.tables[_cache_layer_type(model, suffix)]
    if old.ndim != 2 or old.shape[1] != len(table.inv_freq):
        raise NotRepairableError(f"{name} has shape {list(old.shape)}; the declared table has {len(table.inv_freq)} "
                                 "pairs: a cache of another width is not rewritten (the graph's rotary dim would "
                                 "differ too); rebuild the pack")
    rows = old.shape[0]
    dtype = old.dtype if old.dtype in (np.float16, np.float32, np.float64) else np.float32
    index = 0 if which == "cos" else 1
    if table.switch_at is not None and table.seq_len_dependent:
        long = table.at(table.switch_at + 1)
        if suffix == "small":
            return table.cos_sin(rows, layout="half", dtype=dtype)[index]
        if suffix == "large":
            return long.cos_sin(rows, layout="half", dtype=dtype)[index]
        if rows > table.switch_at and table.geometry.max_position_embeddings is not None and \
                rows == table.switch_at + table.geometry.max_position_embeddings:  # DirectML: short rows, then long
            short = table.cos_sin(table.switch_at, layout="half", dtype=dtype)[index]
            longer = long.cos_sin(rows - table.switch_at, layout="half", dtype=dtype)[index]
            return np.concatenate([short, longer])
        raise NotRepairableError(f"{name}: one cache for a seq-len-dependent {table.rope_type} table (it switches at "
                                 f"{table.switch_at}); the pack has no branch to serve both regimes")
    return table.cos_sin(rows, layout="half", dtype=dtype)[index]


def _rewire(model: ModelRope, artifact: ServedArtifact, graph: Any, onnx: Any) -> list[dict[str, Any]]:
    """Per-layer wiring: a NoPE layer's rotation removed, a layer moved to its own type's cache."""
    from .onnx_wiring import judge_wiring

    changes: list[dict[str, Any]] = []
    caches = {tensor.name for tensor in graph.initializer} | {node.output[0] for node in graph.node if node.output}
    for entry, wiring in zip(judge_wiring(model, artifact.wiring), artifact.wiring, strict=True):
        if entry["verdict"] != "mismatch":
            continue
        declared = model.for_layer(wiring.index)
        nodes = [node for node in graph.node if node.name in wiring.nodes]
        if declared is None:
            for node in nodes:
                if node.op_type == "RotaryEmbedding":
                    _bypass(graph, node)
                else:
                    _set_int(node, "do_rotary", 0, onnx)
            changes.append({"what": f"layer {wiring.index}", "layer_type": entry["layer_type"],
                            "change": "rotation removed (a NoPE layer)"})
            continue
        if not wiring.rotates or (wiring.rotary_dim is not None and wiring.rotary_dim != declared.rotary_dim) \
                or (wiring.interleaved is not None and wiring.interleaved != (declared.layout == "gptj")):
            raise NotRepairableError(f"layer {wiring.index}: {entry['reason']}; only removing a rotation or moving a "
                                     "layer to its own cache is a safe graph edit: rebuild the pack")
        wanted = "cos_cache_global" if declared.layer_type == "full_attention" else "cos_cache_local"
        if wanted not in caches or wiring.cache is None:
            raise NotRepairableError(f"layer {wiring.index}: {entry['reason']}; the pack has no {wanted} to wire it to")
        for node in nodes:
            for position, name in enumerate(node.input):
                if name in (wiring.cache, wiring.cache.replace("cos_", "sin_")):
                    node.input[position] = wanted if name.startswith("cos_") else wanted.replace("cos_", "sin_")
        changes.append({"what": f"layer {wiring.index}", "layer_type": entry["layer_type"],
                        "change": f"rewired from {wiring.cache} to {wanted}"})
    return changes


def _bypass(graph: Any, node: Any) -> None:
    """Remove ``node``, feeding its consumers (and graph outputs) its first input instead."""
    source, result = node.input[0], node.output[0]
    for other in graph.node:
        for position, name in enumerate(other.input):
            if name == result:
                other.input[position] = source
    for output in graph.output:
        if output.name == result:
            raise NotRepairableError(f"{node.name}'s output is a graph output; it cannot be bypassed")
    graph.node.remove(node)


def _set_int(node: Any, name: str, value: int, onnx: Any) -> None:
    for attribute in node.attribute:
        if attribute.name == name:
            attribute.i = value
            return
    node.attribute.append(onnx.helper.make_attribute(name, value))


# ---- GGUF ---------------------------------------------------------------------------------------------------


def _gguf_blocker(table: RopeTable, artifact: ServedArtifact) -> str | None:
    """Why llama.cpp's own rules cannot serve ``table`` whatever the file says (``None``: they can)."""
    from .llama_cpp import ARCHITECTURES

    arch = ARCHITECTURES.get(str(artifact.engine.get("arch")))
    if arch is None:
        return f"llama.cpp's rules for architecture {artifact.engine.get('arch')!r} are not known to ropekit"
    if len(artifact.engine.get("caches", {})) > 1:
        return "per-layer-type RoPE in a GGUF (sliding-window sets) is not rewritten: llama.cpp's pattern decides it"
    if table.seq_len_dependent:
        return (f"{table.rope_type} depends on the sequence length, which llama.cpp does not follow (longrope: it "
                "picks one factor set by n_ctx; dynamic NTK: not implemented); the engine would need a per-length rule")
    if table.rope_type == "yarn":
        if not table.params.get("truncate", True):
            return "yarn with truncate: false: ggml always truncates the correction range; the engine would need a flag"
        betas = (table.params.get("beta_fast") or 32.0, table.params.get("beta_slow") or 1.0)
        if arch.betas is None and betas != (32.0, 1.0):
            return (f"yarn betas {betas[0]:g}/{betas[1]:g}: llama.cpp's {arch.name} loader ignores the file's betas "
                    "(it uses 32/1); the engine would need to read them")
        return None  # the magnitude: rope.scaling.attn_factor scales llama.cpp's mscale, set on the written copy
    if table.attention_factor != 1.0:
        return (f"{table.rope_type} with attention factor {table.attention_factor:.6g}: llama.cpp's magnitude is "
                "rope.scaling.attn_factor only for yarn; the engine would need a magnitude key")
    if not arch.factors:
        plain = plain_inv_freq(table.geometry.theta, table.rotary_dim, len(table.inv_freq))
        ratio = plain / np.where(table.inv_freq > 0, table.inv_freq, np.inf)
        if not np.allclose(ratio, ratio[0], rtol=1e-9):
            return (f"{arch.name} ignores rope_freqs, and {table.rope_type} is not plain or linear RoPE; the engine "
                    "would need per-pair frequency factors")
    return None


def _repair_gguf(model: ModelRope, artifact: ServedArtifact, source: str, staged: str,
                 n_ctx: int | None) -> list[dict[str, Any]]:
    from .gguf_file import _gguf

    names = list(model.tables)
    if len(names) != 1:
        raise NotRepairableError("per-layer-type RoPE in a GGUF is not rewritten: llama.cpp's sliding-window pattern "
                                 "decides which layers use which set")
    table = model.tables[names[0]]
    blocker = _gguf_blocker(table, artifact)
    if blocker is not None:
        raise NotRepairableError(blocker)
    gguf = _gguf()
    reader = gguf.GGUFReader(source)
    arch = str(artifact.engine["arch"])
    keys, tensor, changes = _gguf_plan(table, arch, artifact)
    _write_gguf(gguf, reader, staged, arch, keys, tensor)
    if table.rope_type == "yarn":  # llama.cpp's magnitude is rope.scaling.attn_factor times its mscale rule
        from .gguf_file import read_gguf

        served = read_gguf(staged, n_ctx=n_ctx).tables[0].magnitude or 1.0
        if abs(served - table.attention_factor) > 1e-6 * table.attention_factor:
            keys["rope.scaling.attn_factor"] = float(table.attention_factor / served)
            changes[0]["keys"] = dict(keys)
            changes[0]["change"] += f", attn_factor {keys['rope.scaling.attn_factor']:.6g} (llama.cpp's mscale " \
                                    f"{served:.6g} times it is the declared {table.attention_factor:.6g})"
            os.remove(staged)
            _write_gguf(gguf, reader, staged, arch, keys, tensor)
    return changes


def _write_gguf(gguf: Any, reader: Any, staged: str, arch: str, keys: dict[str, Any], tensor: Any) -> None:
    """The GGUF of ``reader`` with ``keys`` set or removed and ``rope_freqs.weight`` replaced by
    ``tensor`` (or dropped when ``None``); every other key and tensor copied as it is."""
    writer = gguf.GGUFWriter(staged, arch, endianess=reader.endianess)
    drop = {f"{arch}.{name}" for name, value in keys.items() if value is None}
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF.") or field.name in drop:
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
    tensors = [item for item in reader.tensors if item.name != "rope_freqs.weight"]
    for item in tensors:
        writer.add_tensor_info(item.name, item.data.shape, item.data.dtype, item.data.nbytes, item.tensor_type)
    if tensor is not None:
        writer.add_tensor_info("rope_freqs.weight", tensor.shape, tensor.dtype, tensor.nbytes,
                               gguf.GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for item in tensors:
        writer.write_tensor_data(item.data, tensor_endianess=reader.endianess)
    if tensor is not None:
        writer.write_tensor_data(tensor)
    writer.close()


def _gguf_plan(
    table: RopeTable, arch: str, artifact: ServedArtifact
) -> tuple[dict[str, Any], Any, list[dict[str, Any]]]:
    """The rope keys to set (``None``: remove) and the ``rope_freqs`` tensor to write (or ``None``)."""
    from .llama_cpp import ARCHITECTURES

    rules = ARCHITECTURES[arch]
    theta, pairs = table.geometry.theta, len(table.inv_freq)
    plain = plain_inv_freq(theta, table.rotary_dim, pairs)
    keys: dict[str, Any] = {"rope.freq_base": float(theta)}
    tensor = None
    ratio = plain / np.where(table.inv_freq > 0, table.inv_freq, np.inf)
    uniform = bool(np.allclose(ratio, ratio[0], rtol=1e-9))
    if table.rope_type == "yarn":
        original = table.params.get("original_max_position_embeddings") or table.geometry.max_position_embeddings
        if original is None:
            raise NotRepairableError("yarn without original_max_position_embeddings: llama.cpp needs "
                                     "rope.scaling.original_context_length")
        keys.update({"rope.scaling.type": "yarn", "rope.scaling.factor": float(table.params["factor"]),
                     "rope.scaling.original_context_length": int(original)})
        what = f"yarn factor {table.params['factor']:g}, original context {original}"
    elif uniform:
        factor = float(ratio[0])
        keys.update({"rope.scaling.type": "linear" if factor != 1.0 else None,
                     "rope.scaling.factor": factor if factor != 1.0 else None})
        what = f"plain RoPE at base {theta:g}" + (f", linear factor {factor:.6g}" if factor != 1.0 else "")
    elif rules.factors:
        keys.update({"rope.scaling.type": None, "rope.scaling.factor": None})
        tensor = ratio.astype(np.float32)
        what = f"{table.rope_type} as rope_freqs factors over base {theta:g}"
    else:
        raise NotRepairableError(f"{arch} ignores rope_freqs and {table.rope_type} is not plain or linear RoPE")
    changes = [{"layer_type": table.layer_type, "what": "rope keys" + (" and rope_freqs.weight" if tensor is not None
                else ""), "change": what, "keys": dict(keys)}]
    return keys, tensor, changes


def _value_type(gguf: Any, value: Any) -> Any:
    if isinstance(value, str):
        return gguf.GGUFValueType.STRING
    if isinstance(value, float):
        return gguf.GGUFValueType.FLOAT32
    return gguf.GGUFValueType.UINT32
