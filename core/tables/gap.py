"""How far a table is from plain RoPE of the same theta and dims: the seed defect, measured."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..contract.scheme import plain_inv_freq
from .table import ModelRope, RopeTable

__all__ = ["ANGLE_THRESHOLD", "DEFAULT_POSITIONS", "gap_report", "table_gap"]

DEFAULT_POSITIONS = (128, 1024, 2048, 8192, 32768, 131072)
ANGLE_THRESHOLD = 0.1
"""Radians; ``pairs_over_0.1rad`` counts pairs whose angle error exceeds it."""


def table_gap(table: RopeTable, positions: Iterable[int]) -> dict[str, Any]:
    """Compare ``table`` with plain RoPE (``theta ** (-2i / rotary_dim)``, same length).

    ``max_ratio`` is the largest plain / scheme ratio over pairs with a non-zero scheme frequency
    (pairs a scheme does not rotate count as scaled). Angle error at position P is
    ``P * |plain - scheme|`` radians.
    """
    scheme = table.inv_freq
    plain = plain_inv_freq(table.geometry.theta, table.rotary_dim, len(scheme))
    rotating = scheme > 0
    ratio = np.divide(plain, scheme, out=np.full_like(plain, np.inf), where=rotating)
    scaled = ~np.isclose(plain, scheme, rtol=1e-12, atol=0.0)
    difference = np.abs(plain - scheme)
    return {
        "rope_type": table.rope_type,
        "pairs": len(scheme),
        "scaled_pairs": int(scaled.sum()),
        "max_ratio": float(ratio[rotating].max()) if rotating.any() else None,
        "unrotated_pairs": int((~rotating).sum()),
        **({"seq_len": table.seq_len, "seq_len_rule": table.rule.text, "switch_at": table.rule.switch_at}
           if table.rule is not None else {}),
        "positions": {
            str(position): {
                "max_angle_error": float((position * difference).max()),
                f"pairs_over_{ANGLE_THRESHOLD}rad": int((position * difference > ANGLE_THRESHOLD).sum()),
            }
            for position in positions
        },
    }


def gap_report(
    model: ModelRope, positions: Iterable[int] = DEFAULT_POSITIONS, *, seq_len: int | None = None,
) -> dict[str, Any]:
    """The ``ropekit gap --json`` document: :func:`table_gap` per layer type the model has; a layer
    type without RoPE is ``{"no_rope": true}``, per-index NoPE layers are ``no_rope_layers``.

    A seq-len-dependent table (dynamic, longrope) is compared in the regime of a sequence reaching
    the largest position (``seq_len = max(positions) + 1``, transformers' rule), or at ``seq_len``
    when given; its entry says which (``seq_len``, ``seq_len_rule``, ``switch_at``). A model
    already taken :meth:`~ropekit.ModelRope.at` a length is compared as it is unless ``seq_len`` is given.
    """
    chosen = tuple(positions)
    if seq_len is not None:
        model = model.at(seq_len)
    elif chosen and any(table.seq_len_dependent and table.seq_len is None for table in model.tables.values()):
        model = model.at(max(chosen) + 1)
    document = model.to_json()
    for name in document["layers"]:
        table = model[name]
        if table is not None:
            document["layers"][name] = table_gap(table, chosen)
    return document
