"""Audit a table a forward actually served against what the config declares.

Given the ``inv_freq`` a forward used (or its cos/sin cache), say whether it matches the declared
scheme; if not, which table it does match (plain RoPE, another theta, a linear factor, the
declared scheme at another sequence length, another layer type's table), and the angle error the
difference causes. For the seed defect: plain RoPE served where llama3 is declared, 17 of 32 pairs
wrong by up to 32x, 2.017 rad off at position 2048.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .errors import ArgumentError
from .gap import ANGLE_THRESHOLD, DEFAULT_POSITIONS
from .scheme import plain_inv_freq
from .table import ModelRope, RopeTable

if TYPE_CHECKING:
    import numpy.typing as npt

    from .rotary import Layout

__all__ = ["Candidate", "audit", "estimate_from_cos_sin", "read_served"]

_RAW_DTYPES = {".f64": np.float64, ".f32": np.float32, ".f16": np.float16, ".bin": None, ".raw": None}


def read_served(
    path: str | os.PathLike[str], *, dtype: str | None = None, width: int | None = None
) -> npt.NDArray[Any]:
    """A served table from ``.npy`` or raw little-endian bytes (dtype from ``dtype`` or the
    ``.f64``/``.f32``/``.f16`` suffix); raw 2-D caches are reshaped to ``width`` columns."""
    name = os.fspath(path)
    suffix = os.path.splitext(name)[1].lower()
    chosen = np.dtype(dtype) if dtype else _RAW_DTYPES.get(suffix)
    if suffix != ".npy" and chosen is None:
        raise ArgumentError("served", f"{name}: raw file of unknown dtype; give its dtype (float64, float32, "
                            "float16) or use a .npy/.f64/.f32/.f16 file")
    try:
        if suffix == ".npy":
            array = np.load(name, allow_pickle=False)
        else:
            array = np.fromfile(name, dtype=np.dtype(chosen).newbyteorder("<"))
            if width and array.size > width and array.size % width == 0:
                array = array.reshape(-1, width)
    except FileNotFoundError:
        raise ArgumentError("served", f"{name}: no such file") from None
    except (OSError, ValueError) as error:
        raise ArgumentError("served", f"{name}: cannot read: {error}") from None
    if array.ndim not in (1, 2) or array.size == 0 or not np.issubdtype(array.dtype, np.floating):
        raise ArgumentError("served", f"{name}: expected a 1-D inv_freq or a 2-D cos/sin cache of floats, "
                            f"got {array.dtype} {array.shape}")
    return np.asarray(array, dtype=np.float64)


def estimate_from_cos_sin(cos: npt.NDArray[Any], sin: npt.NDArray[Any], layout: str = "neox") -> tuple[
    npt.NDArray[np.float64], float
]:
    """``(inv_freq, attention_factor)`` recovered from caches for positions ``0..N-1``: the slope of
    each pair's unwrapped phase (least squares), and the cos/sin magnitude."""
    if cos.shape != sin.shape or cos.ndim != 2 or cos.shape[1] % 2:
        raise ArgumentError("sin", f"cos {cos.shape} and sin {sin.shape} must be equal 2-D shapes of even width")
    pairs = cos.shape[1] // 2
    columns = slice(0, pairs) if _layout(layout) == "neox" else slice(0, None, 2)
    c, s = cos[:, columns], sin[:, columns]
    phase = np.unwrap(np.arctan2(s, c), axis=0)
    positions = np.arange(cos.shape[0], dtype=np.float64)
    centred = positions - positions.mean()
    slope = (centred[:, None] * (phase - phase.mean(axis=0))).sum(axis=0) / (centred**2).sum()
    return np.abs(slope), float(np.median(np.hypot(c, s)))


@attrs.frozen
class Candidate:
    """A table the served one was compared with."""

    description: str
    rope_type: str
    inv_freq: npt.NDArray[np.float64] = attrs.field(repr=False, eq=False)
    params: dict[str, Any] = attrs.field(factory=dict)


