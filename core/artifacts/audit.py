"""Audit what a forward actually served against what the config declares.

:func:`audit_artifact` takes the tables read from an artifact (:mod:`ropekit.artifacts.served`: an array
file, an ONNX pack, a GGUF) and says, per layer type, whether each is the declared table and, when
it is not, what was served instead: plain RoPE, a fitted theta, a linear factor, YaRN without
truncation or with an engine's default betas, the other longrope regime, another layer type's
table, the declared frequencies with another attention factor, or an engine rule.

Tolerances follow from the served dtype and the positions a cache covers: a cache built from
float32 angles drifts by about ``position * inv_freq * 2**-23``, a float16 one is rounded to about
1e-3, so correct caches match while a wrong pair does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..contract.scheme import plain_inv_freq
from ..errors import ArgumentError, RopekitError
from ..tables.gap import ANGLE_THRESHOLD, DEFAULT_POSITIONS
from ..tables.table import ModelRope, RopeTable
from .served import ServedArtifact, ServedTable, half_columns

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["Candidate", "audit_artifact", "estimate_from_cos_sin", "module_verdicts"]

ANGLE_ULPS = 4.8e-7
"""Relative angle error allowed for caches built from float32 angles (four float32 ulps)."""


@attrs.frozen
class Candidate:
    """A table the served one is compared with when it is not the declared one."""

    description: str
    inv_freq: npt.NDArray[np.float64] = attrs.field(repr=False, eq=False)
    magnitude: float | None = None
    magnitude_only: bool = False
    """The declared frequencies with another magnitude (pointless when the magnitudes agree)."""


def estimate_from_cos_sin(
    cos: npt.NDArray[Any], sin: npt.NDArray[Any], layout: str = "half", first_position: int = 0
) -> tuple[npt.NDArray[np.float64], float]:
    """``(inv_freq, magnitude)`` recovered from caches for consecutive positions: the slope of each
    pair's unwrapped phase (least squares) and the cos/sin magnitude."""
    if cos.shape != sin.shape or cos.ndim != 2 or (layout != "half" and cos.shape[1] % 2):
        raise ArgumentError("sin", f"cos {cos.shape} and sin {sin.shape} must be equal 2-D shapes of even width")
    c, s = half_columns(cos, layout), half_columns(sin, layout)
    phase = np.unwrap(np.arctan2(s, c), axis=0)
    positions = np.arange(first_position, first_position + cos.shape[0], dtype=np.float64)
    centred = positions - positions.mean()
    denominator = (centred**2).sum()
    if denominator == 0:  # a single row: the phase itself over the position
        slope = phase[0] / max(first_position, 1)
    else:
        slope = (centred[:, None] * (phase - phase.mean(axis=0))).sum(axis=0) / denominator
    return np.abs(slope), float(np.median(np.hypot(c, s)))


def audit_artifact(
    model: ModelRope,
    artifact: ServedArtifact,
    *,
    layer_type: str | None = None,
    positions: Iterable[int] = DEFAULT_POSITIONS,
    rtol: float | None = None,
) -> dict[str, Any]:
    """The ``ropekit audit --json`` document for ``artifact`` against ``model``'s declaration.

    ``verdict`` is ``match`` (every served table is the declared one), ``mismatch`` or
    ``no_table`` (the artifact carries none: its runtime builds one, which only a dump can show).
    ``layers`` has, per layer type, a ``verdict`` and, when not a match, ``served_as``.
    """
    if not model.tables:
        raise ArgumentError("config", f"the model applies no RoPE ({model.no_rope_reason or 'no layer type rotates'});"
                            " there is no table to audit")
    if rtol is not None and not (np.isfinite(rtol) and 0 < rtol < 1):
        raise ArgumentError("rtol", f"expected a relative tolerance in (0, 1), got {rtol!r}")
    if layer_type is not None and layer_type not in model.tables:
        raise ArgumentError("layer_type", f"unknown layer type {layer_type!r}; the config has {sorted(model.tables)}")
    chosen = tuple(positions)
    document: dict[str, Any] = {
        "artifact": {"path": artifact.path, "kind": artifact.kind, "producer": artifact.producer,
                     "tables": [table.where for table in artifact.tables]},
        "layers": {},
    }
    if artifact.engine:
        document["artifact"]["engine"] = {key: value for key, value in artifact.engine.items() if key != "layers"}
    if artifact.rules:
        document["engine_rules"] = list(artifact.rules)
    if artifact.flags:
        document["flags"] = list(artifact.flags)
    if not artifact.tables:
        document["verdict"] = "no_table"
        document["request"] = ("the artifact carries no RoPE table: its runtime builds its own. Dump the inv_freq or "
                               "cos/sin caches the forward uses (.npy) and audit those.")
        if artifact.engine.get("refused"):
            document["reason"] = artifact.engine["refused"]
            document["request"] = (f"{artifact.engine['refused']}. Dump the inv_freq or cos/sin caches the forward "
                                   "uses (.npy) and audit those.")
        document["layers"] = {name: {"verdict": "no_table"} for name in model.tables}
        return document
    if artifact.kind == "gguf" and "layers" in artifact.engine:
        _audit_layers(model, artifact, document, layer_type, chosen, rtol)
        return document
    served_tables = list(_split_concatenated(model, artifact.tables))
    unassigned = _unassigned(model, served_tables, layer_type)
    for served in served_tables:
        if any(served in group for group in unassigned):
            continue
        for name in _targets(model, served, layer_type):
            _add(document, name, _audit_one(model, model.tables[name], served, artifact, chosen, rtol))
    orphans = [_audit_unassigned(model, group, artifact, document, chosen, rtol) for group in unassigned]
    if artifact.wiring:
        _audit_wiring(model, artifact, document, layer_type)
    verdicts = {layer["verdict"] for layer in document["layers"].values()}
    verdicts |= {entry["verdict"] for entry in document["artifact"].get("layers", ())}
    if any(orphans):
        verdicts.add("mismatch")
    document["verdict"] = "mismatch" if "mismatch" in verdicts else "match"
    return document


