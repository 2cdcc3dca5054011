"""What was served instead: given a served table that is not the declared one, the candidates a
forward plausibly served (plain RoPE, a fitted theta, a linear factor, YaRN without truncation or
with an engine's default betas, the other longrope regime, another layer type's table, the declared
frequencies with another attention factor, llama3 with an exporter's parameters, another rotary
width, an engine's own rule) and the one line naming the one that fits, as read or in another
column layout. Format-neutral: an engine's rules come in as :class:`~ropekit.artifacts.rules.Rules`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..contract.scheme import plain_inv_freq
from ..errors import ArgumentError, RopekitError
from ..tables.table import ModelRope, RopeTable
from .compare import compare, width
from .rules import Candidate, Rules
from .served import ServedArtifact, ServedTable

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["Candidate", "candidates", "served_as"]


def served_as(
    model: ModelRope, declared: RopeTable, served: ServedTable, artifact: ServedArtifact, rtol: float | None,
    detail: dict[str, Any], rules: Rules,
) -> str:
    """One line naming what was served instead of ``declared``: a producer's variant as read, else
    as the cache reads in another column layout (the other pairing, one column per pair), else
    "unidentified" with the numbers."""
    if "non_finite" in detail:
        return "a table holding NaN or infinity"
    found = _identify(model, declared, served, artifact, rtol, detail, rules)
    if found is not None:
        return found + _rule_note(artifact)
    for layout, relaid in _relaid(served, len(declared.inv_freq)):
        ok, relaid_detail = compare(declared, relaid, rtol)
        what = "the declared table" if ok else None if "non_finite" in relaid_detail else _identify(
            model, declared, relaid, artifact, rtol, relaid_detail, rules)
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
    detail: dict[str, Any], rules: Rules,
) -> str | None:
    """The producer's variant ``served`` is, as read (``None``: none fits)."""
    if "length_mismatch" in detail:
        pairs = width(served)
        for candidate in _width_candidates(declared, pairs):
            other = RopeTable(declared.layer_type, declared.rope_type, declared.params,
                              attrs.evolve(declared.geometry, partial_rotary_factor=2 * pairs / declared.head_dim),
                              candidate.inv_freq, candidate.magnitude or declared.attention_factor)
            ok, _ = compare(other, served, rtol)
            if ok:
                return candidate.description
        return None
    served_factor = detail.get("served_attention_factor")
    if served_factor is not None and served_factor != declared.attention_factor:
        ok, _ = compare(attrs.evolve(declared, attention_factor=float(served_factor)), served, rtol)
        if ok:
            return (f"the declared {declared.rope_type} frequencies with attention factor {served_factor:.6g} "
                    f"(declared {declared.attention_factor:.6g})")
    ruled = rules.explain(declared, served)
    if ruled is not None:
        return ruled
    estimate = detail.get("served_inv_freq")
    for candidate in candidates(model, declared, estimate, rules, served):
        if candidate.magnitude_only and candidate.magnitude == declared.attention_factor:
            continue
        target = attrs.evolve(declared, inv_freq=candidate.inv_freq,
                              attention_factor=candidate.magnitude or declared.attention_factor)
        magnitude_known = served.magnitude is not None or served.kind == "cache"
        ok, found = compare(target, served, rtol)
        served_factor = found.get("served_attention_factor")
        if not ok and magnitude_known and candidate.magnitude is None and served_factor is not None:
            # the frequencies may match with yet another magnitude: say both
            retarget = attrs.evolve(target, attention_factor=float(served_factor))
            ok, _ = compare(retarget, served, rtol)
            if ok:
                return f"{candidate.description}, attention factor {served_factor:.6g} (declared " \
                       f"{declared.attention_factor:.6g})"
        if ok:
            return candidate.description
    return None



def _rule_note(artifact: ServedArtifact) -> str:
    return f"; {artifact.rules[0]}" if artifact.rules else ""



def candidates(
    model: ModelRope, table: RopeTable, estimate: npt.NDArray[np.float64] | None,
    rules: Rules | None = None, served: ServedTable | None = None,
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
    if rules is not None and served is not None:
        yield from rules.candidates(table, served)
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
    with np.errstate(over="ignore"):
        ratio = plain / estimate
    top = float(ratio.max())
    if top < 1.01 or not np.all(np.isfinite(ratio)):  # a served value so small its ratio overflows fits no llama3
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
    if not math.isfinite(value):
        return value
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
    scheme = table.scheme
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

