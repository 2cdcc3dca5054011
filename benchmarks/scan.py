"""Configs per second for ``ropekit scan`` on a generated catalogue (goal: at least 2,000 per second).

    python benchmarks/scan.py [--configs 5000] [--runs 5]

The catalogue mimics a Hugging Face hub cache: ``models--org--name/snapshots/<rev>/config.json``
symlinked to blobs, with a mix of real shapes (llama3, longrope, yarn, plain, Gemma-3's two layer
types, NoPE layers, a misspelt key, an unregistered rope_type). It is timed in process
(``ropekit.tools.scan.scan``) and as the command (``ropekit scan --json``, a fresh interpreter), medians of
``--runs``; machines are noisy, so read the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ropekit import Registry
from ropekit.tools.scan import scan

SHAPES: list[dict[str, Any]] = [
    {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 16,
     "max_position_embeddings": 131072, "rope_theta": 500000.0, "vocab_size": 128256, "torch_dtype": "bfloat16",
     "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}},
    {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
     "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
     "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [4.0] * 48}},
    {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
     "rope_theta": 1000000.0, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 32768}},
    {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 1000000.0,
     "sliding_window": 4096, "use_cache": True},
    {"model_type": "gemma3_text", "head_dim": 256, "num_hidden_layers": 12, "rope_theta": 1000000.0,
     "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
     "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
    {"model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 36,
     "rope_theta": 5000000.0, "no_rope_layer_interval": 4},
    {"model_type": "llama", "head_dim": 64, "rope_scalling": {"rope_type": "llama3", "factor": 8.0}},
    {"model_type": "llama", "head_dim": 64, "rope_scaling": {"rope_type": "warp_drive", "factor": 2.0}},
]


def make_catalogue(root: Path, count: int) -> None:
    """``count`` hub-cache snapshots cycling through :data:`SHAPES`."""
    for index in range(count):
        base = root / f"models--org{index % 50}--model{index}"
        (base / "blobs").mkdir(parents=True)
        blob = base / "blobs" / f"{index:040x}"
        blob.write_text(json.dumps(SHAPES[index % len(SHAPES)]))
        snapshot = base / "snapshots" / f"rev{index}"
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").symlink_to(os.path.relpath(blob, snapshot))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        make_catalogue(root, args.configs)
        in_process, command = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            rows = list(scan([str(root)], registry=Registry(read_env=False)))
            in_process.append(time.perf_counter() - start)
            assert len(rows) == args.configs, len(rows)
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ropekit", "scan", str(root), "--json"], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            command.append(time.perf_counter() - start)
    for name, samples in (("in process (ropekit.tools.scan.scan)", in_process), ("ropekit scan --json", command)):
        median = statistics.median(samples)
        print(f"{name:34s} {args.configs / median:9.0f} configs/s  (median of {args.runs}: {median:.2f} s "
              f"for {args.configs})")
    print("goal: at least 2000 configs/s without --audit")


if __name__ == "__main__":
    main()