def _add(document: dict[str, Any], name: str, report: dict[str, Any]) -> None:
    """``report`` (one served table against layer type ``name``) into the layer type's summary."""
    layer = document["layers"].setdefault(name, {"verdict": "match", "tables": []})
    layer["tables"].append(report)
    if report["verdict"] != "match":
        layer["verdict"] = "mismatch"
        layer.setdefault("served_as", report["served_as"])


def _unassigned(model: ModelRope, tables: list[ServedTable], layer_type: str | None) -> list[list[ServedTable]]:
    """Groups of tables a graph computes at one length, of one width, that nothing assigns to a
    layer type (no layer type, no consuming layer known) where several layer types have that
    width: which table serves which layer type is then not known (a two-rotary Gemma-3 export)."""
    if layer_type is not None:
        return []
    groups: dict[tuple[int | None, int], list[ServedTable]] = {}
    for served in tables:
        if served.seq_len is not None and served.layer_type is None and not _layer_types_of(model, served):
            groups.setdefault((served.seq_len, _width(served)), []).append(served)
    return [group for (_, width), group in groups.items() if len(group) > 1 and sum(
        len(table.inv_freq) == width for table in model.tables.values()) > 1]


def _audit_unassigned(
    model: ModelRope, group: list[ServedTable], artifact: ServedArtifact, document: dict[str, Any],
    positions: tuple[int, ...], rtol: float | None,
) -> bool:
    """Tables of one length that no layer is known to consume: each layer type of their width
    matches when some table is its declared one (a mismatch only when none is). A table that is
    no layer type's is flagged. ``True`` when there is such a table."""
    width = _width(group[0])
    fitted: set[int] = set()
    for name, table in model.tables.items():
        if len(table.inv_freq) != width:
            continue
        reports = [_audit_one(model, table, served, artifact, positions, rtol) for served in group]
        matching = [index for index, report in enumerate(reports) if report["verdict"] == "match"]
        fitted.update(matching)
        for report in [reports[index] for index in matching[:1]] or reports:
            report["assigned"] = ("the graph does not say which layers read this table: it is matched with the "
                                  "layer type whose table it is" if matching else
                                  "the graph does not say which layers read this table: none of its tables is "
                                  f"the {name} table")
            _add(document, name, report)
    orphans = [served for index, served in enumerate(group) if index not in fitted]
    for served in orphans:
        document.setdefault("flags", []).append(
            f"{served.where}: is no declared layer type's table, and the graph does not say which layers read it")
    return bool(orphans)


def _layer_types_of(model: ModelRope, served: ServedTable) -> list[str]:
    """The layer types of the layers ``served`` is known to be read by, in the model's order."""
    found = {model.layer_types[index] for index in served.layers if index < len(model.layer_types)}
    return [name for name in model.tables if name in found]


def _audit_wiring(model: ModelRope, artifact: ServedArtifact, document: dict[str, Any], layer_type: str | None) -> None:
    """An ONNX pack's per-layer wiring against the declared plan: ``document["artifact"]["layers"]``,
    and a mismatching layer marks its layer type's summary (a NoPE layer's, its own type's)."""
    from .onnx_wiring import judge_wiring

    entries = judge_wiring(model, artifact.wiring)
    if layer_type is not None:
        entries = [entry for entry in entries if entry["layer_type"] in (layer_type, None)]
    count = len(model.layer_types)
    if count and count != len(entries) and layer_type is None:
        document.setdefault("flags", []).append(
            f"the config declares {count} layers; the graph has {len(entries)} attention layers")
    document["artifact"]["layers"] = entries
    for entry in entries:
        if entry["verdict"] != "mismatch":
            continue
        name = entry["layer_type"] or next(iter(model.tables))
        summary = document["layers"].setdefault(name, {"verdict": "match", "tables": []})
        summary["verdict"] = "mismatch"
        summary.setdefault("served_as", entry["reason"])


