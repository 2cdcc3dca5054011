"""``yarn``: YaRN (Peng et al.), NTK-by-parts interpolation with an attention factor.

Pairs that rotate more than ``beta_fast`` times over the original context are kept, pairs that
rotate fewer than ``beta_slow`` times are divided by ``factor``, with a linear ramp between.
The attention factor: an explicit ``attention_factor`` wins; else, when both ``mscale`` and
``mscale_all_dim`` are truthy (non-zero), ``m(factor, mscale) / m(factor, mscale_all_dim)``
(DeepSeek, and every other YaRN config that sets them); else ``m(factor, 1)``, where
``m(s, k) = 1`` for ``s <= 1`` and ``0.1 * k * ln(s) + 1`` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ropekit import Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "attention_factor", "ropekit_scheme"]


def _mscale(scale: float, weight: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0


def attention_factor(params: Params, geometry: Geometry) -> float:
    """The cos/sin multiplier, by the precedence in the module docstring."""
    if params["attention_factor"] is not None:
        return float(params["attention_factor"])
    factor = float(params["factor"])
    mscale, mscale_all_dim = params["mscale"], params["mscale_all_dim"]
    if mscale and mscale_all_dim:
        return _mscale(factor, mscale) / _mscale(factor, mscale_all_dim)
    return _mscale(factor)


def _correction_dim(rotations: float, dim: int, base: float, original: int) -> float:
    # transformers' dim * ln(original / (rotations * 2 pi)) / (2 ln base), in log space so that
    # no finite beta overflows
    return dim * (math.log(original) - math.log(rotations) - math.log(2 * math.pi)) / (2 * math.log(base))


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """transformers' ``_compute_yarn_parameters`` in float64."""
    dim, base = geometry.rotary_dim, geometry.theta
    original = params["original_max_position_embeddings"]
    factor = float(params["factor"])
    low = _correction_dim(params["beta_fast"], dim, base, original)
    high = _correction_dim(params["beta_slow"], dim, base, original)
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: avoid a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrapolation = plain_inv_freq(base, dim)
    keep = 1.0 - ramp
    inv_freq = extrapolation / factor * (1.0 - keep) + extrapolation * keep
    return Frequencies(inv_freq, attention_factor(params, geometry))


def check(params: Params, geometry: Geometry) -> Iterator[tuple[str, str]]:
    """Cross-key rules: YaRN needs a base above 1, and beta_fast must not be below beta_slow."""
    if geometry.theta <= 1:
        yield "rope_theta", f"YaRN divides by ln(rope_theta): rope_theta must be > 1, got {geometry.theta}"
    if params["beta_fast"] < params["beta_slow"]:  # equal is valid: Kimi-K2 ships 1.0 and 1.0
        yield "beta_fast", f"must be >= beta_slow ({params['beta_slow']}), got {params['beta_fast']}"


def landmarks(params: Params, geometry: Geometry) -> dict[str, float]:
    """Wavelengths of beta_fast and beta_slow rotations over the original context."""
    original = params["original_max_position_embeddings"]
    return {
        "original / beta_fast": original / params["beta_fast"],
        "original / beta_slow": original / params["beta_slow"],
    }


SCHEME = Scheme(
    name="yarn",
    examples=EXAMPLES,
    doc="YaRN: NTK-by-parts interpolation between beta_fast and beta_slow, with an attention factor.",
    build=build,
    check=check,
    landmarks=landmarks,
    keys=(
        Key("factor", "float", "Context extension ratio (required: transformers raises without it).",
            required=True, ge=1e-6, le=1e6),
        Key(
            "original_max_position_embeddings",
            "int",
            "Pre-training context length; falls back to the top-level key, then max_position_embeddings.",
            required=True,
            gt=0,
            config_fallback="original_max_position_embeddings",
            default_from_max_positions=True,
        ),
        Key("beta_fast", "float", "Pairs rotating more often than this over the original length are kept.",
            default=32.0, gt=0),
        Key("beta_slow", "float", "Pairs rotating less often than this are fully interpolated.", default=1.0, gt=0),
        Key("truncate", "bool", "Round the ramp's edges to whole pairs (floor/ceil).", default=True),
        Key("attention_factor", "float", "Explicit cos/sin multiplier; wins over the mscale rule.", gt=0),
        Key("mscale", "float", "Numerator weight of the mscale ratio (DeepSeek).", ge=0, le=1e6),
        Key("mscale_all_dim", "float", "Denominator weight of the mscale ratio (DeepSeek).", ge=0, le=1e6),
        Key(
            "max_position_embeddings",
            "int",
            "Ministral-3 repeats it inside the block; like transformers, the table uses the top-level value.",
            gt=0,
        ),
        Key(
            "llama_4_scaling_beta",
            "float",
            "Ministral-3/Mistral-4: query temperature used by the attention, not by this table (carried in params).",
            ge=0,
        ),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``yarn``."""
    return SCHEME
