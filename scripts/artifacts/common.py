"""What every producer script in ``scripts/artifacts/`` shares: the tokenizer and the tiny checkpoints, running a
producer, the references (transformers' own tables) and measurements, the package versions, and :func:`build`, the
driver each script's ``main`` calls (build the selected cases of one producer, measure them, update
``tests/data/artifacts/MANIFEST.json``; the manifest keeps every other case).

The producers, one script each (run from the repository root, in a venv holding the packages below)::

    python scripts/artifacts/onnx_builder.py                 # onnxruntime-genai's model builder -> model.onnx
    python scripts/artifacts/gguf_convert.py --llama-cpp-src /tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp
    python scripts/artifacts/gguf_writer.py                  # gguf.GGUFWriter: metadata-only GGUFs
    # each: [--only NAME ...] [--keep-work DIR]

Next to every artifact a script keeps the ``config.json`` the producer was fed (hub-style: ``rope_theta`` at top level
and a ``rope_scaling`` block), then measures what the producer served against transformers' own
``ROPE_INIT_FUNCTIONS`` (or, for GGUF, against an emulation of llama.cpp's run-time rules).

Requirements (a ``producers`` extra; these exact versions made the committed artifacts)::

    torch==2.13.0 (CPU build)  transformers==5.24.0  onnx==1.23.2  onnxruntime==1.32.0
    onnxruntime-genai==0.18.0  onnx-ir==1.1.0  gguf==0.19.0  sentencepiece==0.2.3  numpy==2.4.6
    safetensors==0.8.0  protobuf==7.36.2  tokenizers==0.23.3

(``torch==2.13.0`` must be the CPU build; onnxruntime-genai's builder imports ``onnx_ir`` without declaring it.)

Nothing is downloaded: the tokenizer is a 96-piece SentencePiece model trained on a generated text (a 96-token BPE
``tokenizer.json`` for the converters that read a GPT-2-style vocab: gpt-oss, llama4, gptneox, stablelm), the weights
are random (torch seed 0). With the versions above a re-run reproduces the committed files byte for byte. A case whose
producer is known to fail (``known_failure``, e.g. Gemma-3 in the ORT builder) is recorded under ``failures`` in the
manifest and does not make the script exit non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from cases import CASES, CONVENTIONS, OUT, SEED, VOCAB, Case

Make = Callable[[Case, Path, Path, Path, "Path | None"], tuple[list[str], str]]
"""A producer run: ``(case, tokenizer model, work folder, destination, llama.cpp sources)`` ->
``(command, version)``."""
Measure = Callable[[Case, Path], dict[str, Any]]


def train_tokenizer(work: Path) -> Path:
    """A 96-piece BPE SentencePiece model (about 1.2 kB) trained on a generated text."""
    import sentencepiece as spm

    rng = random.Random(SEED)
    words = [
        "rope",
        "table",
        "cos",
        "sin",
        "angle",
        "theta",
        "freq",
        "llama",
        "phi",
        "yarn",
        "scale",
        "factor",
        "alpha",
        "beta",
        "the",
        "a",
        "of",
        "and",
        "to",
        "in",
    ]
    corpus = work / "corpus.txt"
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(12)) + "\n" for _ in range(2000)))
    prefix = work / "sp"
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        vocab_size=VOCAB,
        model_type="bpe",
        character_coverage=1.0,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
        normalization_rule_name="identity",
    )
    return prefix.with_suffix(".model")


def write_bpe_tokenizer(work: Path, ckpt: Path, specials: tuple[str, ...] = ()) -> None:
    """A 96-token BPE ``tokenizer.json`` (whitespace pre-tokenizer) trained on the same generated text, for the
    converters that read a GPT-2-style vocab (gpt-oss, llama4, gptneox, stablelm, glm4), with ``specials`` added."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>", *specials],
                                  show_progress=False)
    tokenizer.train([str(work / "corpus.txt")], trainer)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(ckpt)