def _audit_layers(
    model: ModelRope, artifact: ServedArtifact, document: dict[str, Any], layer_type: str | None,
    positions: tuple[int, ...], rtol: float | None,
) -> None:
    """A GGUF, layer by layer: does each layer rotate where the config says, with the table of its
    layer type? Fills ``document["artifact"]["layers"]`` (one entry per layer) and, per layer
    type, ``document["layers"]``; any layer's mismatch makes the verdict a mismatch."""
    tables = dict(zip(artifact.engine.get("caches", {}), artifact.tables, strict=True))
    plan: list[dict[str, Any]] = artifact.engine["layers"]
    count = len(model.layer_types)
    if count and count != len(plan):
        document.setdefault("flags", []).append(
            f"the config declares {count} layers; the GGUF's block_count is {len(plan)}")
    reports: dict[tuple[str, str], dict[str, Any]] = {}
    entries: list[dict[str, Any]] = []
    owners: list[str | None] = []  # per entry, the declared table's layer type (None: the layer has no RoPE)
    for layer in plan:
        entry = _layer_entry(model, layer, len(plan))
        declared = entry.pop("_declared")
        if layer_type is not None and (declared.layer_type if declared else entry["layer_type"]) != layer_type:
            continue
        owners.append(declared.layer_type if declared is not None else None)
        if declared is not None and layer["rotates"]:
            key = (str(layer["cache"]), declared.layer_type)
            if key not in reports:
                reports[key] = _audit_one(model, declared, tables[key[0]], artifact, positions, rtol)
            report = reports[key]
            cache = artifact.engine["caches"][key[0]]
            entry["verdict"] = report["verdict"]
            entry["reason"] = (
                f"the declared {declared.layer_type} table ({declared.rope_type}) with llama.cpp's {key[0]} set "
                f"(freq_base {cache['freq_base']:g}, freq_scale {cache['freq_scale']:g})"
                if report["verdict"] == "match" else
                f"layer {layer['index']} ({entry['layer_type']}) rotates with llama.cpp's {key[0]} set (freq_base "
                f"{cache['freq_base']:g}, freq_scale {cache['freq_scale']:g}): {report['served_as']}")
        entries.append(entry)
    document["artifact"]["layers"] = entries
    for (_, name), report in reports.items():
        summary = document["layers"].setdefault(name, {"verdict": "match", "tables": []})
        summary["tables"].append(report)
        if report["verdict"] != "match":
            summary["verdict"] = "mismatch"
            summary.setdefault("served_as", report["served_as"])
    for entry, owner in zip(entries, owners, strict=True):
        if entry["verdict"] == "match" or entry["layer_type"] is None:  # None: a layer past the config's count
            continue
        summary = document["layers"].setdefault(owner or entry["layer_type"], {"verdict": "match", "tables": []})
        if owner is None:
            summary["no_rope"] = True
        summary["verdict"] = "mismatch"
        summary.setdefault("served_as", entry["reason"])
    verdicts = {summary["verdict"] for summary in document["layers"].values()} | {e["verdict"] for e in entries}
    document["verdict"] = "mismatch" if "mismatch" in verdicts or not entries else "match"


def _layer_entry(model: ModelRope, layer: dict[str, Any], n_layer: int) -> dict[str, Any]:
    """One layer's entry before its table is compared: what the config declares at that index
    (``_declared``) and, when rotation alone decides, the verdict."""
    index = int(layer["index"])
    entry: dict[str, Any] = {"index": index, "layer_type": None}
    entry.update((key, layer[key]) for key in ("rotates", "cache", "rotary_dim", "interleaved"))
    try:
        declared = model.for_layer(index)
    except IndexError:
        entry.update(verdict="mismatch", _declared=None,
                     reason=f"layer {index}: the config declares {len(model.layer_types)} layers, the GGUF {n_layer}")
        return entry
    except LookupError as error:
        raise ArgumentError("config", f"cannot tell which table layer {index} uses: {error}") from None
    name = model.layer_types[index] if index < len(model.layer_types) else (
        declared.layer_type if declared is not None else "full_attention")
    entry.update(layer_type=name, _declared=declared, verdict="match", reason="")
    why = f" ({layer['why']})" if layer.get("why") else ""
    if declared is None and not layer["rotates"]:
        entry["reason"] = f"no RoPE, as declared{why}"
    elif declared is None:
        entry.update(verdict="mismatch", reason=f"layer {index} ({name}) rotates in llama.cpp (its {layer['cache']} "
                     "set) but the config declares no RoPE on it")
    elif not layer["rotates"]:
        entry.update(verdict="mismatch", reason=f"layer {index} ({name}) applies no RoPE in llama.cpp{why}; the config "
                     f"declares {declared.rope_type} on it")
    return entry


def module_verdicts(document: dict[str, Any], owners: dict[str, str]) -> dict[str, str]:
    """Per live module, the worst verdict of the tables it served (``owners`` maps a table's
    ``where`` to its module's name): what ``ropekit.torch`` and ``ropekit.mlx`` audits report."""
    verdicts: dict[str, str] = {}
    for layer in document["layers"].values():
        for report in layer.get("tables", ()):
            owner = owners.get(report["where"], report["where"])
            if verdicts.get(owner) != "mismatch":
                verdicts[owner] = report["verdict"]
    return verdicts


def _split_concatenated(model: ModelRope, tables: tuple[ServedTable, ...]) -> Iterator[ServedTable]:
    """DirectML's longrope cache: ``[original + max, .]``, short rows first. Split it in two."""
    for served in tables:
        table = model.table
        original = table.switch_at if table.rope_type == "longrope" else None
        maximum = table.geometry.max_position_embeddings
        if (served.kind == "cache" and served.regime is None and original and maximum and served.sin is not None
                and served.values.shape[0] == original + maximum):
            yield attrs.evolve(served, values=served.values[:original], sin=served.sin[:original], regime="short",
                               where=f"{served.where} rows 0..{original - 1}")
            yield attrs.evolve(served, values=served.values[original:], sin=served.sin[original:], regime="long",
                               where=f"{served.where} rows {original}..{original + maximum - 1}")
        else:
            yield served


