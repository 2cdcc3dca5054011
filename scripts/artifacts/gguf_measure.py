"""GGUF measurements shared by ``gguf_convert.py`` and ``gguf_writer.py``: a file's keys and rope tensors, an
emulation of llama.cpp's run-time rules, and what each case serves (per layer for the per-layer cases, per position
stream for the multimodal ones).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from cases import Case
from common import compare, hf_reference, plain_inv_freq, verdict

# Which loaders read which optional yarn keys (src/models/*.cpp load_hparams; see /tmp/artifact_notes.md).
YARN_BETA_ARCHS = {"grok", "mistral3"}


YARN_EXT_ARCHS = {"grok"}


YARN_LOG_MUL_ARCHS = {"deepseek2", "deepseek32", "mistral3"}


def gguf_fields(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Metadata (minus the token lists) and tensors of a GGUF, via the gguf package's reader."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    kv: dict[str, Any] = {}
    for name, fld in reader.fields.items():
        if name.startswith("tokenizer.ggml.") and name not in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
            continue
        kv[name] = fld.contents()
    tensors = {
        t.name: {"shape": [int(x) for x in t.shape], "dtype": t.tensor_type.name, "data": np.array(t.data)}
        for t in reader.tensors
    }
    return kv, tensors


def pad256(n: int) -> int:
    return (n + 255) // 256 * 256


def llamacpp_served(kv: dict[str, Any], tensors: dict[str, dict[str, Any]], n_ctx: int) -> dict[str, Any]:
    """inv_freq and magnitude llama.cpp would serve for a context of ``n_ctx`` (default cparams, one sequence)."""
    arch = kv["general.architecture"]
    n_rot = int(kv.get(f"{arch}.rope.dimension_count", 0))
    base = float(kv.get(f"{arch}.rope.freq_base", 10000.0))
    n_ctx_train = int(kv.get(f"{arch}.context_length", 0))
    stype = kv.get(f"{arch}.rope.scaling.type", "linear")  # absent key -> "linear" (llama-model.cpp)
    factor = float(kv.get(f"{arch}.rope.scaling.factor", kv.get(f"{arch}.rope.scale_linear", 0.0)))
    freq_scale = 1.0 if factor == 0.0 or stype == "none" else 1.0 / factor
    n_ctx_orig = int(kv.get(f"{arch}.rope.scaling.original_context_length", n_ctx_train)) or n_ctx_train
    n_ctx_seq = pad256(n_ctx)  # llama-context.cpp pads n_ctx (and n_ctx_seq) to a multiple of 256
    ext = float(kv.get(f"{arch}.rope.scaling.yarn_ext_factor", -1.0)) if arch in YARN_EXT_ARCHS else -1.0
    if ext < 0:
        ext = 1.0 if stype == "yarn" else 0.0
    reads_beta = arch in YARN_BETA_ARCHS
    beta_fast = float(kv.get(f"{arch}.rope.scaling.yarn_beta_fast", 32.0)) if reads_beta else 32.0
    beta_slow = float(kv.get(f"{arch}.rope.scaling.yarn_beta_slow", 1.0)) if reads_beta else 1.0
    log_mul = float(kv.get(f"{arch}.rope.scaling.yarn_log_multiplier", 0.0)) if arch in YARN_LOG_MUL_ARCHS else 0.0
    # cparams.yarn_attn_factor: hparams value (grok only), but overwritten whenever ext_factor != 0.
    attn = float(kv.get(f"{arch}.rope.scaling.yarn_attn_factor", 1.0)) if arch in YARN_EXT_ARCHS else 1.0
    if ext != 0:
        f = 1.0 / freq_scale

        def get_mscale(scale: float, mscale: float) -> float:
            return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0

        if log_mul != 0.0:
            ms = log_mul if arch == "deepseek2" and log_mul != 1.0 else 1.0
            attn = get_mscale(f, ms) / get_mscale(f, log_mul)
        else:
            attn = get_mscale(f, 1.0)
        attn *= 1.0 / (1.0 + 0.1 * math.log(f))
    attn *= float(kv.get(f"{arch}.rope.scaling.attn_factor", 1.0))
    mscale = attn * ((1.0 + 0.1 * math.log(1.0 / freq_scale)) if ext != 0 else 1.0)  # ggml rope_yarn
    ff = np.ones(n_rot // 2)
    ff_name = None
    if "rope_freqs.weight" in tensors:
        ff_name = "rope_freqs.weight"
    elif "rope_factors_long.weight" in tensors:
        ff_name = "rope_factors_long.weight" if n_ctx_seq > n_ctx_orig else "rope_factors_short.weight"
    if ff_name:
        ff = tensors[ff_name]["data"].astype(np.float64)[: n_rot // 2]
    extrap = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot) / ff
    inv = freq_scale * extrap
    if ext != 0:

        def corr(beta: float) -> float:
            return n_rot * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(base))

        lo, hi = max(0.0, math.floor(corr(beta_fast))), min(n_rot - 1.0, math.ceil(corr(beta_slow)))
        y = (np.arange(n_rot // 2) - lo) / max(0.001, hi - lo)
        mix = (1 - np.clip(y, 0, 1)) * ext
        inv = inv * (1 - mix) + extrap * mix
    return {
        "n_ctx": n_ctx,
        "n_ctx_seq": n_ctx_seq,
        "inv_freq": inv,
        "mscale": mscale,
        "freq_scale": freq_scale,
        "ext_factor": ext,
        "freq_factors_tensor": ff_name,
        "n_ctx_orig_yarn": n_ctx_orig,
        "beta_fast": beta_fast,
        "beta_slow": beta_slow,
    }


def measure_gguf(case: Case, dest: Path) -> dict[str, Any]:
    kv, tensors = gguf_fields(dest / "model.gguf")
    arch = kv["general.architecture"]
    rope_kv = {
        k: (v if not isinstance(v, float) else round(v, 7))
        for k, v in kv.items()
        if ".rope." in k or k.endswith((".context_length", ".attention.key_length"))
    }
    rope_tensors = {
        n: {"shape": t["shape"], "dtype": t["dtype"], "values": [round(float(x), 6) for x in t["data"].ravel()]}
        for n, t in tensors.items()
        if n.startswith("rope_")
    }
    n_ctx_train = int(kv.get(f"{arch}.context_length", 0))
    n_orig = int(kv.get(f"{arch}.rope.scaling.original_context_length", n_ctx_train))
    contexts = sorted({n_ctx_train, n_orig})
    if case.config.get("rope_scaling", {}).get("rope_type") == "dynamic":
        contexts.append(4 * n_ctx_train)  # HF's dynamic NTK only departs from plain past max_position_embeddings
    runtime: dict[str, Any] = {}
    for n_ctx in contexts:
        served = llamacpp_served(kv, tensors, n_ctx)
        inv_decl, attn_decl, rope_type = hf_reference(dest, seq_len=n_ctx)
        plain = plain_inv_freq(float(kv.get(f"{arch}.rope.freq_base", 10000.0)), 2 * len(served["inv_freq"]))
        cmp_decl, cmp_plain = compare(served["inv_freq"], inv_decl), compare(served["inv_freq"], plain)
        runtime[f"n_ctx={n_ctx}"] = {
            **{k: v for k, v in served.items() if k != "inv_freq"},
            "declared_rope_type": rope_type,
            "attention_factor_declared": round(attn_decl, 6),
            "attention_factor_served": round(served["mscale"], 6),
            "vs_declared": cmp_decl,
            "vs_plain": {k: cmp_plain[k] for k in ("max_rel_err", "pairs_off")},
            "served": verdict(cmp_decl, cmp_plain, served["mscale"], attn_decl),
        }
    return {
        "arch": arch,
        "rope_kv": rope_kv,
        "rope_tensors": rope_tensors,
        "tensor_count": len(tensors),
        "runtime_emulation": runtime,
    }


PER_LAYER_CASES = {"gguf_gemma3", "gguf_smollm3", "gguf_smollm3_all_rope", "gguf_llama4_all_rope", "gguf_gpt_oss_yarn",
                   "gguf_stablelm_base", "gguf_gptneox_keys", "gguf_glm4"}


def measure_gguf_layers(case: Case, dest: Path) -> dict[str, Any]:
    """The file's RoPE keys and tensors, and transformers' side per layer: its layer type, whether its code rotates
    that layer (``no_rope_layers``), and each layer type's reference table. What llama.cpp serves per layer is
    ropekit's audit (tests/artifacts/test_gguf_rules.py), checked against this."""
    from transformers import AutoConfig

    kv, tensors = gguf_fields(dest / "model.gguf")
    arch = kv["general.architecture"]
    rope_kv = {
        k: (v if not isinstance(v, float) else round(v, 7))
        for k, v in kv.items()
        if ".rope." in k or k.endswith((".context_length", ".attention.key_length", ".block_count"))
        or ".sliding_window" in k
    }
    cfg = AutoConfig.from_pretrained(dest)
    n_layer = cfg.num_hidden_layers
    types = list(getattr(cfg, "layer_types", None) or ["full_attention"] * n_layer)
    no_rope = getattr(cfg, "no_rope_layers", None)
    layers = [{"index": i, "layer_type": types[i], "rotates": bool(no_rope[i]) if no_rope else True}
              for i in range(n_layer)]
    tables = {}
    for layer_type in sorted(set(types)):
        nested = layer_type if isinstance(cfg.rope_parameters, dict) and layer_type in cfg.rope_parameters else None
        inv, attn, rope_type = hf_reference(dest, layer_type=nested)
        tables[layer_type] = {"rope_type": rope_type, "attention_factor": round(attn, 6),
                              "inv_freq": [float(f"{x:.9g}") for x in inv]}
    return {"arch": arch, "rope_kv": rope_kv, "rope_tensors": sorted(n for n in tensors if n.startswith("rope_")),
            "tensor_count": len(tensors), "transformers_layers": layers, "transformers_tables": tables}


