"""Producer: optimum-intel's OpenVINO export (``OVModelForCausalLM.from_pretrained(CKPT, export=True)``, the code
path of ``optimum-cli export openvino``) -> ``openvino_model.xml`` / ``.bin`` and the ``config.json`` optimum-intel
saves beside them, for tiny random checkpoints declaring each RoPE scheme the NPU stack meets. The checkpoint's own
``config.json`` is kept as ``checkpoint_config.json`` (for Phi-3 optimum-intel rewrites ``max_position_embeddings``
in the one it saves: the trap ``ropekit audit`` must name).

It runs in a producer virtualenv of its own (optimum-intel 2.2 needs transformers < 5.6)::

    python3 -m venv /tmp/venv-ov
    /tmp/venv-ov/bin/pip install torch==2.13.0 "optimum-intel[openvino]==2.2.*" "transformers<5.6"
    /tmp/venv-ov/bin/pip uninstall -y torchvision   # a CUDA build pulled by optimum; it breaks AutoProcessor
    /tmp/venv-ov/bin/python scripts/artifacts/openvino_export.py --skip gemma3

optimum-intel 2.2 refuses to export Gemma-3 text with transformers above 5.0 (its ``GemmaOpenVINOConfig`` caps
``MAX_TRANSFORMERS_VERSION`` at 5.0), so that case comes from a second producer virtualenv with
``"transformers>=5.0,<5.1"`` (otherwise the same)::

    /tmp/venv-ov5/bin/python scripts/artifacts/openvino_export.py --only gemma3

Nothing is downloaded: the weights are random (torch seed 0), no tokenizer is written (the export does not need
one). Each case also records, in ``tests/data/artifacts/openvino/MANIFEST.json``, the versions that made it and the
largest logit difference between the IR (run by OpenVINO) and transformers on the same weights, at a length below
and above ``max_position_embeddings``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "data" / "artifacts" / "openvino"
SEED = 0

TINY: dict[str, Any] = {
    "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
    "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 96, "rms_norm_eps": 1e-5,
    "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "torch_dtype": "float32",
}
LLAMA: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 10000.0,
                         "max_position_embeddings": 256, **TINY}

CASES: dict[str, dict[str, Any]] = {
    "llama_default": {**LLAMA},
    "llama_linear": {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "llama3": {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
    "llama_yarn": {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                             "original_max_position_embeddings": 64}},
    "llama_dynamic": {**LLAMA, "max_position_embeddings": 64,
                      "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "phi3_longrope": {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "rope_theta": 10000.0,
        "max_position_embeddings": 256, "original_max_position_embeddings": 64, "pad_token_id": 0,
        **TINY,
        "rope_scaling": {"type": "longrope",
                         "short_factor": [1.0 + 0.05 * i for i in range(16)],
                         "long_factor": [1.0 + 0.6 * i for i in range(16)]},
    },
    "gemma3": {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "max_position_embeddings": 256, "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"], "query_pre_attn_scalar": 32,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "pad_token_id": 0, **TINY,
    },
}


def build_checkpoint(config: dict[str, Any], folder: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), torch_dtype=torch.float32)
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")  # keep the hub-style file


def logits_error(ckpt: Path, ir: Path, lengths: list[int]) -> dict[str, float]:
    """Largest |logit| difference between transformers and the IR (OpenVINO CPU) per sequence length."""
    import numpy as np
    import torch
    from optimum.intel import OVModelForCausalLM
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
    served = OVModelForCausalLM.from_pretrained(ir, compile=True, ov_config={"INFERENCE_PRECISION_HINT": "f32"})
    found = {}
    for length in lengths:
        ids = torch.tensor([[3 + (7 * i) % 90 for i in range(length)]])
        with torch.no_grad():
            want = reference(input_ids=ids).logits.numpy()
        got = served(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.numpy()
        found[str(length)] = float(np.abs(want - got).max())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--skip", nargs="*", default=())
    args = parser.parse_args()
    from optimum.intel import OVModelForCausalLM

    manifest_path = OUT / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"cases": {}}
    versions = {name: importlib.metadata.version(name)
                for name in ("optimum-intel", "openvino", "transformers", "torch")}
    with tempfile.TemporaryDirectory() as work:
        for name, config in CASES.items():
            if (args.only and name not in args.only) or name in args.skip:
                continue
            ckpt, ir = Path(work) / name / "hf", Path(work) / name / "ir"
            build_checkpoint(config, ckpt)
            model = OVModelForCausalLM.from_pretrained(ckpt, export=True, compile=False, load_in_8bit=False)
            model.save_pretrained(ir)
            dest = OUT / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for file in ("openvino_model.xml", "openvino_model.bin", "config.json"):
                shutil.copy(ir / file, dest / file)
            shutil.copy(ckpt / "config.json", dest / "checkpoint_config.json")
            maximum = int(config["max_position_embeddings"])
            manifest["cases"][name] = {
                "command": "OVModelForCausalLM.from_pretrained(CKPT, export=True, load_in_8bit=False)"
                           ".save_pretrained(IR)",
                "versions": versions,
                "files": {file.name: file.stat().st_size for file in sorted(dest.iterdir())},
                "max_abs_logit_error": logits_error(ckpt, ir, [maximum // 2, maximum + 16]),
            }
            print(name, manifest["cases"][name]["max_abs_logit_error"], flush=True)
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