def _width(served: ServedTable) -> int:
    if served.kind == "inv_freq":
        return int(served.values.shape[0])
    return int(served.values.shape[1]) if served.layout == "half" else int(served.values.shape[1]) // 2


def _targets(model: ModelRope, served: ServedTable, layer_type: str | None) -> list[str]:
    """The layer types ``served`` stands for: the one named, else those of the layers known to read
    it, else every one of its width (an engine that serves one table serves it to every layer),
    else the first."""
    if layer_type is not None:
        return [layer_type]
    if served.layer_type is not None and served.layer_type in model.tables:
        return [served.layer_type]
    consumed = _layer_types_of(model, served)
    if consumed:  # a graph's rotary read by these layers: their layer types, whatever the width
        return consumed
    sized = [name for name, table in model.tables.items() if len(table.inv_freq) == _width(served)]
    return sized or [next(iter(model.tables))]


def _declared_for(table: RopeTable, served: ServedTable) -> list[tuple[str, RopeTable]]:
    """The declared tables ``served`` must equal: longrope's short or long regime (both, for an
    engine that serves one regime at every length)."""
    if not table.seq_len_dependent or table.switch_at is None:
        return [("", table)]
    if served.seq_len is not None:  # measured at one length: the declaration at that length
        return [(f"seq_len {served.seq_len}", table.at(served.seq_len))]
    beyond = table.at(table.switch_at + 1)
    if served.regime == "short":
        return [(f"seq_len <= {table.switch_at}", table)]
    if served.regime == "long":
        return [(f"seq_len > {table.switch_at}", beyond)]
    return [("", table)]


def _audit_one(
    model: ModelRope, table: RopeTable, served: ServedTable, artifact: ServedArtifact,
    positions: tuple[int, ...], rtol: float | None,
) -> dict[str, Any]:
    report: dict[str, Any] = {"where": served.where, "kind": served.kind, "dtype": served.dtype,
                              "declared": {**table.to_json(inv_freq=False), "pairs": len(table.inv_freq)}}
    if served.regime:
        report["regime"] = served.regime
    comparisons = _declared_for(table, served)
    if artifact.kind == "gguf" and table.switch_at is not None:
        comparisons = _engine_comparisons(table, artifact)
    verdict, served_as = "match", ""
    for condition, declared in comparisons:
        ok, detail = _compare(declared, served, rtol)
        report.setdefault("comparisons", []).append({"declared": condition or "load-time table", **detail})
        if not ok and verdict == "match":
            verdict = "mismatch"
            served_as = _served_as(model, declared, served, artifact, rtol, detail)
            if condition:
                served_as += f"; the declaration differs at {condition}"
            report.update(_difference(declared.inv_freq, detail.get("served_inv_freq"), positions))
    if served.axes is not None:
        composed = _composition_served(table, served)
        report["composition"] = "match" if composed is None else "mismatch"
        if composed is not None and verdict == "match":
            verdict, served_as = "mismatch", composed
    elif artifact.kind == "gguf" and table.mrope_section is not None:
        report["composition"] = "mismatch"
        if verdict == "match":  # llama.cpp rebuilt no position streams: ggml_rope_ext, one position per token
            verdict = "mismatch"
            served_as = (f"llama.cpp rotates every pair by the token's one position (ggml_rope_ext: no "
                         f"rope.dimension_sections turning ggml_rope_multi on) where the model's code composes "
                         f"{'interleaved ' if table.mrope_composition == 'interleaved' else ''}sections "
                         f"{list(table.mrope_section)}")
    report["verdict"] = verdict
    if served_as:
        report["served_as"] = served_as
    if served.kind == "inv_freq" and served.magnitude is None and table.attention_factor != 1.0:
        report["attention_factor_unverified"] = (
            f"the artifact holds frequencies only; the declared attention factor {table.attention_factor:.6g} "
            "must be applied by the forward, and this audit cannot see whether it is")
    for comparison in report["comparisons"]:
        comparison.pop("served_inv_freq", None)
    return report


def _composition_served(table: RopeTable, served: ServedTable) -> str | None:
    """How a multimodal module's observed axes differ from the declared composition (``None``: they do not)."""
    from ..tables.mrope import describe_axes

    assert served.axes is not None
    layout = served.layout if served.layout in ("neox", "gptj", "half") else table.layout
    return describe_axes(table.mrope_composition, table.mrope_section or (), len(table.inv_freq), layout,
                         served.axes, names=served.axis_names)


def _engine_comparisons(table: RopeTable, artifact: ServedArtifact) -> list[tuple[str, RopeTable]]:
    """llama.cpp serves one table at every length up to n_ctx; a seq-len-dependent declaration
    changes past ``switch_at``. Every length the context allows must get the declared table."""
    assert table.switch_at is not None
    n_ctx = int(artifact.engine.get("n_ctx") or 0)
    wanted = [(f"seq_len <= {min(n_ctx, table.switch_at) if n_ctx else table.switch_at}", table)]
    if n_ctx > table.switch_at:
        wanted.append((f"seq_len {n_ctx}", table.at(n_ctx)))
    return wanted


def _compare(declared: RopeTable, served: ServedTable, rtol: float | None) -> tuple[bool, dict[str, Any]]:
    """Is ``served`` the ``declared`` table? Details for the report either way."""
    pairs = len(declared.inv_freq)
    if _width(served) != pairs:
        return False, {"length_mismatch": f"served {_width(served)} pairs, declared {pairs}"}
    if served.kind == "inv_freq":
        return _compare_inv_freq(declared.inv_freq, declared.attention_factor, served, rtol)
    return _compare_cache(declared.inv_freq, declared.attention_factor, served)


