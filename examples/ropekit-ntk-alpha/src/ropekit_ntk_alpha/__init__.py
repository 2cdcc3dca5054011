"""``ntk_alpha``: static NTK-aware scaling by a base multiplier (HunYuan-style), as a ropekit plugin.

The base becomes ``theta * alpha ** (d / (d - 2))`` (d = rotary dim), so the lowest frequency is
divided by about ``alpha`` while the highest is kept. transformers has no rope_type for it; HunYuan
models ship their own rotary module. Config::

    "rope_scaling": {"rope_type": "ntk_alpha", "alpha": 1000.0}
"""

from __future__ import annotations

from collections.abc import Iterator

from ropekit import Example, Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

__all__ = ["SCHEME", "ropekit_scheme", "scaled_base"]


def scaled_base(theta: float, alpha: float, rotary_dim: int) -> float:
    """The NTK-alpha base: ``theta * alpha ** (d / (d - 2))``."""
    return float(theta * alpha ** (rotary_dim / (rotary_dim - 2)))


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """Plain RoPE over the scaled base; the attention factor stays 1."""
    base = scaled_base(geometry.theta, params["alpha"], geometry.rotary_dim)
    return Frequencies(plain_inv_freq(base, geometry.rotary_dim))


def check(params: Params, geometry: Geometry) -> Iterator[tuple[str, str]]:
    """d / (d - 2) needs a rotary dim above 2."""
    if geometry.rotary_dim <= 2:
        yield "alpha", f"needs a rotary dim > 2, got {geometry.rotary_dim}"


SCHEME = Scheme(
    name="ntk_alpha",
    doc="Static NTK-aware scaling (HunYuan): base = theta * alpha ** (d / (d - 2)).",
    build=build,
    check=check,
    # The upper bound keeps theta * alpha ** (d / (d - 2)) finite; HunYuan ships alpha = 1000.
    keys=(Key("alpha", "float", "Base multiplier; 1 is plain RoPE.", required=True, ge=1, le=1e6),),
    examples=(
        # Exact by hand: d = 4, d / (d - 2) = 2, base = 10000 * 16**2 = 2,560,000, sqrt = 1600.
        Example(
            "exact-d4",
            {"head_dim": 4, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "ntk_alpha", "alpha": 16.0}},
            (1.0, 1 / 1600),
        ),
        # alpha = 1 is plain RoPE: 10000 ** (-2i / 8).
        Example(
            "plain-d8",
            {"head_dim": 8, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "ntk_alpha", "alpha": 1.0}},
            (1.0, 0.1, 0.01, 0.001),
        ),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``ntk_alpha``."""
    return SCHEME