MROPE_CASES = {"gguf_glm4v_sections", "gguf_qwen2vl_sections", "gguf_qwen2vl_qwen25", "gguf_qwen2vl_qwen3vl",
               "gguf_qwen2vl_qwen3vl_fourth"}


def measure_gguf_mrope(case: Case, dest: Path) -> dict[str, Any]:
    """A multimodal text model's GGUF: its rope keys (``rope.dimension_sections`` among them) and what transformers'
    config class declares (its text config's rope parameters). Which pair follows which position stream in llama.cpp
    is ropekit's audit (tests/artifacts/test_gguf_rules.py)."""
    from transformers import AutoConfig

    kv, tensors = gguf_fields(dest / "model.gguf")
    arch = kv["general.architecture"]
    rope_kv = {k: (v if not isinstance(v, float) else round(v, 7)) for k, v in kv.items()
               if ".rope." in k or k.endswith((".context_length", ".attention.key_length", ".block_count"))}
    cfg = AutoConfig.from_pretrained(dest)
    text = cfg.get_text_config()
    rope = dict(text.rope_parameters)
    return {"arch": arch, "rope_kv": rope_kv, "rope_tensors": sorted(n for n in tensors if n.startswith("rope_")),
            "tensor_count": len(tensors), "transformers_rope_parameters": rope,
            "transformers_head_dim": getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads}


def measure(case: Case, dest: Path) -> dict[str, Any]:
    """What the case's GGUF serves, measured the way its kind needs."""
    if case.name in MROPE_CASES:
        return measure_gguf_mrope(case, dest)
    if case.name in PER_LAYER_CASES:
        return measure_gguf_layers(case, dest)
    return measure_gguf(case, dest)
