"""One SHA-256 over the bits of many 3-axis (multimodal) ``cos_sin`` calls, to compare two installs.

A change to how multimodal rows are computed (chunk sizes, threads, gathers) must not change a bit.
Run this with the installed package before and after the change and compare the two lines::

    python scripts/mrope_digest.py            # e.g. in a venv holding the previous release
    python scripts/mrope_digest.py            # and in one holding this checkout

It covers every multimodal case of ``tests/data/golden/mrope.json`` (every composition), 30 position
sets of 1 to 20,000 tokens (image-heavy runs across chunk edges, the same with scattered jumps, a batch
of two, random positions), float16/32/64, neox and gptj (a refusal's message is digested instead), one
thread and the default, each call made twice (the second call may take a kept path). numpy only.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import ropekit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from mrope import image_heavy_positions  # noqa: E402

SIZES = (1, 5, 16, 64, 65, 700, 1500, 2047, 2048, 2049, 4096, 5000, 9000, 20000)


def position_sets() -> list[np.ndarray[Any, np.dtype[np.int64]]]:
    rng = np.random.default_rng(0)
    sets = []
    for count in SIZES:
        sets.append(image_heavy_positions(count))
        jumped = image_heavy_positions(count).copy()
        jumped[:, :, ::7] += rng.integers(0, 50000, size=jumped[:, :, ::7].shape)
        sets.append(np.ascontiguousarray(jumped))
    sets.append(np.ascontiguousarray(np.stack([image_heavy_positions(3000)[:, 0]] * 2, axis=1)))
    sets.append(rng.integers(0, 200000, size=(3, 1, 3000)).astype(np.int64))
    return sets


def main() -> None:
    golden = json.loads((ROOT / "tests" / "data" / "golden" / "mrope.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256()
    calls = 0
    sets = position_sets()
    for case in golden["cases"]:
        rope = ropekit.load(case["config"])
        table = rope[case["layer_type"]] if case["layer_type"] in rope.tables else rope.rotating_table()
        axes = table.mrope_axes
        for positions in sets:
            chosen = positions[:axes] if axes <= 3 else np.concatenate([positions] * 2)[:axes]
            chosen = np.ascontiguousarray(chosen)
            for dtype in ("float32", "float64", "float16"):
                for layout in ("neox", "gptj"):
                    for threads in (1, None):
                        for _ in range(2):
                            try:
                                cos, sin = table.cos_sin(chosen, dtype=dtype, layout=layout, threads=threads)
                            except ropekit.RopekitError as error:
                                digest.update(str(error).encode())
                                continue
                            digest.update(np.ascontiguousarray(cos).tobytes())
                            digest.update(np.ascontiguousarray(sin).tobytes())
                            calls += 1
    print(calls, digest.hexdigest())


if __name__ == "__main__":
    main()
