"""What tests of every stage share: where the committed data lives, and plain helpers.

The data (``tests/data``): ``golden/`` (tables from transformers, ``scripts/generate_golden.py``),
``artifacts/`` (engine artifacts from the real producers, ``scripts/artifacts/``, one script per producer),
``configs/`` (published configs and derived key lists). Fixtures are in ``tests/conftest.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
"""The checkout (or, in CI, the copy of tests, benchmarks and sample configs)."""
DATA = Path(__file__).resolve().parent / "data"
ARTIFACTS = DATA / "artifacts"
CONFIGS = DATA / "configs"
GOLDEN_FILE = DATA / "golden" / "transformers.json"
SEED_CONFIG = ROOT / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"
"""The seed's Llama-3.2-1B config, as bundled with the package."""
STACKS = ("openvino", "genie")
"""Folders of ``artifacts/`` that hold one producer's cases (and its own MANIFEST.json), one folder each:
OpenVINO IRs (``scripts/artifacts/openvino_export.py``), Genie configs (``scripts/artifacts/genie_config.py``).
Their tests are ``tests/artifacts/test_openvino.py`` and ``test_genie.py``."""


def flat_artifacts() -> list[str]:
    """The artifact folders directly under ``artifacts/`` (one case each, with the config it was made from)."""
    return sorted(path.name for path in ARTIFACTS.iterdir() if path.is_dir() and path.name not in STACKS)


def stack_artifacts() -> list[str]:
    """Every case of the producer stacks, as ``<stack>_<case>``."""
    return sorted(f"{stack}_{path.name}" for stack in STACKS for path in (ARTIFACTS / stack).iterdir()
                  if path.is_dir())

MakeDist = Callable[..., Path]

GOOD_PLUGIN = '''
import numpy as np
from ropekit import Frequencies, Key, Scheme, hookimpl, plain_inv_freq

def build(params, geometry, seq_len):
    return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim) / params["alpha"])

@hookimpl
def ropekit_scheme():
    return Scheme(name=NAME, doc="test scheme", build=build,
                  keys=(Key("alpha", "float", "divisor", required=True, gt=0),))
'''


def plugin_source(name: str, body: str = GOOD_PLUGIN) -> str:
    """Source of a plugin module whose scheme is called ``name``."""
    return f"NAME = {name!r}\n" + textwrap.dedent(body)


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as a module (the generators the tests regenerate and compare)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining classes
    spec.loader.exec_module(module)
    return module
