"""Cold-process cost of ``ropekit table CONFIG --json`` and of ``ropekit --help`` against ``python -c "import numpy"``.

    python benchmarks/cold_start.py [--runs 21] [--config PATH] [--installs] [--help-only]

``ropekit --help`` (and ``--version``, ``list --no-import``) import neither numpy nor the stages that
build tables: its ratio to the numpy import is printed last (``--help-only`` times just those two).

Each command runs in a fresh interpreter, interleaved with the others, ``--runs`` times; the
medians and their ratios are printed (machines are noisy: read the ratios). Python writes and
reuses bytecode as it does by default (``PYTHONDONTWRITEBYTECODE`` is dropped for the timed
processes: with it, an editable install recompiles every module of ropekit on every run).
``--installs`` also times ropekit from a fresh wheel install and a fresh editable install: two
clean temporary virtualenvs (no system site-packages, so no ``.pth`` hooks of this machine's
Python weigh on either side), each with its own numpy, attrs and pluggy from pip. If transformers and
torch are importable (``pip install -e ".[reference]"``) the same table computed through
transformers' own rotary module is timed as well.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_CONFIG = ROOT / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}

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
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start


def _venv(folder: Path, editable: bool) -> str:
    """A clean virtualenv with ropekit and its runtime dependencies installed from this checkout."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = str(folder / "bin" / "python")
    target = ["-e", str(ROOT)] if editable else [str(ROOT)]
    subprocess.run([python, "-m", "pip", "install", "-q", *target], check=True, env=ENV)
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--config", default=str(SEED_CONFIG))
    parser.add_argument("--installs", action="store_true", help="also time fresh wheel and editable installs")
    parser.add_argument("--help-only", action="store_true", help="time only `ropekit --help` and the numpy import")
    args = parser.parse_args()
    commands = {
        "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
        "import numpy, attrs, pluggy": [sys.executable, "-c", "import numpy, attrs, pluggy"],
        "ropekit table --json": [sys.executable, "-m", "ropekit", "table", args.config, "--json"],
        "ropekit --help": [sys.executable, "-m", "ropekit", "--help"],
        "ropekit list --no-import": [sys.executable, "-m", "ropekit", "list", "--no-import"],
    }
    if args.help_only:
        commands = {name: commands[name] for name in ("python -c 'import numpy'", "ropekit --help")}
    scratch = tempfile.TemporaryDirectory()
    if args.installs and not args.help_only:
        for kind, editable in (("wheel", False), ("editable", True)):
            python = _venv(Path(scratch.name) / kind, editable)
            commands[f"import numpy ({kind} venv)"] = [python, "-c", "import numpy"]
            commands[f"import numpy, attrs, pluggy ({kind})"] = [python, "-c", "import numpy, attrs, pluggy"]
            script = str(Path(python).parent / "ropekit")  # the console script a user types
            commands[f"ropekit table --json ({kind})"] = [script, "table", args.config, "--json"]
    if _has_transformers() and not args.help_only:
        commands["transformers (same table)"] = [sys.executable, "-c", TRANSFORMERS_SNIPPET, args.config]
    for command in commands.values():  # warm the page cache once
        _time(command)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, command in commands.items():
            samples[name].append(_time(command))
    print(f"{'command':36s} {'median ms':>10s} {'x numpy import':>15s}   ({args.runs} runs each, interleaved; "
          "each ratio against 'import numpy' by the same interpreter)")
    for name, values in samples.items():
        median = statistics.median(values)
        group = name[name.index("(") + 1 : name.index(")")].split()[0] if "(" in name else None
        base = f"import numpy ({group} venv)" if group in ("wheel", "editable") else "python -c 'import numpy'"
        baseline = statistics.median(samples[base])
        print(f"{name:36s} {median * 1000:10.1f} {median / baseline:15.2f}")
    scratch.cleanup()
    helped, numpy_import = (statistics.median(samples[name]) for name in ("ropekit --help", "python -c 'import numpy'"))
    print(f"ropekit --help / python -c 'import numpy': {helped * 1000:.1f} / {numpy_import * 1000:.1f} ms = "
          f"{helped / numpy_import:.2f} (medians of {args.runs}; below 1: --help imports no numpy)")
    if not args.help_only:
        print("target: ropekit <= 1.3x the numpy-import process ('import numpy, attrs, pluggy' is the floor its "
              "dependencies set)")


if __name__ == "__main__":
    main()
