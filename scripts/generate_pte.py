"""Regenerate the ExecuTorch programs (``.pte``) under ``tests/data/artifacts/pte_*``, offline.

    python3.11 -m venv /tmp/etvenv && /tmp/etvenv/bin/pip install torch==2.13.0   # the CPU build first
    /tmp/etvenv/bin/pip install -e ".[executorch]"                               # executorch==1.5.1
    /tmp/etvenv/bin/python scripts/generate_pte.py

Only this script needs executorch: ropekit reads the committed programs with the stdlib and numpy
(``ropekit.artifacts.formats.pte.program``). Every case is one tiny random checkpoint of ExecuTorch's own Llama
example (``executorch.examples.models.llama``: dim 16, one layer, one head of 16, vocab 16, llama3
scaling factor 32, rope_theta 500000, as Llama-3.2 declares) exported with 64 positions:

* ``pte_llama32_export_llm``: ExecuTorch's LLM export CLI (``export_llm``) with ``base.model_class=llama3_2``
  (portable kernels): the table the checkpoint trained with;
* ``pte_llama32_as_llama31``: the same checkpoint and params through ``base.model_class=llama3_1``:
  ExecuTorch's export takes the llama3 factor from the model class (8 for llama3/llama3_1, 32 for every
  other class), not from the checkpoint, so the program serves factor 8;
* ``pte_llama32_xnnpack``: ``export_llm`` lowered to XNNPACK (``backend.xnnpack.enabled``, sdpa with kv
  cache): the rope tables stay program constants (the gather on them is not delegated);
* ``pte_llama32_fp16``: ``export_llm`` with ``model.dtype_override=fp16``: the tables are stored as HALF;
* ``pte_llama32_ptd``: the Llama example exported in Python with
  ``ExecutorchBackendConfig(external_constants=True)``: every constant lives in
  ``_default_external_constant.ptd`` (the name ExecuTorch writes), under its fully qualified name.

Each folder keeps ``config.json`` (the Hugging Face config the checkpoint declares: llama3 factor 32) and
the program; ``MANIFEST.json`` records the command and, read back with executorch's own deserializer, the
served table's per-pair ratio to plain RoPE.
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
POSITIONS = 64
PARAMS: dict[str, Any] = {"dim": 16, "n_layers": 1, "n_heads": 1, "n_kv_heads": 1, "vocab_size": 16,
                          "multiple_of": 16, "ffn_dim_multiplier": None, "norm_eps": 1e-5, "rope_theta": 500000.0,
                          "use_scaled_rope": True}
"""ExecuTorch's params.json for the checkpoint (the format Meta's Llama checkpoints ship with)."""
CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16, "intermediate_size": 48,
    "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 16,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "float32", "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}
"""What the checkpoint trained with, as its Hugging Face config declares it (Llama-3.2's llama3 scaling)."""
EXPORT_LLM = [sys.executable, "-m", "executorch.extension.llm.export.export_llm"]
CLI_CASES: dict[str, tuple[str, list[str], str]] = {
    "pte_llama32_export_llm": ("llama3_2", [], "export_llm as llama3_2 (portable): the checkpoint's factor 32"),
    "pte_llama32_as_llama31": ("llama3_1", [], "the same checkpoint through export_llm as llama3_1: ExecuTorch's "
                               "class factor 8 served, not the checkpoint's 32"),
    "pte_llama32_xnnpack": ("llama3_2", ["backend.xnnpack.enabled=True", "model.use_sdpa_with_kv_cache=True"],
                            "export_llm as llama3_2 lowered to XNNPACK: the tables stay program constants"),
    "pte_llama32_fp16": ("llama3_2", ["model.dtype_override=fp16"],
                         "export_llm as llama3_2 with dtype_override fp16: HALF tables"),
}
PTD_CASE = "pte_llama32_ptd"


def checkpoint(work: Path) -> tuple[Path, Path]:
    """ExecuTorch's Llama example at ``PARAMS`` (torch seed 0), saved as params.json + consolidated .pth."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params, ckpt = work / "params.json", work / "consolidated.00.pth"
    params.write_text(json.dumps(PARAMS))
    torch.manual_seed(0)
    model = construct_transformer(ModelArgs(**PARAMS, max_seq_len=POSITIONS, max_context_len=POSITIONS))
    # the rope buffers are not persistent: the checkpoint holds weights only, as Meta's do
    torch.save({key: value for key, value in model.state_dict().items() if "freqs" not in key}, ckpt)
    return params, ckpt


def export_llm(model_class: str, extra: list[str], params: Path, ckpt: Path, out: Path) -> list[str]:
    """Run ExecuTorch's export CLI; the returned command names paths as placeholders."""
    options = [f"base.model_class={model_class}", "base.params=PARAMS", "base.checkpoint=CHECKPOINT",
               "model.use_kv_cache=True", *extra, f"export.max_seq_length={POSITIONS}",
               f"export.max_context_length={POSITIONS}", "export.output_dir=OUT", "export.output_name=model.pte"]
    real = [option.replace("PARAMS", str(params)).replace("CHECKPOINT", str(ckpt)).replace("=OUT", f"={out}")
            for option in options]
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([*EXPORT_LLM, *real], check=True, cwd=out, stdout=subprocess.DEVNULL)
    return ["python", "-m", "executorch.extension.llm.export.export_llm", *options]


def export_ptd(ckpt: Path, out: Path) -> list[str]:
    """The Llama example exported in Python with every constant in an external ``.ptd``."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge

    torch.set_grad_enabled(False)  # as export_llama does: the kv cache's in-place copy_ needs it
    args = ModelArgs(**PARAMS, max_seq_len=POSITIONS, max_context_len=POSITIONS, use_kv_cache=True,
                     rope_scale_factor=32)  # what export_llm sets for llama3_2
    model = construct_transformer(args).eval()
    model.load_state_dict(torch.load(ckpt), strict=False)
    example = (torch.tensor([[1]], dtype=torch.long), {"input_pos": torch.tensor([0], dtype=torch.long)})
    exported = torch.export.export(model, example, strict=False)  # forward(tokens, attn_options)
    program = to_edge(exported, compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch(
        ExecutorchBackendConfig(external_constants=True))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "model.pte", "wb") as file:
        program.write_to_file(file)
    program.write_tensor_data_to_file(str(out))
    return ["torch.export.export(construct_transformer(ModelArgs(..., use_kv_cache=True, rope_scale_factor=32)))",
            "to_edge(...).to_executorch(ExecutorchBackendConfig(external_constants=True))",
            "write_to_file(model.pte); write_tensor_data_to_file(OUT)"]


def measure(folder: Path) -> dict[str, Any]:
    """The served rope table read back with executorch's own deserializer (constants inline) or its
    flat_tensor reader (a ``.ptd``): per pair, plain RoPE's inv_freq over the served one (row 1's angle)."""
    import numpy as np
    from executorch.exir._serialize._program import deserialize_pte_binary

    pairs = CONFIG["head_dim"] // 2
    plain = [CONFIG["rope_theta"] ** (-2 * i / CONFIG["head_dim"]) for i in range(pairs)]
    program = deserialize_pte_binary((folder / "model.pte").read_bytes()).program
    tables: dict[str, Any] = {}
    external = _external_data(folder)
    for value in program.execution_plan[0].values:
        tensor = value.val
        if type(tensor).__name__ != "Tensor" or list(tensor.sizes) != [POSITIONS, pairs]:
            continue
        if tensor.allocation_info is not None:
            continue
        dtype = np.float16 if int(tensor.scalar_type) == 5 else np.float32
        info = tensor.extra_tensor_info
        if info is not None and info.fully_qualified_name in external:
            raw = external[info.fully_qualified_name]
            name = info.fully_qualified_name
        else:
            raw = bytes(program.constant_buffer[tensor.data_buffer_idx].storage)
            name = f"constant_buffer[{tensor.data_buffer_idx}]"
        array = np.frombuffer(raw[: POSITIONS * pairs * np.dtype(dtype).itemsize], dtype).reshape(POSITIONS, pairs)
        tables[name] = array
    stored_cos = next(a for a in tables.values() if np.allclose(a[0], 1.0))
    stored_sin = next(a for a in tables.values() if np.allclose(a[0], 0.0) and np.any(a != 0))
    cos, sin = stored_cos.astype(np.float64), stored_sin.astype(np.float64)
    served = np.arctan2(sin[1], cos[1])
    return {"table_shape": [POSITIONS, pairs], "table_dtype": str(stored_cos.dtype),
            "plain_over_served": [round(p / s, 4) for p, s in zip(plain, served, strict=True)],
            "max_abs_cos2_plus_sin2_minus_1": float(np.abs(cos ** 2 + sin ** 2 - 1).max()),
            "note": "plain_over_served per pair from row 1: atan2(sin[1], cos[1]) (executorch's deserializer)"}


def _external_data(folder: Path) -> dict[str, bytes]:
    """Every named tensor of the folder's ``.ptd`` files, read by executorch's flat_tensor deserializer."""
    from executorch.exir._serialize._cord import Cord
    from executorch.extension.flat_tensor.serialize.serialize import FlatTensorSerializer

    found: dict[str, bytes] = {}
    for ptd in sorted(folder.glob("*.ptd")):
        payload = FlatTensorSerializer().deserialize(Cord(ptd.read_bytes()))
        for key, entry in payload.named_data.items():
            found[key] = bytes(payload.buffers[entry.buffer_index])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="case names to rebuild (default: all)")
    args = parser.parse_args(argv)
    versions = {name: importlib.metadata.version(name) for name in ("executorch", "torch")}
    manifest_path = ARTIFACTS / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    wanted = set(args.only or [*CLI_CASES, PTD_CASE])
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        params, ckpt = checkpoint(work)
        for name in sorted(wanted):
            out = work / name
            if name in CLI_CASES:
                model_class, extra, note = CLI_CASES[name]
                command = export_llm(model_class, extra, params, ckpt, out)
            elif name == PTD_CASE:
                command = export_ptd(ckpt, out)
                note = "the Llama example with external_constants=True: the tables live in the .ptd"
            else:
                raise SystemExit(f"unknown case {name}; valid: {', '.join([*CLI_CASES, PTD_CASE])}")
            dest = ARTIFACTS / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for file in sorted(out.iterdir()):
                if file.suffix in (".pte", ".ptd"):
                    shutil.copy(file, dest / file.name)
            (dest / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
            manifest["artifacts"][name] = {
                "producer": " ".join(f"{key} {value}" for key, value in versions.items()),
                "command": command,
                "note": note,
                "params": PARAMS,
                "files": {file.name: file.stat().st_size for file in sorted(dest.iterdir())},
                "measured": measure(dest),
            }
            print(f"wrote {dest}: {manifest['artifacts'][name]['files']}")
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