def _rel_diff(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    if a.shape != b.shape:
        return float("inf")
    scale = np.maximum(np.abs(b), 1e-300)
    both_zero = (a == 0) & (b == 0)
    return float(np.where(both_zero, 0.0, np.abs(a - b) / scale).max())


def _fitted_theta(served: npt.NDArray[np.float64], rotary_dim: int) -> float | None:
    index = np.arange(len(served))
    usable = (index > 0) & (served > 0)
    if not usable.any():
        return None
    # served_i = theta ** (-2i / d)  =>  ln theta = -d ln(served_i) / (2i)
    return float(np.exp(np.median(-rotary_dim * np.log(served[usable]) / (2 * index[usable]))))


def _candidates(model: ModelRope, table: RopeTable, served: npt.NDArray[np.float64] | None) -> Iterator[Candidate]:
    """Tables a forward plausibly served instead; fitted ones only when ``served`` is known."""
    theta = table.geometry.theta
    pairs = len(served) if served is not None else len(table.inv_freq)
    rotary = 2 * pairs
    yield Candidate(f"default: plain RoPE, rope_theta {theta:g}", "default", plain_inv_freq(theta, rotary),
                    {"rope_theta": theta})
    if table.seq_len_dependent and table.switch_at is not None:
        for length in (table.switch_at + 1, 4 * table.switch_at):
            other = table.at(length)
            yield Candidate(f"{table.rope_type} at seq_len {length} ({table.seq_len_rule})", table.rope_type,
                            other.inv_freq, {"seq_len": length})
    for name, other in model.tables.items():
        if name != table.layer_type:
            yield Candidate(f"the {name} table ({other.rope_type})", other.rope_type, other.inv_freq,
                            {"layer_type": name})
    if served is None:
        return
    fitted = _fitted_theta(served, rotary)
    if fitted is not None:
        yield Candidate(f"default: plain RoPE, fitted rope_theta {fitted:.6g}", "default",
                        plain_inv_freq(fitted, rotary), {"rope_theta": fitted})
    plain = plain_inv_freq(theta, rotary)
    if np.all(served > 0):
        factor = float(np.median(plain / served))
        yield Candidate(f"linear: plain RoPE / {factor:.6g}, rope_theta {theta:g}", "linear", plain / factor,
                        {"rope_theta": theta, "factor": factor})
    if len(table.inv_freq) != pairs:
        yield Candidate(f"default over the whole head (head_dim {table.head_dim})", "default",
                        plain_inv_freq(theta, table.head_dim), {"rope_theta": theta})


def _pick_table(model: ModelRope, layer_type: str | None, pairs: int) -> RopeTable:
    if not model.tables:
        raise ArgumentError("config", f"the model applies no RoPE ({model.no_rope_reason or 'no layer type rotates'}); "
                            "there is no table to audit")
    if layer_type is not None:
        if layer_type not in model.tables:
            raise ArgumentError("layer_type", f"unknown layer type {layer_type!r}; the config has "
                                  f"{sorted(model.tables)}")
        return model.tables[layer_type]
    sized = [t for t in model.tables.values() if len(t.inv_freq) == pairs]
    return sized[0] if sized else model.table


def audit(
    model: ModelRope,
    served: npt.NDArray[Any],
    *,
    sin: npt.NDArray[Any] | None = None,
    layer_type: str | None = None,
    positions: Iterable[int] = DEFAULT_POSITIONS,
    rtol: float = 1e-5,
    layout: str = "neox",
) -> dict[str, Any]:
    """Compare a served table with the declared one; the ``ropekit audit --json`` document.

    ``served`` is an ``inv_freq`` (1-D) or a cos cache for positions ``0..N-1`` (2-D; give
    ``sin`` too so inv_freq and the attention factor can be recovered). A 2-D cos without sin is
    compared with each candidate's cos directly.
    """
    chosen = tuple(positions)
    _layout(layout)
    report: dict[str, Any] = {}
    served_factor: float | None = None
    if served.ndim == 2:
        if sin is not None:
            inv_freq, served_factor = estimate_from_cos_sin(served, sin, layout)
            report["served"] = {"kind": "cos_sin", "positions": served.shape[0], "estimated": True}
            rtol = max(rtol, 1e-4)  # a recovered slope is less precise than a stored table
        else:
            return _audit_cos_only(model, served, layer_type, layout)
    else:
        inv_freq = np.asarray(served, dtype=np.float64)
        report["served"] = {"kind": "inv_freq"}
    table = _pick_table(model, layer_type, len(inv_freq))
    declared = table.inv_freq
    report["served"]["pairs"] = len(inv_freq)
    report.update(
        layer_type=table.layer_type,
        declared={**table.to_json(inv_freq=False), "pairs": len(declared)},
        rtol=rtol,
    )
    report["max_rel_diff"] = _rel_diff(inv_freq, declared) if inv_freq.shape == declared.shape else None
    report["matches_declared"] = report["max_rel_diff"] is not None and report["max_rel_diff"] <= rtol
    if served_factor is not None:
        report["served"]["attention_factor"] = served_factor
        factor_ok = abs(served_factor - table.attention_factor) <= 1e-3 * table.attention_factor
        report["attention_factor_matches"] = factor_ok
        report["matches_declared"] = report["matches_declared"] and factor_ok
    candidates = [] if report["matches_declared"] else list(_candidates(model, table, inv_freq))
    scored = [(c, _rel_diff(inv_freq, c.inv_freq)) for c in candidates]
    report["candidates"] = [{"description": c.description, "rope_type": c.rope_type, "params": c.params,
                             "max_rel_diff": d if np.isfinite(d) else None, "matches": bool(d <= rtol)}
                            for c, d in scored]
    matched = next((entry for entry in report["candidates"] if entry["matches"]), None)
    report["matched"] = matched
    if inv_freq.shape == declared.shape:
        report.update(_difference(declared, inv_freq, chosen))
    else:
        report["length_mismatch"] = f"served {len(inv_freq)} pairs, declared {len(declared)}"
    return report


def _difference(declared: npt.NDArray[np.float64], served: npt.NDArray[np.float64],
                positions: tuple[int, ...]) -> dict[str, Any]:
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


def _audit_cos_only(model: ModelRope, cos: npt.NDArray[Any], layer_type: str | None, layout: str) -> dict[str, Any]:
    table = _pick_table(model, layer_type, cos.shape[1] // 2)
    count = cos.shape[0]

    def distance(inv_freq: npt.NDArray[np.float64], factor: float) -> float:
        if 2 * len(inv_freq) != cos.shape[1]:
            return float("inf")
        want, _ = _cos(inv_freq, factor, count, layout)
        return float(np.abs(cos - want).max())

    atol = 1e-3 if count > 65536 else 1e-4  # float32 angle drift in the serving engine grows with position
    declared = distance(table.inv_freq, table.attention_factor)
    candidates = [] if declared <= atol else list(_candidates(model, table, None))
    rows = [{"description": c.description, "rope_type": c.rope_type, "params": c.params,
             "max_abs_diff": d if np.isfinite(d) else None, "matches": bool(d <= atol)}
            for c in candidates for d in [distance(c.inv_freq, 1.0)]]
    return {
        "layer_type": table.layer_type,
        "served": {"kind": "cos", "positions": count, "width": cos.shape[1]},
        "declared": {"rope_type": table.rope_type, "pairs": len(table.inv_freq)},
        "atol": atol,
        "max_abs_diff": declared if np.isfinite(declared) else None,
        "matches_declared": declared <= atol,
        "candidates": rows,
        "matched": next((row for row in rows if row["matches"]), None),
    }


def _cos(inv_freq: npt.NDArray[np.float64], factor: float, count: int, layout: str) -> tuple[
    npt.NDArray[Any], npt.NDArray[Any]
]:
    from .rotary import cos_sin

    return cos_sin(inv_freq, factor, count, dtype=np.float64, layout=_layout(layout))


def _layout(layout: str) -> Layout:
    """``layout`` checked: an unknown name is an argument error, never read as neox or gptj."""
    if layout == "neox":
        return "neox"
    if layout == "gptj":
        return "gptj"
    raise ArgumentError("layout", f"unknown layout {layout!r}; valid: neox, gptj")
