"""ropekit's package shows its pipeline: no import cycle, no import from a lower stage to a higher
one, and the public import paths users were given keep working."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

import ropekit

from .imports import STAGES, find_cycle, import_graph, modules_under, private_imports, upward_imports


def _ropekit_sources() -> dict[str, Path]:
    core = Path(ropekit.__file__).parent
    sources = modules_under(core, "ropekit", skip=("plugins", "sample_configs"))
    spec = importlib.util.find_spec("ropekit.plugins")
    assert spec is not None and spec.submodule_search_locations
    plugins = Path(next(iter(spec.submodule_search_locations)))
    sources.update(modules_under(plugins, "ropekit.plugins"))
    return sources


def test_the_graph_sees_every_module_and_the_imports_between_them() -> None:
    sources = _ropekit_sources()
    graph = import_graph(sources, "ropekit")
    assert {"ropekit", "ropekit.loader", "ropekit.tables.rotary", "ropekit.plugins.llama3",
            "ropekit.cli.main"} <= set(graph)
    assert "ropekit.errors" in graph["ropekit.config.parse"]
    assert "ropekit.tables.plan" in graph["ropekit.tables.fill"]
    assert "ropekit.host.loaded" in graph["ropekit.tables.table"]  # a type-only import is an edge
    assert "ropekit.artifacts.formats.onnx.pack" in graph["ropekit.artifacts.formats.onnx"]  # a lazy import is an edge
    assert "ropekit" in graph["ropekit.plugins.llama3"]  # `from ropekit import ...`: the package itself


def test_ropekit_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph(_ropekit_sources(), "ropekit"))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_import_goes_to_the_same_room_or_a_lower_stage() -> None:
    assert upward_imports(import_graph(_ropekit_sources(), "ropekit"), STAGES) == []


def test_no_private_name_crosses_a_module_boundary() -> None:
    """A module's ``_private`` names are its own: another module that needs one gets a public name."""
    assert private_imports(_ropekit_sources(), "ropekit") == []


def test_read_audit_and_repair_never_import_a_format() -> None:
    """The dispatchers find a format through ``artifacts.format``'s lazy table, and the neutral core
    below the formats imports none either: only a format imports its own modules."""
    graph = import_graph(_ropekit_sources(), "ropekit")
    for module, targets in graph.items():
        if module.startswith("ropekit.artifacts.formats"):
            continue
        assert not {target for target in targets if target.startswith("ropekit.artifacts.formats")}, module


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return modules_under(root, "pkg")


def test_a_cycle_is_found_through_lazy_type_only_and_package_imports(tmp_path: Path) -> None:
    sources = _write(tmp_path, {
        "__init__.py": "from .low.a import A\n__version__ = '1'\n",
        "low/__init__.py": "",
        "low/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nA = 1\n",
        "low/b.py": "def f():\n    from ..high import version\n",
        "high.py": "from . import __version__ as version\n",
    })
    graph = import_graph(sources, "pkg")
    assert graph["pkg.high"] == {"pkg"}
    assert find_cycle(graph) == ["pkg", "pkg.low.a", "pkg.low.b", "pkg.high", "pkg"]
    del graph["pkg.high"]
    assert find_cycle(graph) is None


def test_an_upward_or_sideways_import_and_an_undeclared_module_are_reported(tmp_path: Path) -> None:
    sources = _write(tmp_path, {
        "__init__.py": "",
        "low.py": "import pkg.high.tool\n",
        "side.py": "from .low import x\n",
        "peer.py": "from .side import y\n",
        "high/__init__.py": "",
        "high/tool.py": "from ..low import z\n",
        "stray.py": "",
    })
    stages = (frozenset({"pkg.low"}), frozenset({"pkg.side", "pkg.peer"}), frozenset({"pkg.high", "pkg"}))
    assert upward_imports(import_graph(sources, "pkg"), stages) == [
        "pkg.low (stage 0, pkg.low) imports pkg.high.tool (stage 2, pkg.high)",
        "pkg.peer (stage 1, pkg.peer) imports pkg.side (stage 1, pkg.side)",
        "pkg.stray: in no declared stage",
    ]


@pytest.mark.parametrize(("path", "name", "home"), [
    ("ropekit", "load", "ropekit.loader"),
    ("ropekit", "hookimpl", "ropekit.contract.hookspecs"),
    ("ropekit", "RopeTable", "ropekit.tables.table"),
    ("ropekit.errors", "RopeConfigError", "ropekit.errors"),
    ("ropekit.discovery", "BLOCK_ENV", "ropekit.host.discovery"),
    ("ropekit.discovery", "PluginInfo", "ropekit.host.discovery"),
    ("ropekit.registry", "SchemeStatus", "ropekit.host.registry"),
    ("ropekit.families", "CLASS_THETA", "ropekit.config.families"),
    ("ropekit.testing", "conformance_suite", "ropekit.tools.conformance"),
    ("ropekit.testing", "run_checks", "ropekit.tools.conformance"),
    ("ropekit.torch", "RotaryEmbedding", "ropekit.engines.torch"),
    ("ropekit.torch", "audit_module", "ropekit.engines.torch"),
    ("ropekit.mlx", "fast_rope", "ropekit.engines.mlx"),
    ("ropekit.cli", "main", "ropekit.cli.main"),
])
def test_public_import_paths_keep_working(path: str, name: str, home: str) -> None:
    if path in ("ropekit.torch", "ropekit.mlx"):
        pytest.importorskip(path.split(".")[1], reason=f"{path} needs its framework installed")
    public = importlib.import_module(path)
    assert getattr(public, name) is getattr(importlib.import_module(home), name)
    assert name in getattr(public, "__all__", ())


@pytest.mark.parametrize("path", ["ropekit.discovery", "ropekit.registry", "ropekit.families", "ropekit.testing",
                                  "ropekit.torch", "ropekit.mlx"])
def test_a_kept_path_re_exports_everything_its_module_lists(path: str) -> None:
    if path in ("ropekit.torch", "ropekit.mlx"):
        pytest.importorskip(path.split(".")[1], reason=f"{path} needs its framework installed")
    public = importlib.import_module(path)
    home = importlib.import_module(public.__doc__.split(":mod:`")[-1].split("`")[0] if public.__doc__ else "")
    assert list(public.__all__) == list(home.__all__)
    assert all(getattr(public, name) is getattr(home, name) for name in home.__all__)


def test_a_private_name_imported_or_used_from_another_module_is_reported(tmp_path: Path) -> None:
    sources = _write(tmp_path, {
        "__init__.py": "",
        "low.py": "_hidden = 1\ndef _helper(): pass\nshown = 2\n",
        "a.py": "from .low import _hidden, shown\n",
        "b.py": "from . import low\nlow._helper()\nlow.shown\n",
        "c.py": "import pkg.low as low\nx = low._hidden\n",
        "d.py": "from .low import shown\nclass _Own: pass\n_Own()\n",
    })
    assert private_imports(sources, "pkg") == [
        "pkg.a (line 1) imports _hidden from pkg.low",
        "pkg.b (line 2) uses pkg.low._helper",
        "pkg.c (line 2) uses pkg.low._hidden",
    ]
