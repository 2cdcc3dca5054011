"""Cold-process cost of ``ropekit table CONFIG --json`` against ``python -c "import numpy"``.

    python benchmarks/cold_start.py [--runs 21] [--config PATH]

Each command runs in a fresh interpreter, interleaved with the others, ``--runs`` times; the
medians and their ratios are printed (machines are noisy: read the ratios). If transformers and
torch are importable (``pip install -e ".[reference]"``) the same table computed through
transformers' own rotary module is timed as well.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

SEED_CONFIG = Path(__file__).resolve().parent.parent / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"

TRANSFORMERS_SNIPPET = """
import json, sys
from transformers import AutoConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
raw = json.load(open(sys.argv[1])); raw.pop("model_type", None)
rotary = LlamaRotaryEmbedding(AutoConfig.for_model("llama", **raw))
json.dump({"inv_freq": rotary.inv_freq.tolist(), "attention_factor": rotary.attention_scaling}, sys.stdout)
"""


def _has_transformers() -> bool:
    probe = [sys.executable, "-c", "import transformers, torch"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--config", default=str(SEED_CONFIG))
    args = parser.parse_args()
    commands = {
        "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
        "ropekit table --json": [sys.executable, "-m", "ropekit", "table", args.config, "--json"],
    }
    if _has_transformers():
        commands["transformers (same table)"] = [sys.executable, "-c", TRANSFORMERS_SNIPPET, args.config]
    for command in commands.values():  # warm the page cache once
        _time(command)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            samples[name].append(_time(command))
    baseline = statistics.median(samples["python -c 'import numpy'"])
    print(f"{'command':32s} {'median ms':>10s} {'x numpy import':>15s}   ({args.runs} runs each, interleaved)")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:32s} {median * 1000:10.1f} {median / baseline:15.2f}")
    print("target: ropekit <= 1.5x the numpy-import process")


if __name__ == "__main__":
    main()