def _inv_freq_rtol(dtype: str, rtol: float | None) -> float:
    if rtol is not None:
        return rtol
    return 2e-3 if dtype in ("float16", "bfloat16") else 1e-5


def _compare_inv_freq(
    want: npt.NDArray[np.float64], factor: float, served: ServedTable, rtol: float | None
) -> tuple[bool, dict[str, Any]]:
    tolerance = _inv_freq_rtol(served.dtype, rtol)
    values = served.values
    difference = _rel_diff(values, want)
    detail: dict[str, Any] = {"max_rel_diff": _finite(difference), "rtol": tolerance, "served_inv_freq": values}
    ok = bool(np.isfinite(difference) and difference <= tolerance)
    if served.magnitude is not None:
        detail["served_attention_factor"] = served.magnitude
        detail["declared_attention_factor"] = factor
        ok = ok and abs(served.magnitude - factor) <= max(tolerance, 1e-6) * factor
    return ok, detail


def _cache_tolerance(
    inv_freq: npt.NDArray[np.float64], rows: int, first: int, dtype: str, angles: str, magnitude: float = 1.0
) -> npt.NDArray[np.float64]:
    """Per element: the dtype's rounding plus, for float32 angles, drift growing with position.

    A cache of ``magnitude * cos`` (an attention factor other than 1 multiplied in) is rounded twice,
    the cos/sin and then the product, and the magnitude the comparison divides by is read back from
    those rounded values: up to two of the dtype's epsilons (a correct float32 yarn cache with factor
    1.14 is off by 1.5e-7, over one epsilon of 1.19e-7 but under two)."""
    eps = float(np.finfo(np.dtype(dtype)).eps) if dtype in ("float16", "float32", "float64") else 1e-2
    roundings = 1.0 if abs(magnitude - 1.0) <= eps else 2.0
    positions = np.arange(first, first + rows, dtype=np.float64)[:, None]
    scale = ANGLE_ULPS if angles == "float32" else 0.0
    tolerance: npt.NDArray[np.float64] = roundings * eps + scale * positions * inv_freq[None, :] + 1e-12
    return tolerance


def _compare_cache(
    want: npt.NDArray[np.float64], factor: float, served: ServedTable
) -> tuple[bool, dict[str, Any]]:
    pairs = len(want)
    cos = half_columns(served.values, served.layout, pairs)
    if served.sin is None:
        magnitude = float(abs(cos[0, 0])) if served.first_position == 0 else factor
        sin = None
    else:
        sin = half_columns(served.sin, served.layout, pairs)
        magnitude = float(np.median(np.hypot(cos[: min(len(cos), 64)], sin[: min(len(sin), 64)])))
    if not np.all(np.isfinite(cos)) or (sin is not None and not np.all(np.isfinite(sin))):
        return False, {"non_finite": "the served cache holds NaN or infinity", "served_inv_freq": None}
    rows = cos.shape[0]
    tolerance = _cache_tolerance(want, rows, served.first_position, served.dtype, served.angles, magnitude)
    error = _cache_error(want, cos, sin, magnitude, served.first_position)
    detail: dict[str, Any] = {"rows": rows, "max_cache_error": _finite(float(np.max(error))),
                              "max_allowed": float(np.max(tolerance)),
                              "served_attention_factor": magnitude, "declared_attention_factor": factor}
    frequencies_ok = bool(np.all(error <= tolerance))
    eps = float(np.finfo(np.dtype(served.dtype)).eps) if served.dtype in ("float16", "float32", "float64") else 1e-2
    magnitude_ok = abs(magnitude - factor) <= 4 * eps * factor + 1e-9
    if sin is not None and not (frequencies_ok and magnitude_ok):  # only a mismatch needs what was served
        detail["served_inv_freq"] = estimate_from_cos_sin(cos, sin, "half", served.first_position)[0]
    return frequencies_ok and magnitude_ok, detail


def _cache_error(
    inv_freq: npt.NDArray[np.float64], cos: npt.NDArray[np.float64], sin: npt.NDArray[np.float64] | None,
    magnitude: float, first: int,
) -> npt.NDArray[np.float64]:
    """|served / magnitude - exact| per element, angles in float64 (mod 2 pi)."""
    positions = np.arange(first, first + cos.shape[0], dtype=np.float64)[:, None]
    angles = np.mod(positions * inv_freq[None, :], 2 * np.pi)
    scale = magnitude if magnitude > 0 else 1.0
    error = np.abs(cos / scale - np.cos(angles))
    if sin is not None:
        error = np.maximum(error, np.abs(sin / scale - np.sin(angles)))
    result: npt.NDArray[np.float64] = error
    return result


