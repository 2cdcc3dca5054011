"""cos/sin for a Llama-3.1-8B config (head_dim 128), 131072 positions, float32, neox layout.

    python benchmarks/cos_sin.py [--positions 131072] [--repeats 9]

Prints medians measured in this run and their ratios (machines are noisy; read the ratios):
- ropekit ``RopeTable.cos_sin`` into preallocated buffers (``out=``) and freshly allocated;
- ``np.copyto`` of the same number of bytes (the floor: merely writing the output);
- transformers' CPU rotary forward (``LlamaRotaryEmbedding``), if torch and transformers are
  installed (``pip install -e ".[reference]"``), and its max |cos error|;
- max |error| of ropekit against float64 evaluation at positions up to 2**20;
- peak extra memory of the call (tracemalloc sees numpy's allocations) against its output size.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import ropekit

LLAMA31_8B: dict[str, Any] = {
    "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def median_ms(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def max_error(table: ropekit.RopeTable, chunk: int = 1 << 15) -> float:
    """Max |error| over every position below 2**20 (in chunks), plus scattered positions."""
    worst = 0.0
    rng = np.random.default_rng(0)
    runs: list[range | np.ndarray] = [range(start, start + chunk) for start in range(0, 1 << 20, chunk)]
    for positions in [*runs, np.sort(rng.integers(0, 1 << 20, 8192))]:
        cos, sin = table.cos_sin(positions)
        angles = np.asarray(positions, dtype=np.float64)[:, None] * table.inv_freq[None, :]
        pairs = len(table.inv_freq)
        for got, want in ((cos, np.cos(angles)), (sin, np.sin(angles))):
            want = want * table.attention_factor
            worst = max(worst, float(np.abs(got[:, :pairs] - want).max()), float(np.abs(got[:, pairs:] - want).max()))
    return worst


def transformers_forward(count: int) -> tuple[Callable[[], tuple[Any, Any]], float] | None:
    try:
        import torch
        from transformers import AutoConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except ImportError:
        return None
    torch.set_num_threads(torch.get_num_threads())
    rotary = LlamaRotaryEmbedding(AutoConfig.for_model("llama", **LLAMA31_8B))
    x = torch.zeros(1, count, 8, dtype=torch.float32)
    position_ids = torch.arange(count)[None]

    def run() -> tuple[Any, Any]:
        with torch.no_grad():
            cos, sin = rotary(x, position_ids)
            return cos, sin

    cos, _ = run()
    angles = np.arange(count, dtype=np.float64)[:, None] * rotary.inv_freq.double().numpy()[None, :]
    error = float(np.abs(cos[0, :, :64].double().numpy() - np.cos(angles) * rotary.attention_scaling).max())
    return run, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=131072)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    count = args.positions
    table = ropekit.load(LLAMA31_8B).table
    shape = (count, table.rotary_dim)
    out = (np.zeros(shape, np.float32), np.zeros(shape, np.float32))
    source = np.ones(shape, np.float32)
    output_bytes = 2 * source.nbytes

    def copy_output() -> None:
        np.copyto(out[0], source)
        np.copyto(out[1], source)

    rows: dict[str, float] = {
        "np.copyto of the output bytes": median_ms(copy_output, args.repeats),
        "ropekit cos_sin(out=buffers)": median_ms(lambda: table.cos_sin(count, out=out), args.repeats),
        "ropekit cos_sin (allocating)": median_ms(lambda: table.cos_sin(count), args.repeats),
    }
    reference = transformers_forward(count)
    if reference is not None:
        rows["transformers LlamaRotaryEmbedding"] = median_ms(reference[0], args.repeats)

    tracemalloc.start()
    table.cos_sin(count, out=out)
    _, peak_into = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    result = table.cos_sin(count)
    _, peak_alloc = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result

    copy = rows["np.copyto of the output bytes"]
    print(f"cos/sin, Llama-3.1-8B (head_dim 128), {count} positions, float32, neox; median of {args.repeats}")
    print(f"{'':40s} {'ms':>8s} {'x copyto':>9s}")
    for name, value in rows.items():
        print(f"{name:40s} {value:8.1f} {value / copy:9.2f}")
    if reference is not None:
        speedup = rows["transformers LlamaRotaryEmbedding"] / rows["ropekit cos_sin (allocating)"]
        print(f"speed-up over transformers (both allocating): {speedup:.1f}x   (target >= 4x)")
        print(f"transformers max |cos error| over {count} positions: {reference[1]:.2e}")
    else:
        print("transformers not installed: pip install -e '.[reference]' to compare")
    print(f"ropekit max |error| vs float64 at every position below 2**20: {max_error(table):.2e}   (target <= 5e-7)")
    print(f"peak extra memory: {peak_into / 2**20:.1f} MiB into buffers, {(peak_alloc - output_bytes) / 2**20:.1f} MiB "
          f"beyond the {output_bytes / 2**20:.0f} MiB output when allocating "
          f"({peak_alloc / output_bytes:.2f}x output; target <= 1.5x)")
    print("target: cos_sin within 3x of np.copyto")


if __name__ == "__main__":
    main()
