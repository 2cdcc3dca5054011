"""Repairing GGUF files: the keys and rope tensors that make llama.cpp's rules serve the declared
tables; every other key and tensor copied byte for byte."""

from __future__ import annotations

import os
from typing import Any

import attrs
import numpy as np

from ....contract.scheme import plain_inv_freq
from ....tables.table import ModelRope, RopeTable
from ...compare import compare
from ...files import keep_mode
from ...fixing import NotRepairableError, RepairPlan, same_table
from ...format import Written
from ...report import AuditReport, AuditScope, worst
from ...served import ServedArtifact
from .file import ROPE_TENSORS, gguf_module, read_fields, served_by
from .judge import judge_gguf
from .llama_cpp import MROPE_SOURCE, mrope_streams, rules_for

__all__ = ["GgufFix", "plan_gguf", "write_gguf"]


@attrs.frozen
class GgufFix:
    """Keys to set (``None``: remove) and rope tensors to write (``None``: drop)."""

    keys: dict[str, Any]
    tensors: dict[str, Any]
    changes: tuple[dict[str, Any], ...]


_ROPE_FREQS_LOADERS = frozenset({"llama", "exaone", "arcee", "mistral3", "granite", "llama4", "exaone4"})
"""Architectures whose loader creates ``rope_freqs`` (``LLM_TENSOR_ROPE_FREQS`` in
``src/models/<arch>.cpp``; llama, granite and mistral3 only when the scaling type is not longrope,
which the repair then removes). Any other architecture's loader would refuse a file carrying one
("wrong number of tensors")."""