def _candidates(
    model: ModelRope, table: RopeTable, estimate: npt.NDArray[np.float64] | None,
    artifact: ServedArtifact | None = None, served: ServedTable | None = None,
) -> Iterator[Candidate]:
    """What a forward plausibly served instead of ``table``; fitted ones need an estimate."""
    theta, pairs = table.geometry.theta, len(table.inv_freq)
    yield Candidate(f"{table.rope_type} frequencies with attention factor 1.0 (declared "
                    f"{table.attention_factor:.6g})", table.inv_freq, 1.0, magnitude_only=True)
    yield Candidate(f"plain RoPE, rope_theta {theta:g} (the {table.rope_type} scaling dropped)",
                    plain_inv_freq(theta, table.rotary_dim, pairs))
    if table.rope_type == "yarn":
        if table.params.get("truncate", True):
            yield Candidate("yarn without truncation (ramp edges not rounded: the engine ignores truncate)",
                            table.with_params(truncate=False).inv_freq)
        else:
            yield Candidate("yarn with truncation (the correction range floored/ceiled: the engine ignores the "
                            "config's truncate: false)", table.with_params(truncate=True).inv_freq)
        if (table.params.get("beta_fast"), table.params.get("beta_slow")) != (32.0, 1.0):
            yield Candidate("yarn with betas 32/1 (the engine ignores the config's beta_fast/beta_slow)",
                            table.with_params(beta_fast=32.0, beta_slow=1.0).inv_freq)
    if table.rope_type == "llama3":
        yield from _llama3_variants(table)
        if estimate is not None:
            yield from _llama3_fitted(table, estimate)
    if table.seq_len_dependent and table.switch_at is not None:
        for length in (table.switch_at + 1, 4 * table.switch_at):
            other = table.at(length)
            yield Candidate(f"{table.rope_type} at seq_len {length} ({table.seq_len_rule})", other.inv_freq,
                            other.attention_factor)
        if table.seq_len is not None and table.seq_len > table.switch_at:
            yield Candidate(f"{table.rope_type} at load time (seq_len <= {table.switch_at})",
                            table.at(1).inv_freq)
    for name, other in model.tables.items():
        if name != table.layer_type and len(other.inv_freq) == pairs:
            yield Candidate(f"the {name} table ({other.rope_type})", other.inv_freq, other.attention_factor)
    yield from _engine_candidates(table, artifact, served)
    if estimate is None or estimate.shape != (pairs,) or not np.all(np.isfinite(estimate)):
        return
    index = np.arange(pairs)
    usable = (index > 0) & (estimate > 0)
    if usable.any():
        fitted = float(np.exp(np.median(-table.rotary_dim * np.log(estimate[usable]) / (2 * index[usable]))))
        yield Candidate(f"plain RoPE, fitted rope_theta {fitted:.6g}", plain_inv_freq(fitted, table.rotary_dim, pairs))
    plain = plain_inv_freq(theta, table.rotary_dim, pairs)
    if np.all(estimate > 0):
        factor = float(np.median(plain / estimate))
        yield Candidate(f"linear: plain RoPE / {factor:.6g}, rope_theta {theta:g}", plain / factor)


_LLAMA3_VARIANTS = {
    "factor": (8.0, 16.0, 32.0),  # Llama-3.1 and 3.2 declare 8 and 32: an exporter's class may hard-code either
    "original_max_position_embeddings": (8192, 4096, 2048),
    "low_freq_factor": (1.0,),
    "high_freq_factor": (4.0,),
}


def _llama3_variants(table: RopeTable) -> Iterator[Candidate]:
    """llama3 with one parameter as another release or exporter has it (ExecuTorch's Llama export
    takes the factor from its model class: 8 for 3.1, 32 for 3.2, whatever the checkpoint says)."""
    for name, values in _LLAMA3_VARIANTS.items():
        for value in values:
            if table.params.get(name) == value:
                continue
            try:
                other = table.with_params(**{name: value})
            except (ArgumentError, RopekitError):
                continue
            yield Candidate(f"llama3 with {name} {value:g} (declared {table.params.get(name)!r}): the engine's own "
                            f"llama3 {name}, not the checkpoint's", other.inv_freq, other.attention_factor)


def _llama3_fitted(table: RopeTable, estimate: npt.NDArray[np.float64]) -> Iterator[Candidate]:
    """llama3 with parameters fitted to the served frequencies: ``factor`` from the pairs divided
    most, and the band from the pairs in between (their ``smooth`` is linear in 1/wavelength:
    ``original / (high - low)`` and ``-low / (high - low)``; with the declared original context
    that gives low and high, with the declared low and high it gives the original context)."""
    pairs = len(table.inv_freq)
    if estimate.shape != (pairs,) or not np.all(np.isfinite(estimate) & (estimate > 0)):
        return
    plain = plain_inv_freq(table.geometry.theta, table.rotary_dim, pairs)
    ratio = plain / estimate
    top = float(ratio.max())
    if top < 1.01:
        return
    factor = _rounded(float(np.median(ratio[ratio > top * 0.998])))
    declared = {name: table.params.get(name) for name in _LLAMA3_VARIANTS}
    tries: list[dict[str, float]] = [{"factor": factor}]
    band = (ratio > 1.002) & (ratio < factor * 0.998)
    low, high, original = (declared["low_freq_factor"], declared["high_freq_factor"],
                           declared["original_max_position_embeddings"])
    if int(band.sum()) >= 2 and factor > 1:
        smooth = (1 / ratio[band] - 1 / factor) / (1 - 1 / factor)
        slope, intercept = np.polyfit(plain[band] / (2 * np.pi), smooth, 1)
        if slope > 0 and isinstance(original, (int, float)):
            span = float(original) / float(slope)
            fitted_low = _rounded(-float(intercept) * span)
            tries.append({"factor": factor, "low_freq_factor": fitted_low,
                          "high_freq_factor": _rounded(fitted_low + span)})
        if slope > 0 and isinstance(low, (int, float)) and isinstance(high, (int, float)) and high > low:
            tries.append({"factor": factor, "original_max_position_embeddings": round(
                _rounded(float(slope) * (float(high) - float(low))))})
    found = [{name: value for name, value in changes.items() if declared.get(name) != value} for changes in tries]
    for changes, differing in sorted(zip(tries, found, strict=True), key=lambda pair: len(pair[1])):
        # the fewest parameters changed first: (original, low, high) scaled together give one table
        if not differing or (len(differing) == 1 and "factor" in differing and factor in _LLAMA3_VARIANTS["factor"]):
            continue  # the declared table, or a fixed variant already tried
        try:
            other = table.with_params(**changes)
        except (ArgumentError, RopekitError):
            continue
        said = ", ".join(f"{name} {value:g} (declared {declared.get(name)!r})" for name, value in differing.items())
        yield Candidate(f"llama3 with {said}, fitted to the served table: the engine's own llama3 parameters, not "
                        "the checkpoint's", other.inv_freq, other.attention_factor)


