"""Read the ``ropekit.schemes`` entry-point group once, without importing any plugin."""

from __future__ import annotations

import os
import attrs

__all__ = ["BLOCK_ENV", "ENTRY_POINT_GROUP", "PluginInfo", "blocked_from_env", "discover"]

ENTRY_POINT_GROUP = "ropekit.schemes"
"""The entry-point group plugins register in; the entry-point name is the rope_type."""

BLOCK_ENV = "ROPEKIT_BLOCK"
"""Comma-separated rope_types or distribution names the user does not want loaded."""


@attrs.frozen
class PluginInfo:
    """One entry point: a rope_type, the module serving it and the distribution that ships it."""

    rope_type: str
    target: str
    distribution: str
    version: str


def discover(group: str = ENTRY_POINT_GROUP) -> dict[str, tuple[PluginInfo, ...]]:
    """Every entry point of ``group``, grouped by rope_type (more than one means a conflict).

    Reads installed metadata only; no plugin is imported.
    """
    from importlib.metadata import entry_points

    found: dict[str, list[PluginInfo]] = {}
    for entry_point in entry_points(group=group):
        dist = entry_point.dist
        name = dist.name if dist is not None else "<unknown distribution>"
        version = dist.version if dist is not None else "?"
        info = PluginInfo(entry_point.name, entry_point.value, name, version)
        claims = found.setdefault(entry_point.name, [])
        if all(claim.distribution != name for claim in claims):
            claims.append(info)
    return {rope_type: tuple(claims) for rope_type, claims in sorted(found.items())}


def blocked_from_env(environ: dict[str, str] | None = None) -> frozenset[str]:
    """The names listed in ``$ROPEKIT_BLOCK`` (comma or whitespace separated)."""
    raw = (os.environ if environ is None else environ).get(BLOCK_ENV, "")
    return frozenset(raw.replace(",", " ").split())
