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
    for served in _split_concatenated(model, artifact.tables):
        for name in _targets(model, served, layer_type):
            report = _audit_one(model, model.tables[name], served, artifact, chosen, rtol)
            layer = document["layers"].setdefault(name, {"verdict": "match", "tables": []})
            layer["tables"].append(report)
            if report["verdict"] != "match":
                layer["verdict"] = "mismatch"
                layer.setdefault("served_as", report["served_as"])
    if artifact.wiring:
        _audit_wiring(model, artifact, document, layer_type)
    verdicts = {layer["verdict"] for layer in document["layers"].values()}
    verdicts |= {entry["verdict"] for entry in document["artifact"].get("layers", ())}
    document["verdict"] = "mismatch" if "mismatch" in verdicts else "match"
    return document


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
    """The layer types ``served`` stands for: the one named, else every one of its width (an engine
    that serves one table serves it to every layer), else the first."""
    if layer_type is not None:
        return [layer_type]
    if served.layer_type is not None and served.layer_type in model.tables:
        return [served.layer_type]
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
                         served.axes)


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
    inv_freq: npt.NDArray[np.float64], rows: int, first: int, dtype: str, angles: str
) -> npt.NDArray[np.float64]:
    """Per element: the dtype's rounding plus, for float32 angles, drift growing with position."""
    eps = float(np.finfo(np.dtype(dtype)).eps) if dtype in ("float16", "float32", "float64") else 1e-2
    positions = np.arange(first, first + rows, dtype=np.float64)[:, None]
    scale = ANGLE_ULPS if angles == "float32" else 0.0
    tolerance: npt.NDArray[np.float64] = eps + scale * positions * inv_freq[None, :] + 1e-12
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
    tolerance = _cache_tolerance(want, rows, served.first_position, served.dtype, served.angles)
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


def _width_candidates(table: RopeTable, pairs: int) -> Iterator[Candidate]:
    """A table of ``pairs`` pairs where ``table`` has another number: the rotary width taken
    from the whole head, or from another partial_rotary_factor."""
    theta = table.geometry.theta
    yield Candidate(f"plain RoPE over rotary_dim {2 * pairs} (declared {table.rotary_dim}: the "
                    f"partial_rotary_factor {table.geometry.partial_rotary_factor:g} not applied as declared)",
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
    """One line naming what was served instead of ``declared``."""
    if "length_mismatch" in detail:
        pairs = _width(served)
        for candidate in _width_candidates(declared, pairs):
            width = RopeTable(declared.layer_type, declared.rope_type, declared.params,
                              attrs.evolve(declared.geometry, partial_rotary_factor=2 * pairs / declared.head_dim),
                              candidate.inv_freq, declared.attention_factor)
            ok, _ = _compare(width, served, rtol)
            if ok:
                return candidate.description + _rule_note(artifact)
        return f"a table of another width ({detail['length_mismatch']})"
    if "non_finite" in detail:
        return "a table holding NaN or infinity"
    served_factor = detail.get("served_attention_factor")
    if served_factor is not None and served_factor != declared.attention_factor:
        ok, _ = _compare(attrs.evolve(declared, attention_factor=float(served_factor)), served, rtol)
        if ok:
            return (f"the declared {declared.rope_type} frequencies with attention factor {served_factor:.6g} "
                    f"(declared {declared.attention_factor:.6g})" + _rule_note(artifact))
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
                       f"{declared.attention_factor:.6g})" + _rule_note(artifact)
        if ok:
            return candidate.description + _rule_note(artifact)
    closest = detail.get("max_rel_diff", detail.get("max_cache_error"))
    if closest is None:
        return "an unidentified table holding NaN or infinity" + _rule_note(artifact)
    return f"an unidentified table (max difference {closest:.3g} from the declared one)" + _rule_note(artifact)


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
