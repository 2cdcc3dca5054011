"""``longrope`` (legacy name ``su``): Phi-3's per-pair rescaling with short and long factor lists.

Sequence-length rule (as transformers' rotary module): a sequence of ``seq_len`` positions uses
``long_factor`` when ``seq_len > original_max_position_embeddings``, else ``short_factor``; the
table at load time (no seq_len) is the short one. Engines differ here; switching mid-sequence
invalidates a KV cache built with the other table.
"""

from __future__ import annotations

import math

from ropekit import Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "ropekit_scheme"]


def _uses_long(params: Params, seq_len: int | None) -> bool:
    return seq_len is not None and seq_len > params["original_max_position_embeddings"]


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """``inv_freq = plain / ext``, ext = long or short factors; attention factor per Phi-3."""
    original = params["original_max_position_embeddings"]
    factor = params["factor"]
    if factor is None:
        factor = (geometry.max_position_embeddings or original) / original
    long = _uses_long(params, seq_len)
    attention = params["attention_factor"]
    mscale = params["long_mscale" if long else "short_mscale"]
    if mscale is not None:  # PhiMoE: the regime's mscale is the cos/sin multiplier, at load time too
        attention = mscale
    elif attention is None:
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = params["long_factor" if long else "short_factor"]
    return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim) / ext, attention)


def switch_at(params: Params, geometry: Geometry) -> int:
    """Sequences longer than ``original_max_position_embeddings`` use the long factors."""
    return int(params["original_max_position_embeddings"])


SCHEME = Scheme(
    name="longrope",
    examples=EXAMPLES,
    doc="LongRoPE (Phi-3): plain RoPE divided per pair by short_factor or long_factor, chosen by seq_len.",
    build=build,
    aliases=("su",),
    seq_len_dependent=True,
    seq_len_rule="long_factor when seq_len > original_max_position_embeddings, else short_factor "
    "(the load-time table is the short one)",
    switch_at=switch_at,
    landmarks=lambda params, geometry: {"original_max_position_embeddings": params["original_max_position_embeddings"]},
    keys=(
        Key(
            "short_factor",
            "float_list",
            "Per-pair divisors for sequences within the original length.",
            required=True,
            ge=1e-6,
            le=1e6,
            per_pair=True,
        ),
        Key(
            "long_factor",
            "float_list",
            "Per-pair divisors for sequences beyond the original length.",
            required=True,
            ge=1e-6,
            le=1e6,
            per_pair=True,
        ),
        Key(
            "original_max_position_embeddings",
            "int",
            "Pre-training context length; falls back to the top-level key (Phi-3), then max_position_embeddings.",
            required=True,
            gt=1,  # ln(original) divides the default attention factor
            config_fallback="original_max_position_embeddings",
            default_from_max_positions=True,
        ),
        Key("factor", "float", "Context extension ratio; absent: max_position_embeddings / original.", gt=0),
        Key("attention_factor", "float", "cos/sin multiplier; absent: sqrt(1 + ln(factor) / ln(original)).", gt=0),
        Key("short_mscale", "float", "PhiMoE: attention factor for sequences within the original length.", gt=0),
        Key("long_mscale", "float", "PhiMoE: attention factor for sequences beyond the original length.", gt=0),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``longrope``."""
    return SCHEME
