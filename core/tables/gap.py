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
        "positions": {
            str(position): {
                "max_angle_error": float((position * difference).max()),
                f"pairs_over_{ANGLE_THRESHOLD}rad": int((position * difference > ANGLE_THRESHOLD).sum()),
            }
            for position in positions
        },
    }


def gap_report(model: ModelRope, positions: Iterable[int] = DEFAULT_POSITIONS) -> dict[str, Any]:
    """The ``ropekit gap --json`` document: :func:`table_gap` per layer type; a layer type
    without RoPE is ``{"no_rope": true}``, per-index NoPE layers are ``no_rope_layers``."""
    chosen = tuple(positions)
    document = model.to_json()
    document["layers"] = {
        name: table_gap(model.tables[name], chosen) if name in model.tables else layer
        for name, layer in document["layers"].items()
    }
    return document
