"""``ntk``: fixed and mixed NTK scaling as Alibaba's GTE ``new`` code computes it (``NTKScalingRotaryEmbedding``,
after https://kexue.fm/archives/9706), and vLLM's ``ntk`` rope_type.

Its code builds the cache at ``max_position_embeddings * factor``, past ``max_position_embeddings``, so for a
factor above 1 the scaled frequencies serve every position (the table does not depend on the sequence
length). Fixed NTK: ``(base * factor) ** (-2i / d) / factor ** (2 / d)``; mixed (``mixed_b`` set):
``base ** (-2i / d) / exp(a * (i + 1) ** mixed_b)`` with ``a = ln(factor) / (d / 2) ** mixed_b``. A factor
of 1 or below leaves the plain table.
"""

from __future__ import annotations

import math

import numpy as np

from ropekit import Example, Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

__all__ = ["SCHEME", "ropekit_scheme"]


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """``NTKScalingRotaryEmbedding._set_cos_sin_cache`` in float64 (see the module docstring)."""
    dim, base, factor = geometry.rotary_dim, geometry.theta, float(params["factor"])
    if factor <= 1:  # its cache is then not longer than max_position_embeddings: the plain table
        return Frequencies(plain_inv_freq(base, dim), 1.0)
    mixed = params["mixed_b"]
    if mixed is None:
        return Frequencies(plain_inv_freq(base * factor, dim) / factor ** (2 / dim), 1.0)
    weight = math.log(factor) / (dim / 2) ** mixed
    divisor = np.exp(weight * np.arange(1, dim // 2 + 1, dtype=np.float64) ** mixed)
    return Frequencies(plain_inv_freq(base, dim) / divisor, 1.0)


SCHEME = Scheme(
    name="ntk",
    doc="Fixed or mixed NTK scaling (Alibaba GTE's code, vLLM's ntk): scaled frequencies at every position.",
    build=build,
    keys=(
        Key("factor", "float", "Context extension ratio (the code reads it without a default).", required=True,
            gt=0, le=1e6),
        Key("mixed_b", "float", "Mixed NTK's exponent b (absent: fixed NTK; 0 divides every pair by the factor).",
            ge=0, le=1e3),
    ),
    examples=(
        # d = 4, base 10000, factor 4: (4e4 ** 0, 4e4 ** -0.5) / 4 ** 0.5 = (0.5, 0.0025)
        Example("fixed-d4", {"head_dim": 4, "rope_theta": 10000.0,
                             "rope_scaling": {"rope_type": "ntk", "factor": 4.0}}, (0.5, 0.0025)),
        # mixed_b 2: a = ln 4 / 2 ** 2; (1 / e ** a, 0.01 / e ** (4 a)) = (4 ** -0.25, 0.0025)
        Example("mixed-d4", {"head_dim": 4, "rope_theta": 10000.0,
                             "rope_scaling": {"rope_type": "ntk", "factor": 4.0, "mixed_b": 2.0}},
                (4 ** -0.25, 0.0025)),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``ntk``."""
    return SCHEME
