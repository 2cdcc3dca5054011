"""The README's loader example runs as it stands, and rotates as transformers' code does."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _loader_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Use it from a loader"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's loader section has no python block"
    return match.group(1)


def _rotate_half_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, in float64."""
    half = x.shape[-1] // 2
    turned = np.concatenate((-x[..., half:], x[..., :half]), axis=-1)
    rotated: np.ndarray = x * cos + turned * sin
    return rotated


def test_the_readme_loader_block_runs_and_rotates_right() -> None:
    namespace: dict[str, object] = {}
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)  # the block names the bundled config by its path in a clone
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(_loader_block(), "README.md", "exec"), namespace)  # the README's own code
    finally:
        os.chdir(cwd)
    lines = printed.getvalue().splitlines()
    assert lines[0] == "llama3 1.0 64 64 32"  # as the block's comment says
    assert "contradicts the cache" in lines[1] and "gptj" in lines[1]  # the misuse was refused
    table, q, q_rot = namespace["table"], namespace["q"], namespace["q_rot"]
    # the rotation the README gives equals rotate-half at float64 angles of the llama3 inv_freq
    inv_freq = table.inv_freq  # type: ignore[attr-defined]
    angles = np.arange(4096, 4112, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.concatenate((np.cos(angles), np.cos(angles)), axis=-1)
    sin = np.concatenate((np.sin(angles), np.sin(angles)), axis=-1)
    want = _rotate_half_reference(np.asarray(q, dtype=np.float64), cos, sin)
    assert isinstance(q_rot, np.ndarray)
    np.testing.assert_allclose(q_rot, want, rtol=0, atol=2e-5)
