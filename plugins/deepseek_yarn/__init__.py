"""``deepseek_yarn``: YaRN as DeepSeek-V2's remote code computes it (``DeepseekV2YarnRotaryEmbedding``), which
Ling v1's ``modeling_bailing_moe.py`` copies and vLLM names ``deepseek_yarn``.

The frequencies are ``yarn``'s (NTK-by-parts between ``beta_fast`` and ``beta_slow``, edges rounded to
whole pairs). Two things differ from transformers' ``yarn``, both from the code's constructor:
``original_max_position_embeddings`` defaults to 4096 when the block leaves it out (not to the config's
``max_position_embeddings``), and cos/sin are always multiplied by ``m(factor, mscale) / m(factor,
mscale_all_dim)`` with ``mscale`` 1 and ``mscale_all_dim`` 0 by default, where ``m(s, k) = 1`` for
``s <= 1`` or ``k == 0`` and ``0.1 * k * ln(s) + 1`` otherwise (transformers' ``yarn`` uses the
ratio only when both are non-zero). A family whose code computes YaRN this way maps its ``yarn`` to
this scheme (``ModelFamily.schemes``).
"""

from __future__ import annotations

import math

from ropekit import Example, Frequencies, Geometry, Key, Params, Scheme, hookimpl
from ropekit.plugins import yarn

__all__ = ["SCHEME", "ropekit_scheme"]


def _mscale(scale: float, weight: float) -> float:
    return 1.0 if scale <= 1 or not weight else 0.1 * weight * math.log(scale) + 1.0


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """yarn's frequencies, with the code's own attention factor (see the module docstring)."""
    factor = float(params["factor"])
    frequencies = yarn.build({**params, "truncate": True, "attention_factor": 1.0}, geometry, seq_len)
    attention = _mscale(factor, params["mscale"]) / _mscale(factor, params["mscale_all_dim"])
    return Frequencies(frequencies.inv_freq, attention)


SCHEME = Scheme(
    name="deepseek_yarn",
    doc="YaRN as DeepSeek-V2's remote code computes it: original length 4096 by default, mscale ratio always.",
    build=build,
    check=yarn.check,
    landmarks=yarn.landmarks,
    keys=(
        Key("factor", "float", "Context extension ratio (the code reads it without a default).", required=True,
            ge=1e-6, le=1e6),
        Key("original_max_position_embeddings", "int", "Pre-training context length (the code's default: 4096).",
            default=4096, gt=0),
        Key("beta_fast", "float", "Pairs rotating more often than this over the original length are kept.",
            default=32.0, gt=0),
        Key("beta_slow", "float", "Pairs rotating less often than this are fully interpolated.", default=1.0, gt=0),
        Key("mscale", "float", "Numerator weight of the cos/sin multiplier.", default=1.0, ge=0, le=1e6),
        Key("mscale_all_dim", "float", "Denominator weight of the cos/sin multiplier (0: 1).", default=0.0, ge=0,
            le=1e6),
    ),
    examples=(
        # d = 4, base 10000, original 64: the ramp spans pairs 0..1, so pair 1 is divided by the factor
        # (0.01 / 4); multiplier m(4, 0.707) / m(4, 0) = 1 + 0.0707 ln 4 (transformers' yarn: 1 + 0.1 ln 4)
        Example("mscale-alone-d4", {"head_dim": 4, "rope_theta": 10000.0, "max_position_embeddings": 256,
                                    "rope_scaling": {"rope_type": "deepseek_yarn", "factor": 4.0, "mscale": 0.707,
                                                     "original_max_position_embeddings": 64}},
                (1.0, 0.0025), attention_factor=1 + 0.0707 * math.log(4)),
        # the code's defaults: original 4096 (ramp 0..2, pair 1 half interpolated: 0.005 / 2 + 0.005), 1 + 0.1 ln 2
        Example("defaults-d4", {"head_dim": 4, "rope_theta": 10000.0, "max_position_embeddings": 256,
                                "rope_scaling": {"rope_type": "deepseek_yarn", "factor": 2.0}},
                (1.0, 0.0075), attention_factor=1 + 0.1 * math.log(2)),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``deepseek_yarn``."""
    return SCHEME
