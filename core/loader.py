"""``ropekit.load``: config in, one checked table per layer type out."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from .config import ConfigView, RopeBlock, parse_config, read_config
from .errors import RopeConfigError
from .registry import Registry, default_registry
from .scheme import Scheme
from .table import ModelRope, RopeTable
from .validation import validate_params

__all__ = ["load"]


def load(
    source: Mapping[str, Any] | str | os.PathLike[str],
    *,
    strict: bool = True,
    registry: Registry | None = None,
) -> ModelRope:
    """Load the RoPE tables a model's config declares.

    ``source`` is a config mapping (never mutated), a path to ``config.json``, or a model
    directory. Every layer type's ``rope_type`` is dispatched to its plugin; an unregistered
    rope_type raises :class:`~ropekit.UnknownRopeTypeError` and nothing falls back to plain RoPE.
    Invalid values raise :class:`~ropekit.RopeConfigError` naming the JSON path.
    ``strict=False`` turns unknown keys into warnings; nothing else is relaxed.
    """
    config, origin = read_config(source)
    parsed = parse_config(config)
    registry = registry or default_registry()
    tables = {
        block.layer_type: _table(block, parsed.view, registry, strict=strict) for block in parsed.blocks
    }
    return ModelRope(MappingProxyType(tables), parsed.layer_types, origin)


def _table(block: RopeBlock, view: ConfigView, registry: Registry, *, strict: bool) -> RopeTable:
    scheme = registry.scheme(block.rope_type, path=block.rope_type_path)
    geometry = block.geometry
    _check_dims(scheme, block, view)
    params = validate_params(scheme, block.values, block.path, geometry, view, strict=strict)
    frozen_params = MappingProxyType(dict(params))
    frequencies = registry.build(scheme, frozen_params, geometry, None)
    length = len(frequencies.inv_freq)
    if block.mrope_section is not None and sum(block.mrope_section) != length:
        raise RopeConfigError(
            f"{block.path}.mrope_section",
            f"sections {list(block.mrope_section)} sum to {sum(block.mrope_section)}; "
            f"they must sum to rotary_dim / 2 = {length}",
        )
    return RopeTable(
        layer_type=block.layer_type,
        rope_type=scheme.name,
        params=MappingProxyType(
            {"rope_theta": geometry.theta, "partial_rotary_factor": geometry.partial_rotary_factor, **params}
        ),
        head_dim=geometry.head_dim,
        rotary_dim=2 * length,
        inv_freq=frequencies.inv_freq,
        attention_factor=frequencies.attention_factor,
        seq_len_dependent=scheme.seq_len_dependent,
        seq_len_rule=scheme.seq_len_rule,
        mrope_section=block.mrope_section,
        mrope_interleaved=block.mrope_interleaved,
        switch_at=scheme.switch_at(frozen_params, geometry) if scheme.switch_at is not None else None,
        geometry=geometry,
        landmarks=dict(scheme.landmarks(frozen_params, geometry)) if scheme.landmarks is not None else {},
        rebuild=partial(registry.build, scheme, frozen_params, geometry),
    )


def _check_dims(scheme: Scheme, block: RopeBlock, view: ConfigView) -> None:
    geometry = block.geometry
    if scheme.covers_head:
        if geometry.head_dim % 2:
            problem = f"rope_type {scheme.name!r} needs an even head_dim, got {geometry.head_dim}"
            raise RopeConfigError(view.path("head_dim"), problem)
        return
    rotary = geometry.rotary_dim
    if rotary < 2 or rotary % 2:
        factor_path = (f"{block.path}.partial_rotary_factor" if "partial_rotary_factor" in block.values
                       else view.path("partial_rotary_factor"))
        raise RopeConfigError(
            factor_path if geometry.partial_rotary_factor != 1 else view.path("head_dim"),
            f"rotary dim int(head_dim {geometry.head_dim} * partial_rotary_factor "
            f"{geometry.partial_rotary_factor}) = {rotary} must be even and >= 2",
        )