def plan_gguf(model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
    """The keys and tensors that make llama.cpp serve the declared tables, proved on the reader
    ``audit`` uses before anything is written; refusals naming llama.cpp's rule otherwise."""
    artifact = report.served
    assert artifact is not None  # a report made by audit_artifact
    if report.verdict == "no_table":
        plan.refuse(None, report.reason or report.request or "the artifact carries no table")
        return
    arch = str(artifact.engine.get("arch"))
    rules = rules_for(arch)
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
        if any(not same_table(distinct[0], other) for other in distinct[1:]):
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
    mismatching = set(report.mismatching())
    fix = _gguf_fix(model, artifact, chosen, mismatching, plan)
    if fix is None:
        return
    plan.edits = fix
    for change in fix.changes:
        plan.note(str(change["layer_type"]), f"{change['what']}: {change['change']}")
    for name in sorted(mismatching - set(plan.notes)):  # proved by the dry run: served once the keys are rewritten
        plan.note(name, "served as declared once the rope keys above are rewritten")


def _dry_run(artifact: ServedArtifact, fields: dict[str, Any], tensors: dict[str, Any], keys: dict[str, Any],
             replace: dict[str, Any]) -> ServedArtifact:
    """What llama.cpp would serve from the file with ``keys`` and ``replace`` applied, by the
    reader ``audit`` uses, without writing anything."""
    arch = str(artifact.engine["arch"])
    changed = dict(fields)
    for name, value in keys.items():
        if value is None:
            changed.pop(f"{arch}.{name}", None)
        else:
            changed[f"{arch}.{name}"] = value
    rope = {name: value for name, value in tensors.items() if name not in replace}
    rope.update((name, np.asarray(value, dtype=np.float64)) for name, value in replace.items() if value is not None)
    return served_by(artifact.path, arch, changed, rope, artifact.engine.get("n_ctx"))


def _f32(value: float) -> float:
    """``value`` as the file will hold it (GGUF float keys are float32)."""
    return float(np.float32(value))


def _gguf_fix(model: ModelRope, artifact: ServedArtifact, chosen: dict[str, RopeTable], mismatching: set[str],
              plan: RepairPlan) -> GgufFix | None:
    arch = str(artifact.engine["arch"])
    rules = rules_for(arch)
    assert rules is not None  # the artifact was read by these rules
    fields, tensors = read_fields(artifact.path)
    keys: dict[str, Any] = {}
    replace: dict[str, Any] = {}
    changes: list[dict[str, Any]] = []
    main = chosen.get("global")
    if main is not None and rules.mrope is not None and main.layer_type in mismatching:
        problem = _mrope_blocker(main, rules, artifact)
        if problem is not None:
            plan.refuse(main.layer_type, problem)
            return None
        sections = [*(main.mrope_section or ()), 0, 0, 0, 0][:4]
        if sections != artifact.engine["mrope"]["sections"]:
            keys["rope.dimension_sections"] = sections
            changes.append({"layer_type": main.layer_type, "what": "rope.dimension_sections", "change": (
                f"sections {sections} (was {artifact.engine['mrope']['sections']}) for llama.cpp's {rules.mrope} "
                "composition"), "keys": {"rope.dimension_sections": sections}})
    if main is not None and main.layer_type in mismatching and not _frequencies_served(main, artifact):
        try:
            planned, replace, what = _gguf_plan(main, arch, tensors, artifact)
            keys.update(planned)
        except NotRepairableError as error:
            plan.refuse(main.layer_type, str(error))
            return None
        changes.append({"layer_type": main.layer_type, "what": "rope keys" + (
            " and rope_freqs.weight" if replace.get("rope_freqs.weight") is not None else ""), "change": what,
            "keys": {name: value for name, value in keys.items() if name != "rope.dimension_sections"}})
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
    check = judge_gguf(model, dry, AuditScope())  # the audit's own judgement of the planned file
    verdict = check.verdict or worst(layer.verdict for layer in check.layers.values())
    if verdict == "match":
        return GgufFix(keys, replace, tuple(changes))
    for name, layer in check.layers.items():
        if layer.verdict != "mismatch":
            continue
        table = model.tables.get(name)
        blocker = _gguf_blocker(table, rules, artifact, swa is not None and swa.layer_type == name and
                                main is not None and main.layer_type != name) if table is not None else None
        plan.refuse(name, blocker or f"with its rope keys rewritten, llama.cpp would still serve "
                                     f"{layer.served_as or 'another table'}")
    if not plan.refusals:
        plan.refuse(None, f"with its rope keys rewritten, the file still audits as {verdict}")
    return None


def _frequencies_served(table: RopeTable, artifact: ServedArtifact) -> bool:
    """Whether the global set already serves ``table``'s frequencies and magnitude (only its
    multimodal composition may differ): its rope keys then stay as they are."""
    sets = list(artifact.engine.get("caches", {}))
    if "global" not in sets or table.seq_len_dependent:
        return False
    return compare(table, artifact.tables[sets.index("global")], None)[0]


def _mrope_blocker(table: RopeTable, rules: Any, artifact: ServedArtifact) -> str | None:
    """Why no ``rope.dimension_sections`` makes llama.cpp's multimodal graph serve ``table``'s
    composition (``None``: the declared sections, written, do)."""
    mode = "imrope" if rules.mrope == "interleaved" else "mrope"
    if table.mrope_composition != rules.mrope:
        declared = (f"{table.mrope_composition} sections {list(table.mrope_section or ())}"
                    if table.mrope_composition else "a text table (no sections)")
        kind = "interleaved" if rules.mrope == "interleaved" else "consecutive"
        return (f"llama.cpp's {rules.name} always composes {kind} sections ({mode}: llama_model_rope_type, "
                f"src/llama-model.cpp) and the config declares {declared}: the composition is the architecture's, "
                "not a key the file can change; convert the model to the architecture that composes it")
    section = tuple(table.mrope_section or ())
    pairs = len(table.inv_freq)
    if len(section) > 4 or sum(section) != pairs:
        return (f"sections {list(section)} do not fill llama.cpp's four-entry rope.dimension_sections over {pairs} "
                "pairs")
    streams = mrope_streams(rules.mrope, (*section, 0, 0, 0, 0)[:4], pairs)
    fourth = [pair for pair, stream in enumerate(streams) if stream == 3]
    if fourth:
        return (f"llama.cpp's {mode} puts pairs {fourth} of the declared sections {list(section)} on its fourth "
                f"position stream, 0 for text tokens ({MROPE_SOURCE}), where the model's code rotates them by the "
                "temporal axis: no rope.dimension_sections serves the declared composition; the engine would need to "
                "send leftover pairs to the temporal stream")
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
    rules = rules_for(arch)
    assert rules is not None  # the artifact was read by these rules
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
    replace: dict[str, Any] = {name: None for name in ROPE_TENSORS if name in tensors}
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


def write_gguf(plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
    """Write the planned GGUF into ``work``: the planned keys and rope tensors, every other one copied."""
    fix = plan.edits
    assert isinstance(fix, GgufFix)
    staged = os.path.join(work, os.path.basename(target))
    gguf = gguf_module()
    reader = gguf.GGUFReader(source)
    _write_gguf(gguf, reader, staged, str(artifact.engine["arch"]), fix.keys, fix.tensors)
    keep_mode(source, staged)
    return Written(tuple(dict(change) for change in fix.changes), ((staged, target),))


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
            sub = gguf.GGUFValueType.INT32 if isinstance(value, list) else None  # the converter's int arrays
            writer.add_key_value(f"{arch}.{name}", value, _value_type(gguf, value), sub_type=sub)
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
    if isinstance(value, list):
        return gguf.GGUFValueType.ARRAY
    if isinstance(value, str):
        return gguf.GGUFValueType.STRING
    if isinstance(value, float):
        return gguf.GGUFValueType.FLOAT32
    return gguf.GGUFValueType.UINT32
