"""``linear``: position interpolation, plain RoPE divided by ``factor``."""

from __future__ import annotations

from ropekit import Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "ropekit_scheme"]


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """Plain RoPE with every frequency divided by ``factor``."""
    return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim) / params["factor"])


SCHEME = Scheme(
    name="linear",
    doc="Linear position interpolation (kaiokendev): plain RoPE / factor.",
    build=build,
    keys=(Key("factor", "float", "Positions are divided by this.", required=True, ge=1e-6, le=1e6),),
    examples=EXAMPLES,
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``linear``."""
    return SCHEME
