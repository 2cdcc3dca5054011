"""Is a served table the declared one? The format-neutral comparison every audit uses: the
tolerances (from the served dtype and the positions a cache covers: a cache built from float32
angles drifts by about ``position * inv_freq * 2**-23``, a float16 one is rounded to about 1e-3,
so correct caches match while a wrong pair does not), the measurement, and how far a mismatch is
from the declaration (the seed's numbers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..tables.gap import ANGLE_THRESHOLD
from ..tables.table import RopeTable
from .served import ServedTable, half_columns

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["ANGLE_ULPS", "compare", "difference", "estimate_from_cos_sin", "width"]


ANGLE_ULPS = 4.8e-7
"""Relative angle error allowed for caches built from float32 angles (four float32 ulps)."""


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


def width(served: ServedTable) -> int:
    """How many pairs ``served`` holds (a cache's columns read in its layout)."""
    if served.kind == "inv_freq":
        return int(served.values.shape[0])
    return int(served.values.shape[1]) if served.layout == "half" else int(served.values.shape[1]) // 2


def compare(declared: RopeTable, served: ServedTable, rtol: float | None) -> tuple[bool, dict[str, Any]]:
    """Is ``served`` the ``declared`` table? Details for the report either way."""
    pairs = len(declared.inv_freq)
    if width(served) != pairs:
        return False, {"length_mismatch": f"served {width(served)} pairs, declared {pairs}"}
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
    if 0 in cos.shape or cos.shape[1] < pairs:  # a cache too narrow for the declared pairs, or with no rows
        return False, {"length_mismatch": f"{cos.shape[1]} columns of pairs for {cos.shape[0]} positions, where the "
                       f"declared table has {pairs} pairs", "served_inv_freq": None}
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


def difference(
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
