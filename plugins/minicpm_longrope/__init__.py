"""``minicpm_longrope``: LongRoPE as MiniCPM4's code computes it (its ``MiniCPMLongRoPE``).

Like ``longrope``, each pair's frequency is divided by a per-pair factor and cos/sin are multiplied
by ``sqrt(1 + ln(max_position_embeddings / original) / ln(original))``. Unlike it, the factor set is
chosen for the cache MiniCPM4 builds at ``max_position_embeddings`` and rebuilds only for a longer
sequence: ``long_factor`` for every position whenever ``max_position_embeddings >
original_max_position_embeddings``; else ``short_factor`` up to ``max_position_embeddings`` and
``long_factor`` past it (``switch_at``). The multiplier is computed once, from
max_position_embeddings. A ``minicpm`` config's ``"rope_type": "longrope"`` is served by this scheme
(the family declaration maps it).
"""

from __future__ import annotations

import math

from ropekit import Example, Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

__all__ = ["SCHEME", "ropekit_scheme"]


def _longest(params: Params, geometry: Geometry) -> int:
    return int(geometry.max_position_embeddings or params["original_max_position_embeddings"])


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """The factor set of MiniCPM4's cache, built at ``max_position_embeddings`` and rebuilt only for a
    longer sequence (``seq_len``); the cos/sin multiplier it computes once, from max_position_embeddings."""
    original = params["original_max_position_embeddings"]
    longest = _longest(params, geometry)
    cached = max(longest, seq_len or 0)
    ext = params["long_factor" if cached > original else "short_factor"]
    attention = math.sqrt(1 + math.log(longest / original) / math.log(original))
    return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim) / ext, attention)


def check(params: Params, geometry: Geometry) -> list[tuple[str, str]]:
    """MiniCPM4's multiplier takes the log of max_position_embeddings / original, unclamped: below 1
    it would shrink cos and sin, which no MiniCPM checkpoint does; refused rather than guessed."""
    if _longest(params, geometry) < params["original_max_position_embeddings"]:
        return [("original_max_position_embeddings",
                 f"{params['original_max_position_embeddings']} exceeds max_position_embeddings "
                 f"{geometry.max_position_embeddings}; MiniCPM4's code would scale cos/sin below 1")]
    return []


def switch_at(params: Params, geometry: Geometry) -> int:
    """Past this length the cache is rebuilt for the sequence, with the long factors (a change only when
    max_position_embeddings is the original length: the short factors served up to it)."""
    return max(_longest(params, geometry), int(params["original_max_position_embeddings"]))


SCHEME = Scheme(
    name="minicpm_longrope",
    doc="LongRoPE as MiniCPM4 computes it: the factor set of its cache at max_position_embeddings, every position.",
    build=build,
    check=check,
    seq_len_dependent=True,
    seq_len_rule="the factor set of the cache MiniCPM4 builds at max(max_position_embeddings, seq_len): long_factor "
    "when that exceeds original_max_position_embeddings, else short_factor",
    switch_at=switch_at,
    keys=(
        Key("short_factor", "float_list", "Per-pair divisors, used when max_position_embeddings <= original.",
            required=True, ge=1e-6, le=1e6, per_pair=True),
        Key("long_factor", "float_list", "Per-pair divisors, used when max_position_embeddings > original.",
            required=True, ge=1e-6, le=1e6, per_pair=True),
        Key("original_max_position_embeddings", "int", "Pre-training context length (MiniCPM4 reads it here).",
            required=True, gt=1),
    ),
    examples=(
        # d = 4, base 10000: plain (1, 0.01); max 4096 > original 1024: long factors (2, 4) -> (0.5, 0.0025);
        # attention sqrt(1 + ln 4 / ln 1024) = sqrt(1.2)
        Example("long-d4", {"head_dim": 4, "rope_theta": 10000.0, "max_position_embeddings": 4096,
                            "rope_scaling": {"rope_type": "minicpm_longrope", "short_factor": [1.0, 1.0],
                                             "long_factor": [2.0, 4.0], "original_max_position_embeddings": 1024}},
                (0.5, 0.0025), attention_factor=math.sqrt(1.2)),
        # max == original: short factors, multiplier 1
        Example("short-d4", {"head_dim": 4, "rope_theta": 10000.0, "max_position_embeddings": 1024,
                             "rope_scaling": {"rope_type": "minicpm_longrope", "short_factor": [1.0, 2.0],
                                              "long_factor": [2.0, 4.0], "original_max_position_embeddings": 1024}},
                (1.0, 0.005)),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``minicpm_longrope``."""
    return SCHEME