def _rounded(value: float) -> float:
    """A fitted parameter as a producer would write it: the nearest integer (or power of two, or
    quarter) when within 0.5%, else four significant digits."""
    for step in (1.0, 0.25):
        nearest = round(value / step) * step
        if nearest > 0 and abs(nearest - value) <= 5e-3 * abs(value):
            return float(nearest)
    return float(f"{value:.4g}")


def _width_candidates(table: RopeTable, pairs: int) -> Iterator[Candidate]:
    """A table of ``pairs`` pairs where ``table`` has another number: the rotary width taken
    from the whole head, or from another partial_rotary_factor, with the declared scaling (when
    it can be built at that width) or without it."""
    theta = table.geometry.theta
    why = f"the partial_rotary_factor {table.geometry.partial_rotary_factor:g} not applied as declared"
    scheme = table._scheme
    if scheme is not None and table.rope_type != "default":
        geometry = attrs.evolve(table.geometry, partial_rotary_factor=2 * pairs / table.head_dim)
        try:
            built = scheme.build(table.params, geometry, table.seq_len)
        except (ArgumentError, RopekitError, ValueError, IndexError):  # per-pair factors of the declared width
            built = None
        if built is not None and len(built.inv_freq) == pairs:
            yield Candidate(f"{table.rope_type} over rotary_dim {2 * pairs} (declared {table.rotary_dim}: {why})",
                            np.asarray(built.inv_freq, dtype=np.float64), built.attention_factor)
    yield Candidate(f"plain RoPE over rotary_dim {2 * pairs} (declared {table.rotary_dim}: {why})",
                    plain_inv_freq(theta, 2 * pairs, pairs))


def _engine_candidates(
    table: RopeTable, artifact: ServedArtifact | None, served: ServedTable | None
) -> Iterator[Candidate]:
    """A GGUF's own base: plain RoPE at the file's ``freq_base`` for the set ``served`` belongs to
    (llama.cpp's default 10000 when the converter wrote none)."""
    if artifact is None or served is None or artifact.kind != "gguf":
        return
    caches = artifact.engine.get("caches", {})
    index = next((i for i, table_ in enumerate(artifact.tables) if table_ is served), None)
    if index is None or index >= len(caches):
        return
    base = float(list(caches.values())[index]["freq_base"])
    if base == table.geometry.theta:
        return
    note = "" if artifact.engine.get("freq_base_written", True) else " (rope.freq_base absent: llama.cpp's default)"
    yield Candidate(f"plain RoPE at the file's freq_base {base:g}{note}, not the declared rope_theta "
                    f"{table.geometry.theta:g}", plain_inv_freq(base, table.rotary_dim, len(table.inv_freq)))


def _served_as(
    model: ModelRope, declared: RopeTable, served: ServedTable, artifact: ServedArtifact, rtol: float | None,
    detail: dict[str, Any],
) -> str:
    """One line naming what was served instead of ``declared``: a producer's variant as read, else
    as the cache reads in another column layout (the other pairing, one column per pair), else
    "unidentified" with the numbers."""
    if "non_finite" in detail:
        return "a table holding NaN or infinity"
    found = _identify(model, declared, served, artifact, rtol, detail)
    if found is not None:
        return found + _rule_note(artifact)
    for layout, relaid in _relaid(served, len(declared.inv_freq)):
        ok, relaid_detail = _compare(declared, relaid, rtol)
        what = "the declared table" if ok else None if "non_finite" in relaid_detail else _identify(
            model, declared, relaid, artifact, rtol, relaid_detail)
        if what is not None:
            return f"{what}, {_layout_note(served.layout, layout, declared)}" + _rule_note(artifact)
    if "length_mismatch" in detail:
        return f"a table of another width ({detail['length_mismatch']})" + _rule_note(artifact)
    closest = detail.get("max_rel_diff", detail.get("max_cache_error"))
    if closest is None:
        return "an unidentified table holding NaN or infinity" + _rule_note(artifact)
    return f"an unidentified table (max difference {closest:.3g} from the declared one)" + _rule_note(artifact)


_LAYOUT_WORDS = {"neox": "rotate-half (neox)", "gptj": "interleaved (gptj)", "half": "one column per pair (half)"}


