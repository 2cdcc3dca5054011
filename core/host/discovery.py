"""Read the ``ropekit.schemes`` entry-point group once, without importing any plugin."""

from __future__ import annotations

import os
import re
import sys
from typing import Any, NamedTuple

__all__ = ["ALLOW_ENV", "BLOCK_ENV", "ENTRY_POINT_GROUP", "FAMILY_GROUP", "PluginInfo", "allowed_from_env",
           "blocked_from_env", "discover"]

ENTRY_POINT_GROUP = "ropekit.schemes"
"""The entry-point group plugins register in; the entry-point name is the rope_type."""
FAMILY_GROUP = "ropekit.families"
"""The entry-point group of model-family plugins; the entry-point name is the family's model_type."""

BLOCK_ENV = "ROPEKIT_BLOCK"
"""Comma-separated rope_types, family model_types or distribution names the user does not want loaded."""

ALLOW_ENV = "ROPEKIT_ALLOW"
"""Comma-separated distributions or rope_types that alone may serve (unset or empty: any). A
production loader pins its plugins with it: ``ROPEKIT_ALLOW=ropekit`` serves the built-ins only."""


class PluginInfo(NamedTuple):
    """One entry point: a rope_type, the module serving it and the distribution that ships it."""

    rope_type: str
    target: str
    distribution: str
    version: str


def discover(group: str = ENTRY_POINT_GROUP) -> dict[str, tuple[PluginInfo, ...]]:
    """Every entry point of ``group``, grouped by rope_type (more than one means a conflict).

    Reads installed metadata only; no plugin is imported. When every ``sys.path`` entry is a
    directory (the usual case) the ``*.dist-info`` / ``*.egg-info`` folders are read directly,
    which keeps a cold ``ropekit`` process cheap; otherwise (zipped eggs, custom finders)
    ``importlib.metadata`` does the reading. Both give the same answer: ``tests/test_discovery.py``
    compares them (and the ``importlib_metadata`` backport) on the installed distributions and on
    synthetic dist-info / egg-info trees. As in ``importlib.metadata``, a distribution name seen
    earlier on ``sys.path`` shadows later copies.
    """
    if all(os.path.isdir(entry) or not os.path.exists(entry) for entry in sys.path if entry):
        found = _scan_directories(group)
    else:
        found = _scan_importlib_metadata(group)
    return {rope_type: tuple(claims) for rope_type, claims in sorted(found.items())}


def _claim(found: dict[str, list[PluginInfo]], info: PluginInfo) -> None:
    claims = found.setdefault(info.rope_type, [])
    if all(claim.distribution != info.distribution for claim in claims):
        claims.append(info)


def _scan_importlib_metadata(group: str, metadata: Any = None) -> dict[str, list[PluginInfo]]:
    """The reference reading: ``importlib.metadata`` (or a module with its API, such as the
    ``importlib_metadata`` backport, passed as ``metadata``)."""
    if metadata is None:
        import importlib.metadata as metadata

    found: dict[str, list[PluginInfo]] = {}
    for entry_point in metadata.entry_points(group=group):
        dist = entry_point.dist
        name = dist.name if dist is not None else "<unknown distribution>"
        version = dist.version if dist is not None else "?"
        _claim(found, PluginInfo(entry_point.name, entry_point.value, name, version))
    return found


def _scan_directories(group: str) -> dict[str, list[PluginInfo]]:
    found: dict[str, list[PluginInfo]] = {}
    seen: set[str] = set()
    for entry in sys.path or ["."]:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for folder in names:
            if not folder.endswith((".dist-info", ".egg-info")):
                continue
            metadata_dir = os.path.join(entry or ".", folder)
            key = _normalise(folder.rpartition(".")[0].split("-")[0])
            if key in seen:
                continue
            seen.add(key)
            targets = _group_entries(os.path.join(metadata_dir, "entry_points.txt"), group)
            if targets:
                name, version = _name_and_version(metadata_dir, folder)
                for rope_type, target in targets:
                    _claim(found, PluginInfo(rope_type, target, name, version))
    return found


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _group_entries(path: str, group: str) -> list[tuple[str, str]]:
    try:  # os-level reads: a buffered file object costs four more system calls, for each of a few hundred distributions
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    try:
        chunks = []
        while chunk := os.read(descriptor, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return []
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if group.encode() not in data:  # most distributions: no need to decode and parse
        return []
    text = data.decode("utf-8", errors="replace")
    entries: list[tuple[str, str]] = []
    in_group = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            in_group = line[1:-1].strip() == group
        elif in_group and "=" in line:
            name, _, target = line.partition("=")
            entries.append((name.strip(), target.strip()))
    return entries


def _name_and_version(metadata_dir: str, folder: str) -> tuple[str, str]:
    fields: dict[str, str] = {}
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(metadata_dir, filename), encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        break  # end of the header block
                    field, _, value = line.partition(":")
                    if field in ("Name", "Version"):
                        fields.setdefault(field, value.strip())
        except OSError:
            continue
        break
    stem = folder.rpartition(".")[0]
    return fields.get("Name", stem.split("-")[0]), fields.get("Version", stem.partition("-")[2] or "?")


def blocked_from_env(environ: dict[str, str] | None = None) -> frozenset[str]:
    """The names listed in ``$ROPEKIT_BLOCK`` (comma or whitespace separated)."""
    return _names(BLOCK_ENV, environ)


def allowed_from_env(environ: dict[str, str] | None = None) -> frozenset[str]:
    """The names listed in ``$ROPEKIT_ALLOW`` (empty: no allow-list)."""
    return _names(ALLOW_ENV, environ)


def _names(variable: str, environ: dict[str, str] | None) -> frozenset[str]:
    raw = (os.environ if environ is None else environ).get(variable, "")
    return frozenset(raw.replace(",", " ").split())
