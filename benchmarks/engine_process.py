"""The allocating ``cos_sin`` call where an engine makes it: a process with torch loaded and busy.

    python benchmarks/engine_process.py [--rounds 9] [--sizes 4096,131072,1048576] [--plain] [--quick]

An engine builds each layer type's cos/sin cache once, at ``max_position_embeddings``, in a process
where torch is running. Each round here, for each size N (Llama-3.1-8B's table, head_dim 128,
float32, neox, one call each, every call right after a transformers rotary forward of the same N, so
torch's thread pool and allocator have just run):

- ``alloc``: ``table.cos_sin(N)``, the allocating call an engine makes;
- ``out=``: ``table.cos_sin(N, out=(cos, sin))`` into buffers allocated once;
- ``floor``: numpy alone, the allocation floor: ``np.empty`` of both outputs and a first write of every
  byte (``fill``), what any fresh output costs;
- ``transformers``: ``LlamaRotaryEmbedding.forward`` at N positions (the reference; torch at its default
  threads).

Printed per size: medians, ``alloc / (out= + floor)`` (goal <= 1.5) and ``transformers / alloc``
(goal >= 4 at 131072 and 2**20), each the median of the per-round ratios, and what the kernel did
during the allocating calls (minor faults, transparent huge pages allocated and fallen back, direct
compaction stalls from /proc/vmstat): the measurements that tell the candidate causes apart. Then the
same for a model with two layer types (Gemma-3, one cache per layer type). ``--plain`` runs the same
rows in a process that never imports torch (no transformers column).
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import ropekit

sys.path.insert(0, str(Path(__file__).parent))
from cos_sin import LLAMA31_8B, llama_rotary_forward

ROOT = Path(__file__).resolve().parent.parent
GEMMA3 = ROOT / "tests" / "data" / "configs" / "published" / "gemma-3-1b-it.json"
VMSTAT = ("thp_fault_alloc", "thp_fault_fallback", "compact_stall")


def _vmstat() -> dict[str, int]:
    try:
        with open("/proc/vmstat") as handle:
            pairs = (line.split() for line in handle)
            return {key: int(value) for key, value in pairs if key in VMSTAT}
    except OSError:
        return {}


def timed(run: Callable[[], object]) -> tuple[float, dict[str, int]]:
    """Seconds of one call of ``run``, and the kernel's counters during it (minor faults included)."""
    before, faults = _vmstat(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    run()
    took = time.perf_counter() - start
    after = _vmstat()
    counters = {key: after[key] - before[key] for key in after if key in before}
    counters["minor_faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return took, counters


def reference(count: int) -> Callable[[], object] | None:
    """transformers' Llama rotary forward at ``count`` positions (``None`` without torch), default threads."""
    return llama_rotary_forward(count)


def floor(count: int, width: int) -> Callable[[], object]:
    """numpy alone: both outputs allocated (one block, as cos_sin allocates them) and every byte written."""
    def run() -> object:
        both = np.empty((2, count, width), dtype=np.float32)
        both.fill(0.0)
        return both
    return run


def measure(table: ropekit.RopeTable, count: int, rounds: int, busy: Callable[[], object] | None) -> dict[str, Any]:
    """Paired rounds at ``count`` positions: each call after ``busy`` (torch's forward) when given."""
    width = table.rotary_dim
    out = (np.empty((count, width), np.float32), np.empty((count, width), np.float32))
    calls: dict[str, Callable[[], object]] = {
        "alloc": lambda: table.cos_sin(count),
        "out=": lambda: table.cos_sin(count, out=out),
        "floor": floor(count, width),
    }
    times: dict[str, list[float]] = {name: [] for name in [*calls, "transformers"]}
    kernel: list[dict[str, int]] = []
    for call in calls.values():  # warm: the table's plan, helper threads, numpy's caches
        call()
    for _ in range(rounds):
        for name, call in calls.items():
            if busy is not None:
                took, _ = timed(busy)
                if name == "alloc":
                    times["transformers"].append(took)
            gc.collect()
            took, counters = timed(call)
            times[name].append(took)
            if name == "alloc":
                kernel.append(counters)
    per_round = list(zip(*(times[name] for name in ("alloc", "out=", "floor")), strict=True))
    result: dict[str, Any] = {name: statistics.median(values) for name, values in times.items() if values}
    result["alloc / (out= + floor)"] = statistics.median(a / (o + f) for a, o, f in per_round)
    if times["transformers"]:
        result["transformers / alloc"] = statistics.median(
            t / a for t, a in zip(times["transformers"], times["alloc"], strict=True))
    result["kernel"] = {key: statistics.median(row.get(key, 0) for row in kernel) for key in kernel[0]}
    result["alloc max"] = max(times["alloc"])
    return result


def report(label: str, table: ropekit.RopeTable, sizes: list[int], rounds: int, engine: bool,
           compared: bool = True) -> list[bool]:
    """Print one block of rows; return whether each goal was met. ``compared``: the reference is this
    table's model (Llama-3.1-8B), so ``tf/alloc`` is a goal; else torch's forward only keeps torch busy."""
    met: list[bool] = []
    print(f"\n{label}: paired medians of {rounds} rounds, {'torch busy before each call' if engine else 'no torch'}")
    print(f"{'positions':>9s} {'alloc ms':>9s} {'(max)':>7s} {'out= ms':>8s} {'floor ms':>9s} {'tf ms':>8s} "
          f"{'alloc/(out+floor)':>18s} {'tf/alloc':>9s}  kernel during alloc")
    for count in sizes:
        busy = reference(count) if engine else None
        row = measure(table, count, rounds, busy)
        ratio = row["alloc / (out= + floor)"]
        versus = row.get("transformers / alloc") if compared else None
        kernel = ", ".join(f"{key} {value:g}" for key, value in row["kernel"].items())
        reference_ms = row.get("transformers", float("nan")) * 1e3 if compared else float("nan")
        print(f"{count:9d} {row['alloc'] * 1e3:9.2f} {row['alloc max'] * 1e3:7.1f} {row['out='] * 1e3:8.2f} "
              f"{row['floor'] * 1e3:9.2f} {reference_ms:8.1f} {ratio:18.2f} "
              f"{versus if versus is not None else float('nan'):9.2f}  {kernel}")
        met.append(ratio <= 1.5)
        print(f"{'':9s} -> alloc within 1.5x of out= + floor: {'met' if ratio <= 1.5 else 'NOT MET'}")
        if versus is not None and count >= 131072:
            met.append(versus >= 4.0)
            print(f"{'':9s} -> alloc >= 4x transformers' forward: {'met' if versus >= 4.0 else 'NOT MET'}")
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sizes", default="4096,131072,1048576")
    parser.add_argument("--plain", action="store_true", help="a process without torch (no transformers column)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds at 4096")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    sizes = [4096] if args.quick else [int(size) for size in args.sizes.split(",")]
    engine = not args.plain and reference(1) is not None
    if not args.plain and not engine:
        print("torch and transformers are not installed: the engine-process rows run without them")
    met = report("Llama-3.1-8B", ropekit.load(LLAMA31_8B).table, sizes, rounds, engine)
    gemma = ropekit.load(GEMMA3)
    for layer_type in gemma.listed_types:  # one cache per layer type, at max_position_embeddings
        table = gemma.rotating_table(layer_type)
        length = min(table.geometry.max_position_embeddings or 32768, max(sizes))
        met += report(f"Gemma-3-1B {layer_type} (torch busy with Llama's forward; no tf/alloc goal)", table,
                      [length], rounds, engine, compared=False)
    print(f"\n{sum(met)} of {len(met)} goals met")


if __name__ == "__main__":
    main()
