"""``default``: plain RoPE, ``inv_freq[i] = theta ** (-2i / rotary_dim)``, with partial rotary.

Also serves the alias ``mrope``, which Qwen2-VL configs declare for plain RoPE split into
``mrope_section`` bands.
"""

from __future__ import annotations

from ropekit import Frequencies, Geometry, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "ropekit_scheme"]


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """Plain RoPE over the rotary part of the head."""
    return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim))


SCHEME = Scheme(
    name="default",
    doc="Plain RoPE (Su et al.): theta ** (-2i / rotary_dim); rotary_dim = head_dim * partial_rotary_factor.",
    build=build,
    aliases=("mrope",),
    examples=EXAMPLES,
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``default``."""
    return SCHEME
