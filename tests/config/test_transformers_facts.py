"""The facts ropekit holds about transformers' classes are derived from transformers itself, at the
pinned reference release: regenerating them must give the committed file exactly."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest

from ropekit.config.classes import transformers_version

from ..support import ROOT

SCRIPT = ROOT / "scripts" / "transformers_classes.py"
COMMITTED = ROOT / "core" / "config" / "transformers_classes.json"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("transformers_classes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_class_facts_are_what_the_pinned_transformers_gives() -> None:
    transformers = pytest.importorskip("transformers", reason="the reference extra (pip install -e '.[reference]')")
    if transformers.__version__ != transformers_version():
        pytest.skip(f"transformers {transformers.__version__} is installed; the facts are for "
                    f"{transformers_version()} (the reference extra pins it)")
    fresh = _script().build()
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert fresh["transformers"] == committed["transformers"]
    differing = sorted(name for name in fresh["classes"].keys() | committed["classes"].keys()
                       if fresh["classes"].get(name) != committed["classes"].get(name))
    assert differing == [], f"regenerate with {committed['command']}: {differing[:20]}"
