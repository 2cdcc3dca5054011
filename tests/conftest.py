"""Shared fixtures, for every stage's tests: fake installed distributions, so host behaviour is
tested through real entry-point discovery (importlib.metadata), exactly as third-party plugins are
found, and a fresh registry. Paths to the committed data and plain helpers are in ``tests/support.py``."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ropekit import Registry

from .support import MakeDist


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeDist]:
    """Install a fake distribution on ``sys.path``: ``make_dist(name, {rope_type: module}, {module: source})``
    (``group="ropekit.families"`` for family plugins, named by model_type)."""
    created: list[str] = []
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))

    def make(
        name: str, entry_points: dict[str, str], modules: dict[str, str] | None = None, version: str = "1.0",
        group: str = "ropekit.schemes",
    ) -> Path:
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = "\n".join(f"{ep} = {target}" for ep, target in entry_points.items())
        (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")
        for module, source in (modules or {}).items():
            (root / f"{module}.py").write_text(textwrap.dedent(source))
            created.append(module)
        importlib.invalidate_caches()
        return info

    yield make
    for module in created:
        sys.modules.pop(module, None)


@pytest.fixture
def registry() -> Registry:
    """A fresh registry that ignores $ROPEKIT_BLOCK."""
    return Registry(read_env=False)
