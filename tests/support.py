"""What tests of every stage share: where the committed data lives, and plain helpers.

The data (``tests/data``): ``golden/`` (tables from transformers, ``scripts/generate_golden.py``),
``artifacts/`` (engine artifacts from the real producers, ``scripts/artifacts/``, one script per producer),
``configs/`` (published configs and derived key lists). Fixtures are in ``tests/conftest.py``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout (or, in CI, the copy of tests, benchmarks and sample configs)."""
DATA = Path(__file__).resolve().parent / "data"
ARTIFACTS = DATA / "artifacts"
CONFIGS = DATA / "configs"
GOLDEN_FILE = DATA / "golden" / "transformers.json"
SEED_CONFIG = ROOT / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"
"""The seed's Llama-3.2-1B config, as bundled with the package."""

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
