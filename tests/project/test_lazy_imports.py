"""ropekit's public face is lazy: ``import ropekit``, ``ropekit --help``, ``--version`` and
``list --no-import`` import neither numpy nor the stages that build tables, and every public name
still imports (``from ropekit import X``), lists (``dir``) and type-checks as before. What that saves is
measured by ``benchmarks/cold_start.py`` (no timings here)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ropekit

HEAVY = ("numpy", "ropekit.loader", "ropekit.tables", "ropekit.config", "ropekit.contract.scheme",
         "ropekit.host.loaded", "ropekit.artifacts", "ropekit.tools", "ropekit.plugins")
"""Modules (and their submodules) a command that builds no table must not import."""


def _imported(*argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``python -X importtime -m ropekit ARGV``: the run, and every module it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "ropekit", *argv], capture_output=True,
                          text=True, check=False)
    modules = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, modules - {"package"}


def _heavy(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if any(name == top or name.startswith(top + ".") for top in HEAVY))


@pytest.mark.parametrize(("argv", "needle"), [
    (["--help"], "usage: ropekit"),
    (["--version"], f"ropekit {ropekit.__version__}"),
    (["list", "--no-import"], "llama3  [available]  ropekit"),
    (["list", "--no-import", "--json"], '"rope_type": "llama3"'),
])
def test_the_cheap_commands_import_no_numpy(argv: list[str], needle: str) -> None:
    done, modules = _imported(*argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert needle in done.stdout
    assert {"ropekit", "ropekit.cli.main", "ropekit.errors"} <= modules  # the probe sees ropekit's own imports
    assert _heavy(modules) == []


def test_a_table_still_imports_what_it_needs() -> None:
    """The probe is not blind: a command that builds a table does import numpy and the loader."""
    config = str(Path(ropekit.__file__).parent / "sample_configs" / "llama-3.2-1b-instruct.json")
    done, modules = _imported("table", config, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["layers"]["full_attention"]["rope_type"] == "llama3"
    assert {"numpy", "ropekit.loader", "ropekit.tables.table"} <= modules


def test_import_ropekit_imports_only_its_version_and_errors() -> None:
    code = "import sys, ropekit; print(sorted(name for name in sys.modules if name.startswith(('ropekit', 'numpy'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(["ropekit", "ropekit._version", "ropekit.errors"])


def test_every_public_name_imports_from_a_fresh_process() -> None:
    code = ("import ropekit\nfor name in ropekit.__all__:\n    exec(f'from ropekit import {name}')\n"
            "    assert getattr(ropekit, name) is eval(name), name\nprint(len(ropekit.__all__))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(ropekit.__all__)


def test_the_lazy_names_are_listed_typed_and_homed() -> None:
    """Each lazy name is in ``__all__``, in ``dir(ropekit)``, imported under ``TYPE_CHECKING`` from the
    module it is served from, and is that module's object."""
    import importlib

    lazy = ropekit._LAZY  # the table __getattr__ serves from
    source = Path(ropekit.__file__).read_text(encoding="utf-8")
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                typed.update({alias.name: "." + (statement.module or "") for alias in statement.names})
    assert typed == lazy
    assert set(lazy) <= set(ropekit.__all__) and set(ropekit.__all__) <= set(dir(ropekit))
    for name, home in lazy.items():
        assert getattr(ropekit, name) is getattr(importlib.import_module(home, "ropekit"), name)
    with pytest.raises(AttributeError, match="module 'ropekit' has no attribute 'nothing_here'"):
        ropekit.nothing_here  # noqa: B018