def _relaid(served: ServedTable, pairs: int) -> Iterator[tuple[str, ServedTable]]:
    """``served`` (a cache) read in each other column layout that gives ``pairs`` pairs: the other
    pairing (a dump laid out interleaved read as rotate-half, or the reverse), one column per pair
    (ExecuTorch's ``freqs_cos`` is ``[positions, pairs]``), or two per pair."""
    if served.kind != "cache" or served.values.ndim != 2:
        return
    columns = served.values.shape[1]
    for layout in ("neox", "gptj", "half"):
        if layout == served.layout or (layout != "half" and columns % 2):
            continue
        if (columns if layout == "half" else columns // 2) == pairs:
            yield layout, attrs.evolve(served, layout=layout)


def _layout_note(read: str, layout: str, declared: RopeTable) -> str:
    """Why a cache reads right only in ``layout``, and what to do about it."""
    if layout == "half" or read == "half":
        return (f"its columns laid out {_LAYOUT_WORDS[layout]}, not {_LAYOUT_WORDS[read]} as read (ExecuTorch's "
                f"freqs_cos/freqs_sin are one column per pair): audit it with --layout {layout}")
    return (f"its channels paired {_LAYOUT_WORDS[layout]}, not {_LAYOUT_WORDS[read]} as read (the model pairs them "
            f"{_LAYOUT_WORDS[declared.layout]}): audit it with --layout {layout} if the dump is laid out so; a "
            f"forward that applies it as {read} pairs channels the other way")


def _identify(
    model: ModelRope, declared: RopeTable, served: ServedTable, artifact: ServedArtifact, rtol: float | None,
    detail: dict[str, Any],
) -> str | None:
    """The producer's variant ``served`` is, as read (``None``: none fits)."""
    if "length_mismatch" in detail:
        pairs = _width(served)
        for candidate in _width_candidates(declared, pairs):
            width = RopeTable(declared.layer_type, declared.rope_type, declared.params,
                              attrs.evolve(declared.geometry, partial_rotary_factor=2 * pairs / declared.head_dim),
                              candidate.inv_freq, candidate.magnitude or declared.attention_factor)
            ok, _ = _compare(width, served, rtol)
            if ok:
                return candidate.description
        return None
    served_factor = detail.get("served_attention_factor")
    if served_factor is not None and served_factor != declared.attention_factor:
        ok, _ = _compare(attrs.evolve(declared, attention_factor=float(served_factor)), served, rtol)
        if ok:
            return (f"the declared {declared.rope_type} frequencies with attention factor {served_factor:.6g} "
                    f"(declared {declared.attention_factor:.6g})")
    if served.regime is not None and artifact.kind == "gguf":
        return (f"{declared.rope_type}'s {served.regime} factors at every length up to n_ctx "
                f"{artifact.engine.get('n_ctx')}: llama.cpp's n_ctx rule (it pads n_ctx to a multiple of 256 and "
                f"compares it with original_context_length {artifact.engine.get('original_context_length')}, not the "
                "sequence length)")
    estimate = detail.get("served_inv_freq")
    for candidate in _candidates(model, declared, estimate, artifact, served):
        if candidate.magnitude_only and candidate.magnitude == declared.attention_factor:
            continue
        target = attrs.evolve(declared, inv_freq=candidate.inv_freq,
                              attention_factor=candidate.magnitude or declared.attention_factor)
        magnitude_known = served.magnitude is not None or served.kind == "cache"
        ok, found = _compare(target, served, rtol)
        served_factor = found.get("served_attention_factor")
        if not ok and magnitude_known and candidate.magnitude is None and served_factor is not None:
            # the frequencies may match with yet another magnitude: say both
            retarget = attrs.evolve(target, attention_factor=float(served_factor))
            ok, _ = _compare(retarget, served, rtol)
            if ok:
                return f"{candidate.description}, attention factor {served_factor:.6g} (declared " \
                       f"{declared.attention_factor:.6g})"
        if ok:
            return candidate.description
    return None


def _rule_note(artifact: ServedArtifact) -> str:
    return f"; {artifact.rules[0]}" if artifact.rules else ""


def _rel_diff(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    if a.shape != b.shape:
        return float("inf")
    if not np.all(np.isfinite(a)):
        return float("inf")
    scale = np.maximum(np.abs(b), 1e-300)
    both_zero = (a == 0) & (b == 0)
    return float(np.where(both_zero, 0.0, np.abs(a - b) / scale).max())


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _difference(
    declared: npt.NDArray[np.float64], served: npt.NDArray[np.float64] | None, positions: tuple[int, ...]
) -> dict[str, Any]:
    """How far the served frequencies are from the declared ones (the seed's numbers)."""
    if served is None or served.shape != declared.shape or not np.all(np.isfinite(served)):
        return {}
    both = (declared > 0) & (served > 0)
    ratio = np.ones_like(declared)
    ratio[both] = np.maximum(declared[both] / served[both], served[both] / declared[both])
    differing = ~np.isclose(declared, served, rtol=1e-5, atol=0.0)
    error = np.abs(declared - served)
    return {
        "pairs": len(declared),
        "differing_pairs": int(differing.sum()),
        "max_ratio": float(ratio.max()),
        "positions": {
            str(p): {"max_angle_error": float((p * error).max()),
                     f"pairs_over_{ANGLE_THRESHOLD}rad": int((p * error > ANGLE_THRESHOLD).sum())}
            for p in positions
        },
    }