def build_checkpoint(case: Case, sp_model: Path, work: Path) -> Path:
    """Write ``case.config`` as config.json, random weights (seed 0) and the tokenizer files."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaTokenizer

    ckpt = work / "hf" / case.name
    shutil.rmtree(ckpt, ignore_errors=True)
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text(json.dumps(case.config, indent=2) + "\n")
    config = AutoConfig.from_pretrained(ckpt)
    torch.manual_seed(SEED)
    if "vision_config" in case.config:  # a vision-language checkpoint: its conditional-generation class
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_config(config, torch_dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    tmp = work / "hf" / f"{case.name}.save"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    shutil.copy(tmp / "model.safetensors", ckpt / "model.safetensors")
    shutil.rmtree(tmp)
    if case.bpe:
        write_bpe_tokenizer(work, ckpt, case.specials)
    else:
        shutil.copy(sp_model, ckpt / "tokenizer.model")
        LlamaTokenizer.from_pretrained(ckpt).save_pretrained(ckpt)
    (ckpt / "config.json").write_text(json.dumps(case.config, indent=2) + "\n")  # keep the hub-style file
    return ckpt


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}):\n{tail}")


def hf_reference(
    config_dir: Path, seq_len: int | None = None, layer_type: str | None = None
) -> tuple[np.ndarray, float, str]:
    """(inv_freq float64, attention_factor, rope_type) from transformers' own rope init for this config."""
    import torch
    from transformers import AutoConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = AutoConfig.from_pretrained(config_dir)
    params = cfg.rope_parameters
    if layer_type is not None and layer_type in params:
        params = params[layer_type]
    rope_type = params.get("rope_type", "default")
    if rope_type == "default":
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        dim = int(head_dim * params.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", 1.0) or 1.0))
        inv = 1.0 / params["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        return inv, 1.0, rope_type
    kwargs: dict[str, Any] = {}
    if layer_type is not None:
        kwargs["layer_type"] = layer_type
    inv_t, attn = ROPE_INIT_FUNCTIONS[rope_type](cfg, torch.device("cpu"), seq_len=seq_len, **kwargs)
    return inv_t.double().numpy(), float(attn), rope_type


def plain_inv_freq(theta: float, dim: int) -> np.ndarray:
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def estimate_inv_freq(cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-column angular speed (least squares through the origin on unwrapped angles) and mean magnitude."""
    c = cos.astype(np.float64)
    s = sin.astype(np.float64)
    ang = np.unwrap(np.arctan2(s, c), axis=0)
    pos = np.arange(c.shape[0], dtype=np.float64)[:, None]
    inv = (pos * ang).sum(0) / (pos * pos).sum()
    return inv, float(np.sqrt(c * c + s * s).mean())


def compare(served: np.ndarray, expected: np.ndarray, tol: float = 1e-4) -> dict[str, Any]:
    """Per-pair ratio; a pair is off when it differs by more than ``tol`` (1e-4 f32 caches, 2e-3 f16 caches)."""
    rel = np.abs(served / expected - 1.0)
    return {
        "max_rel_err": float(rel.max()),
        "pairs_off": [int(i) for i in np.nonzero(rel > tol)[0]],
        "served_over_expected": [round(float(x), 6) for x in served / expected],
    }


def table_err(cos: np.ndarray, sin: np.ndarray, inv: np.ndarray, attn: float) -> float:
    ang = np.arange(cos.shape[0], dtype=np.float64)[:, None] * inv[None, :]
    return float(max(np.abs(cos - attn * np.cos(ang)).max(), np.abs(sin - attn * np.sin(ang)).max()))


def verdict(cmp_decl: dict[str, Any], cmp_plain: dict[str, Any], attn_served: float, attn_decl: float) -> str:
    freqs = "declared" if not cmp_decl["pairs_off"] else ("plain" if not cmp_plain["pairs_off"] else "other")
    same_attn = abs(attn_served - attn_decl) < 1e-3 * attn_decl
    if freqs == "declared" and same_attn:
        return "declared table (correct)"
    return f"frequencies={freqs}, attention_factor={'declared' if same_attn else 'differs'}"


def versions() -> dict[str, str]:
    out = {}
    for pkg in (
        "torch",
        "transformers",
        "onnx",
        "onnx-ir",
        "onnxruntime",
        "onnxruntime-genai",
        "gguf",
        "sentencepiece",
        "tokenizers",
    ):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[pkg] = importlib.metadata.version(pkg)
    return out


def declared(config: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "rope_theta",
        "rope_scaling",
        "max_position_embeddings",
        "original_max_position_embeddings",
        "head_dim",
        "rope_local_base_freq",
        "partial_rotary_factor",
    )
    return {k: config[k] for k in keys if k in config}


@contextlib.contextmanager
def workdir(keep: str | None) -> Iterator[Path]:
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="ropekit-artifacts-") as tmp:
            yield Path(tmp)


def lcpp_version(lcpp: Path) -> str:
    return next((p.name for p in lcpp.parents if p.name.startswith("llama_cpp_python-")), "llama.cpp")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(type(obj))


def build(producer: str, make: Make, measure: Measure, argv: list[str] | None = None, *,
          description: str = "", needs_llama_cpp: bool = False) -> int:
    """Build every case of ``producer`` (or those ``--only`` names) and record them in the manifest."""
    parser = argparse.ArgumentParser(description=description)
    if needs_llama_cpp:
        parser.add_argument(
            "--llama-cpp-src",
            default=os.environ.get("LLAMA_CPP_SRC"),
            help="vendor/llama.cpp directory of the llama-cpp-python sdist (or env LLAMA_CPP_SRC)",
        )
    parser.add_argument("--only", nargs="*", help="case names to (re)build; the manifest keeps the others")
    parser.add_argument("--keep-work", help="keep checkpoints and raw producer output in this directory")
    args = parser.parse_args(argv)
    source = getattr(args, "llama_cpp_src", None)
    lcpp = Path(source).resolve() if source else None

    manifest_path = OUT / "MANIFEST.json"
    manifest: dict[str, Any] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("artifacts", {})
    manifest["generator"] = "scripts/artifacts/"
    manifest["conventions"] = CONVENTIONS
    manifest["package_versions"] = {**manifest.get("package_versions", {}), **versions()}  # --only keeps the rest
    selected = [c for c in CASES if c.producer == producer and (not args.only or c.name in args.only)]
    failures: dict[str, str] = {}
    known: set[str] = set()

    with workdir(args.keep_work) as work:
        sp_model = train_tokenizer(work)
        for case in selected:
            dest = OUT / case.name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            print(f"== {case.name}", flush=True)
            try:
                cmd, version = make(case, sp_model, work, dest, lcpp)
                (dest / "config.json").write_text(json.dumps(case.config, indent=2) + "\n")
                measured = measure(case, dest)
            except Exception as exc:  # record and go on with the other cases
                failures[case.name] = case.known_failure or str(exc)
                if case.known_failure:
                    known.add(case.name)
                print(f"!! {case.name}: {exc}", flush=True)
                shutil.rmtree(dest, ignore_errors=True)
                manifest["artifacts"].pop(case.name, None)
                continue
            files = {p.name: p.stat().st_size for p in sorted(dest.iterdir())}
            manifest["artifacts"][case.name] = {
                "producer": version,
                "command": cmd,
                "note": case.note,
                "files": files,
                "declared": declared(case.config),
                "measured": measured,
            }
    old_failures = {k: v for k, v in manifest.get("failures", {}).items() if k not in {c.name for c in selected}}
    manifest["failures"] = {**old_failures, **failures}
    order = [c.name for c in CASES]
    manifest["artifacts"] = dict(
        sorted(manifest["artifacts"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    )
    manifest_path.write_text(json.dumps(manifest, indent=1, default=_json_default) + "\n")
    print(json.dumps(failures, indent=1) if failures else "all artifacts built")
    return 1 if set(failures) - known else 0
