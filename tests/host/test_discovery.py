"""Discovery's fast path (reading dist-info / egg-info folders directly) must give exactly the
answer ``importlib.metadata`` gives, or it has no right to exist."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ropekit.host.discovery import PluginInfo, _scan_directories, _scan_importlib_metadata

GROUPS = ("ropekit.schemes", "console_scripts", "pytest11")


def _readers() -> list[Any]:
    readers: list[Any] = [pytest.param(importlib.metadata, id="importlib.metadata")]
    try:
        backport: ModuleType | None = importlib.import_module("importlib_metadata")
    except ImportError:  # pragma: no cover - the test extra installs it
        backport = None
    marks = [] if backport is not None else [pytest.mark.skip(reason="importlib_metadata backport not installed")]
    readers.append(pytest.param(backport, id="importlib_metadata-backport", marks=marks))
    return readers


def _normalised(found: dict[str, list[PluginInfo]]) -> dict[str, list[PluginInfo]]:
    return {name: sorted(claims, key=lambda c: c.distribution) for name, claims in sorted(found.items())}


@pytest.mark.parametrize("reader", _readers())
@pytest.mark.parametrize("group", GROUPS)
def test_fast_path_matches_importlib_metadata_on_this_install(reader: Any, group: str) -> None:
    assert _normalised(_scan_directories(group)) == _normalised(_scan_importlib_metadata(group, reader))


def _dist_info(site: Path, folder: str, name: str | None, version: str, entry_points: str) -> None:
    info = site / folder
    info.mkdir()
    header = "Metadata-Version: 2.1\n" + (f"Name: {name}\n" if name else "") + f"Version: {version}\n"
    (info / ("PKG-INFO" if folder.endswith(".egg-info") else "METADATA")).write_text(header + "\nlong description\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.mark.parametrize("reader", _readers())
def test_fast_path_matches_importlib_metadata_on_synthetic_trees(
    reader: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    _dist_info(first, "rope_alpha-1.0.dist-info", "rope-alpha", "1.0",
               "# a comment\n[console_scripts]\nalpha = alpha:main\n\n[ropekit.schemes]\nalpha = alpha_plugin\n"
               "alpha_v0 = alpha_plugin\n")
    _dist_info(first, "Rope.Beta-2.0.dist-info", "Rope.Beta", "2.0",
               "[ropekit.schemes]\n  beta   =   beta.module:attr  \n")
    _dist_info(first, "rope_gamma-0.3-py3.11.egg-info", "rope_gamma", "0.3", "[ropekit.schemes]\ngamma = gamma\n")
    # the same distribution again, later on sys.path: shadowed, its entry points never seen
    _dist_info(second, "rope_alpha-0.9.dist-info", "rope-alpha", "0.9",
               "[ropekit.schemes]\nalpha = old_alpha\nshadowed_only = old_alpha\n")
    # another distribution claiming beta: a real conflict both readers must report
    _dist_info(second, "rope_delta-1.0.dist-info", "rope-delta", "1.0", "[ropekit.schemes]\nbeta = delta_beta\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    importlib.invalidate_caches()

    fast = _normalised(_scan_directories("ropekit.schemes"))
    assert fast == _normalised(_scan_importlib_metadata("ropekit.schemes", reader))
    assert "shadowed_only" not in fast
    assert fast["alpha"] == [PluginInfo("alpha", "alpha_plugin", "rope-alpha", "1.0")]
    assert [claim.distribution for claim in fast["beta"]] == ["Rope.Beta", "rope-delta"]
    assert fast["beta"][0].target == "beta.module:attr"
    assert fast["gamma"] == [PluginInfo("gamma", "gamma", "rope_gamma", "0.3")]
