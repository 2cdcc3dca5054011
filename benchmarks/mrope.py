"""cos/sin at 3-axis (multimodal) positions: ropekit against transformers' own multimodal rotary modules.

    python benchmarks/mrope.py [--sizes 4096,131072] [--repeats 15]

For Qwen2.5-VL-7B (consecutive sections [16, 24, 24]) and Qwen3-VL-8B (interleaved [24, 20, 20]),
head_dim 128, float32, at each size: positions of an image-heavy sequence (text, then 32x32-token
image grids, then text; every axis different), computed by

- ropekit ``RopeTable.cos_sin(positions)`` with ``positions`` of shape ``(3, 1, N)``;
- transformers' ``Qwen2_5_VLRotaryEmbedding`` / ``Qwen3VLTextRotaryEmbedding`` forward on the same
  ``(3, 1, N)`` position ids (needs ``pip install -e ".[reference]"``);

median microseconds per call in this run, the ratio to ropekit, and each one's max |cos error|
against float64 evaluation (transformers forms angles in float32).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

import ropekit

sys.path.insert(0, str(Path(__file__).parent))
from cos_sin import median_us

MODELS: dict[str, dict[str, Any]] = {
    "Qwen2.5-VL-7B": {"model_type": "qwen2_5_vl_text", "hidden_size": 3584, "num_attention_heads": 28,
                      "max_position_embeddings": 128000,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0,
                                          "mrope_section": [16, 24, 24]}},
    "Qwen3-VL-8B": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
                    "max_position_embeddings": 262144,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0,
                                        "mrope_section": [24, 20, 20], "mrope_interleaved": True}},
}


def image_heavy_positions(count: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``(3, 1, count)`` positions: 64 text tokens, then 32x32-token images each followed by 64 text tokens."""
    rows: list[np.ndarray[Any, np.dtype[np.int64]]] = []
    start, used = 0, 0
    while used < count:
        text = np.arange(start, start + 64)
        rows.append(np.stack([text, text, text]))
        start, used = start + 64, used + 64
        h, w = np.divmod(np.arange(32 * 32), 32)
        rows.append(np.stack([np.full(1024, start), start + h, start + w]))
        start, used = start + 32, used + 1024
    return np.concatenate(rows, axis=1)[:, None, :count].astype(np.int64)


def exact_cos(table: ropekit.RopeTable, positions: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """float64 cos the slow, obvious way: each column's own axis times its frequency."""
    mapping = table.mrope_map(table.layout)
    angles = positions[mapping.axis, 0, :].T * table.inv_freq[mapping.freq][None, :]
    exact: np.ndarray[Any, Any] = np.cos(angles) * table.attention_factor
    return exact


def transformers_forward(name: str, config: dict[str, Any], positions: np.ndarray[Any, Any]) -> Any:
    try:
        import torch
        from transformers import AutoConfig
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLRotaryEmbedding
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding
    except ImportError:
        return None
    values = {key: value for key, value in config.items() if key != "model_type"}
    built: Any = AutoConfig.for_model(config["model_type"], **values)
    module = (Qwen2_5_VLRotaryEmbedding if name.startswith("Qwen2.5") else Qwen3VLTextRotaryEmbedding)(built)
    ids = torch.as_tensor(positions)
    x = torch.zeros(1, dtype=torch.float32)

    def forward() -> Any:
        with torch.no_grad():
            return module(x, ids)[0][0]

    return forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4096,131072")
    parser.add_argument("--repeats", type=int, default=15)  # docs/multimodal.md and README: medians of 15
    args = parser.parse_args()
    print(f"cos/sin at 3-axis positions, float32; median of {args.repeats} (us per call)")
    print(f"{'model':14s} {'positions':>9s}  {'what':28s} {'us':>10s} {'x ropekit':>9s} {'max|err|':>9s}")
    for name, config in MODELS.items():
        table = ropekit.load(config).table
        for count in (int(part) for part in args.sizes.split(",")):
            positions = image_heavy_positions(count)
            exact = exact_cos(table, positions)
            def ours_call(table: ropekit.RopeTable = table, positions: np.ndarray[Any, Any] = positions) -> object:
                return table.cos_sin(positions)

            ours = median_us(ours_call, args.repeats)
            rows = [("ropekit cos_sin", ours, float(np.abs(table.cos_sin(positions)[0][0] - exact).max()))]
            forward = transformers_forward(name, config, positions)
            if forward is not None:
                rows.append(("transformers rotary forward", median_us(forward, args.repeats),
                             float(np.abs(forward().numpy().astype(np.float64) - exact).max())))
            for what, value, err in rows:
                print(f"{name:14s} {count:9d}  {what:28s} {value:10.1f} {value / ours:9.2f} {err:9.1e}")
    print("target: ropekit at least as fast as transformers at 4096 and 131072 positions")


if __name__ == "__main__":
    main()
