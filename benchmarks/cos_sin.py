"""cos/sin for a Llama-3.1-8B config (head_dim 128, llama3 scaling), float32, neox, at every size.

    python benchmarks/cos_sin.py [--sizes 1,16,256,4096,131072,1048576] [--repeats 9]

For each number of positions it prints, measured in this run (machines are noisy: read the ratios
and medians):
- ropekit ``RopeTable.cos_sin`` allocating with its default threads (up to the cores available,
  as torch's own ops use every core, at least 2048 positions each), on one thread
  (``threads=1``), on at most two (``threads=2``, bit-identical to one), and into preallocated
  buffers (``out=``);
- ``np.copyto`` of the same output bytes into the same buffers (the floor: merely writing it);
- transformers' CPU rotary forward (``LlamaRotaryEmbedding``) and a vLLM-style float32 torch cache
  (``cos(outer(t, inv_freq))``), if torch and transformers are installed (``pip install -e ".[reference]"``);
- each one's max |error| against float64 evaluation at the same positions.
"""

from __future__ import annotations

import argparse
import statistics
import time
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


def median_us(run: Callable[[], object], repeats: int) -> float:
    warm_until = time.perf_counter() + 0.1  # warm-up: the allocator, caches and helper threads settle
    while True:
        run()
        if time.perf_counter() > warm_until:
            break
    samples = []
    number = max(1, int(2e-3 / max(_once(run), 1e-7)))  # batch tiny calls so the timer resolves them
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            run()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples) * 1e6


def _once(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def error(cos: Any, inv_freq: np.ndarray, factor: float) -> float:
    """Max |cos - exact| over the first half of the columns (angles exact in float64 up to ~2**20)."""
    values = np.asarray(cos, dtype=np.float64).reshape(-1, cos.shape[-1])[:, : len(inv_freq)]
    angles = np.arange(values.shape[0], dtype=np.float64)[:, None] * inv_freq[None, :]
    return float(np.abs(values - np.cos(angles) * factor).max())


def llama_rotary_forward(count: int) -> Callable[[], Any] | None:
    """transformers' ``LlamaRotaryEmbedding`` forward at ``count`` positions on the Llama-3.1-8B config,
    returning ``(cos, sin)`` (``None`` without torch and transformers): the reference every benchmark times."""
    try:
        import torch
        from transformers import AutoConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except ImportError:
        return None
    config: Any = AutoConfig.for_model("llama", **LLAMA31_8B)  # a LlamaConfig
    rotary = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, count, 8, dtype=torch.float32)
    position_ids = torch.arange(count)[None]

    def forward() -> Any:
        with torch.no_grad():
            return rotary(x, position_ids)

    return forward


def peers(count: int, table: ropekit.RopeTable) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """transformers' forward and a vLLM-style cache, when torch and transformers are installed."""
    rotary = llama_rotary_forward(count)
    if rotary is None:
        return {}
    import torch

    inv_freq32 = torch.tensor(table.inv_freq, dtype=torch.float32)

    def forward() -> Any:
        return rotary()[0][0]

    def vllm_cache() -> Any:  # vLLM's _compute_cos_sin_cache: float32 angles
        t = torch.arange(count, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, inv_freq32)
        return torch.cat((freqs.cos(), freqs.sin()), dim=-1)

    return {"transformers forward": (forward, lambda: forward().numpy()),
            "vLLM-style torch cache": (vllm_cache, lambda: vllm_cache().numpy())}


def _torch_threads() -> str:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    return f"torch uses {torch.get_num_threads()} threads"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,16,256,4096,131072,1048576")
    parser.add_argument("--positions", type=int, help="a single size (kept for older scripts)")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    sizes = [args.positions] if args.positions else [int(part) for part in args.sizes.split(",")]
    table = ropekit.load(LLAMA31_8B).table
    factor = table.attention_factor
    print(f"cos/sin, Llama-3.1-8B (head_dim 128, llama3), float32, neox; median of {args.repeats} (us per call); "
          f"{_torch_threads()}")
    header = f"{'positions':>9s}  {'what':34s} {'us':>12s} {'x ropekit':>9s} {'max|err|':>9s}"
    print(header)
    for count in sizes:
        shape = (count, table.rotary_dim)
        out = (np.zeros(shape, np.float32), np.zeros(shape, np.float32))
        source = np.ones(shape, np.float32)

        def copy_output(out: tuple[np.ndarray, np.ndarray] = out, source: np.ndarray = source) -> None:
            np.copyto(out[0], source)
            np.copyto(out[1], source)

        def allocating(count: int = count) -> object:
            return table.cos_sin(count)

        def into_buffers(count: int = count, out: tuple[np.ndarray, np.ndarray] = out) -> object:
            return table.cos_sin(count, out=out)

        def one_thread(count: int = count) -> object:
            return table.cos_sin(count, threads=1)

        def two_threads(count: int = count) -> object:
            return table.cos_sin(count, threads=2)

        ours = median_us(allocating, args.repeats)
        rows: list[tuple[str, float, float | None]] = [
            ("ropekit cos_sin (default threads)", ours, error(table.cos_sin(count)[0], table.inv_freq, factor)),
            ("ropekit cos_sin(threads=1)", median_us(one_thread, args.repeats),
             error(table.cos_sin(count, threads=1)[0], table.inv_freq, factor)),
            ("ropekit cos_sin(threads=2)", median_us(two_threads, args.repeats),
             error(table.cos_sin(count, threads=2)[0], table.inv_freq, factor)),
            ("ropekit cos_sin(out=buffers)", median_us(into_buffers, args.repeats),
             error(table.cos_sin(count, out=out)[0], table.inv_freq, factor)),
            ("np.copyto of the output bytes", median_us(copy_output, args.repeats), None),
        ]
        for name, (run, values) in peers(count, table).items():
            rows.append((name, median_us(run, args.repeats), error(values(), table.inv_freq, factor)))
        for name, value, err in rows:
            shown = f"{err:9.1e}" if err is not None else f"{'':9s}"
            print(f"{count:9d}  {name:34s} {value:12.1f} {value / ours:9.2f} {shown}")
        buffers = next(value for name, value, _ in rows if name.startswith("ropekit cos_sin(out"))
        copy = next(value for name, value, _ in rows if name.startswith("np.copyto"))
        one = next(value for name, value, _ in rows if name.endswith("threads=1)"))
        two = next(value for name, value, _ in rows if name.endswith("threads=2)"))
        print(f"{'':9s}  -> out= is {buffers / copy:.2f}x a copy of the output bytes; two threads "
              f"{one / two:.2f}x one")
    print("targets: faster than transformers at every size (>= 4x from 4096), out= <= 2x a copy from 131072, "
          "max error <= 5e-7, two threads >= 1.3x one at 131072")


if __name__ == "__main__":
    main()
