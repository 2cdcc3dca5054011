"""``proportional`` (Gemma-4 global layers): rotate the first ``partial_rotary_factor`` of the
pairs with exponents over the whole ``head_dim``; the remaining pairs get ``inv_freq = 0``.

This is not partial rotary: exponents are ``2i / head_dim`` (not ``2i / rotary_dim``) and the
table always has ``head_dim / 2`` entries, so a forward rotates the whole head.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ropekit import Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "ropekit_scheme"]


def _rotated_pairs(geometry: Geometry) -> int:
    return int(geometry.partial_rotary_factor * geometry.head_dim // 2)


def check(params: Params, geometry: Geometry) -> Iterator[tuple[str, str]]:
    """At least one pair must rotate: a table of zeros would serve no RoPE at all."""
    if _rotated_pairs(geometry) < 1:
        yield "partial_rotary_factor", (
            f"{geometry.partial_rotary_factor} rotates int({geometry.partial_rotary_factor} * head_dim "
            f"{geometry.head_dim} // 2) = 0 pairs; it must rotate at least one (>= {2 / geometry.head_dim:g})")


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """transformers' ``_compute_proportional_rope_parameters`` in float64."""
    half = geometry.head_dim // 2
    rotated = _rotated_pairs(geometry)
    inv_freq = np.zeros(half, dtype=np.float64)
    inv_freq[:rotated] = plain_inv_freq(geometry.theta, geometry.head_dim, rotated)
    return Frequencies(inv_freq / params["factor"])


SCHEME = Scheme(
    name="proportional",
    examples=EXAMPLES,
    doc="Gemma-4 proportional RoPE: exponents over head_dim, pairs past partial_rotary_factor not rotated.",
    build=build,
    check=check,
    covers_head=True,
    keys=(Key("factor", "float", "Divisor of every frequency (linear scaling).", default=1.0, ge=1e-6, le=1e6),),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``proportional``."""
    return SCHEME
