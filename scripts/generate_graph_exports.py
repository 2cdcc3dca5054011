"""Regenerate the ONNX exports that keep their rotary in the graph (no baked cos/sin cache), offline.

    # optimum-onnx pins its own transformers: give it its own venv
    python -m venv /tmp/optvenv && /tmp/optvenv/bin/pip install torch==2.13.0 optimum-onnx==0.1.0 onnxruntime
    /tmp/optvenv/bin/python scripts/generate_graph_exports.py --producer optimum

    # torch.onnx's dynamo exporter, with the reference transformers
    pip install -e ".[reference]" onnx onnxscript && python scripts/generate_graph_exports.py --producer torch-dynamo

Each case is a tiny random checkpoint (torch seed 0, one layer, vocab 96) exported by the real
producer; ``tests/data/artifacts/graph_<producer>_<case>/`` keeps ``model.onnx`` (+ ``.data``) and
the ``config.json`` it was exported from, and the case is recorded in ``MANIFEST.json``. optimum-onnx
(TorchScript tracing) freezes Phi-3's ``seq_len > original_max_position_embeddings`` branch at the
dummy length: its export serves the short factors at every length, which ``ropekit audit`` shows by
evaluating the graph's rotary on both sides of the switch.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "data" / "artifacts"
PAIRS = 16
TINY: dict[str, Any] = {"vocab_size": 96, "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 1,
                        "num_attention_heads": 2, "num_key_value_heads": 2, "pad_token_id": 0, "bos_token_id": 1,
                        "eos_token_id": 2, "rope_theta": 10000.0}
CASES: dict[str, dict[str, Any]] = {
    "phi3_longrope": {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", **TINY,
                      "max_position_embeddings": 128, "original_max_position_embeddings": 32,
                      "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 10 for i in range(PAIRS)],
                                       "long_factor": [2.0 + i for i in range(PAIRS)]}},
    # original context 256: past the audit's default evaluation length (64), so only evaluating both sides of the
    # switch (256, 257) shows the frozen short factors; audit and repair must read it alike (#33)
    "phi3_longrope_256": {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", **TINY,
                          "max_position_embeddings": 1024, "original_max_position_embeddings": 256,
                          "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 10 for i in range(PAIRS)],
                                           "long_factor": [2.0 + i for i in range(PAIRS)]}},
    "llama3": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **TINY, "max_position_embeddings": 128,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 16}},
}


def checkpoint(config: dict[str, Any], folder: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")  # the hub-style file, as exported


def export_optimum(ckpt: Path, out: Path) -> list[str]:
    command = ["optimum-cli", "export", "onnx", "--model", "HF_DIR", "--task", "text-generation", "OUT"]
    subprocess.run([str(Path(sys.executable).parent / "optimum-cli"), *command[1:4], str(ckpt), *command[5:7],
                    str(out)], check=True)
    return command


def export_dynamo(ckpt: Path, out: Path) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ckpt).eval()

    class Logits(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              use_cache=False).logits

    ids = torch.ones(1, 8, dtype=torch.long)
    dims = {0: "batch_size", 1: "sequence_length"}
    out.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(Logits(model), (ids, torch.ones_like(ids), torch.arange(8)[None]), str(out / "model.onnx"),
                      input_names=["input_ids", "attention_mask", "position_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": dims, "attention_mask": dims, "position_ids": dims}, dynamo=True,
                      opset_version=18)
    return ["torch.onnx.export(model, ..., dynamo=True, opset_version=18)"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--producer", choices=("optimum", "torch-dynamo"), required=True)
    parser.add_argument("--only", nargs="*", help="case names to (re)export; the manifest keeps the others")
    args = parser.parse_args()
    exporter = export_optimum if args.producer == "optimum" else export_dynamo
    package = "optimum-onnx" if args.producer == "optimum" else "torch"
    versions = {name: importlib.metadata.version(name) for name in (package, "transformers", "torch")}
    manifest_path = ARTIFACTS / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    cases = CASES if args.producer == "optimum" else {"phi3_longrope": CASES["phi3_longrope"]}
    cases = {case: config for case, config in cases.items() if not args.only or case in args.only}
    with tempfile.TemporaryDirectory() as work:
        for case, config in cases.items():
            name = f"graph_{args.producer.replace('-', '_')}_{case}"
            ckpt, out = Path(work) / case, Path(work) / f"{case}.onnx"
            checkpoint(config, ckpt)
            command = exporter(ckpt, out)
            dest = ARTIFACTS / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for file in ("model.onnx", "model.onnx.data"):
                if (out / file).exists():
                    shutil.copy(out / file, dest / file)
            (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            manifest["artifacts"][name] = {
                "producer": " ".join(f"{key} {value}" for key, value in versions.items()),
                "command": command,
                "note": f"{case}: rotary kept in the graph (no baked cache)",
                "files": {file.name: file.stat().st_size for file in sorted(dest.iterdir())},
            }
            print(f"wrote {dest}")
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
