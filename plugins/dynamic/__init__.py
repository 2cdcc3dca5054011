"""``dynamic``: dynamic NTK-aware scaling (the base grows with the sequence length).

Sequence-length rule (as a freshly built transformers rotary module): a sequence of ``seq_len``
positions uses ``base = theta * (factor * seq_len / max_pos - (factor - 1)) ** (d / (d - 2))``
when ``seq_len > max_position_embeddings``, else the plain table. transformers keeps the largest
table it has grown to until a sequence shorter than ``max_position_embeddings`` arrives; ropekit's
``at(seq_len)`` is stateless.
"""

from __future__ import annotations

from collections.abc import Iterator

from ropekit import Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "ropekit_scheme"]


def scaled_base(params: Params, geometry: Geometry, seq_len: int | None) -> float:
    """The NTK base for ``seq_len`` (``theta`` itself up to ``max_position_embeddings``)."""
    max_positions = geometry.max_position_embeddings
    assert max_positions is not None  # check() guarantees it
    length = max(seq_len or max_positions, max_positions)
    factor = params["factor"]
    dim = geometry.rotary_dim
    # transformers' factor * length / max - (factor - 1), rearranged so that it is exactly 1 at
    # length == max whatever the factor (the original cancels catastrophically for large factors)
    growth = float(factor * (length / max_positions - 1) + 1) ** (dim / (dim - 2))
    return float(geometry.theta * growth)


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """Plain RoPE over the NTK-scaled base."""
    return Frequencies(plain_inv_freq(scaled_base(params, geometry, seq_len), geometry.rotary_dim))


def check(params: Params, geometry: Geometry) -> Iterator[tuple[str, str]]:
    """The base formula needs max_position_embeddings and a rotary dim above 2."""
    if geometry.max_position_embeddings is None:
        yield "max_position_embeddings", "missing: rope_type 'dynamic' needs it (seq_len / max_position_embeddings)"
    if geometry.rotary_dim <= 2:
        blamed = "partial_rotary_factor" if geometry.partial_rotary_factor != 1 else "head_dim"
        yield blamed, f"rope_type 'dynamic' needs a rotary dim > 2 (d / (d - 2)), got {geometry.rotary_dim}"


def switch_at(params: Params, geometry: Geometry) -> int:
    """The table changes for sequences longer than ``max_position_embeddings``."""
    return int(geometry.max_position_embeddings or 0)


SCHEME = Scheme(
    name="dynamic",
    examples=EXAMPLES,
    doc="Dynamic NTK scaling: the base grows with seq_len once it exceeds max_position_embeddings.",
    build=build,
    check=check,
    seq_len_dependent=True,
    seq_len_rule="recomputed for seq_len > max_position_embeddings with that seq_len; plain table otherwise",
    switch_at=switch_at,
    landmarks=lambda params, geometry: {"max_position_embeddings": geometry.max_position_embeddings or 0},
    # factor >= 1 keeps factor * seq_len / max_pos - (factor - 1) >= 1 for seq_len >= max_pos,
    # so the scaled base can never become non-positive (or shrink below theta).
    keys=(Key("factor", "float", "NTK scaling factor.", required=True, ge=1, le=1e6),),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``dynamic``."""
    return SCHEME
