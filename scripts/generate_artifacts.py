"""Regenerate the real-producer engine artifacts under ``tests/data/artifacts/`` (offline).

What it makes: tiny random Hugging Face checkpoints (fixed seed, one layer, vocab 96) declaring various RoPE
schemes, pushed through the *real* producers, so ``ropekit audit`` can be tested on what those producers actually
bake:

* onnxruntime-genai's model builder (``python -m onnxruntime_genai.models.builder``) -> ``model.onnx`` (+ ``.data``)
  and ``genai_config.json``;
* llama.cpp's ``convert_hf_to_gguf.py`` (from the llama-cpp-python sdist) -> ``model.gguf``;
* ``gguf.GGUFWriter`` directly for two metadata-only GGUFs (the Llama-3.2-1B seed case without ``rope_freqs`` and a
  Qwen2 file carrying every yarn key).

Next to every artifact it keeps the ``config.json`` the producer was fed (hub-style: ``rope_theta`` at top level and a
``rope_scaling`` block), then measures what each producer served against transformers' own
``ROPE_INIT_FUNCTIONS`` (or, for GGUF, against an emulation of llama.cpp's run-time rules) and writes
``tests/data/artifacts/MANIFEST.json``.

Requirements (a ``producers`` extra; these exact versions made the committed artifacts)::

    torch==2.13.0 (CPU build)  transformers==5.24.0  onnx==1.23.2  onnxruntime==1.32.0
    onnxruntime-genai==0.18.0  onnx-ir==1.1.0  gguf==0.19.0  sentencepiece==0.2.3  numpy==2.4.6
    safetensors==0.8.0  protobuf==7.36.2  tokenizers==0.23.3

(``torch==2.13.0`` must be the CPU build; onnxruntime-genai's builder imports ``onnx_ir`` without declaring it.)

plus the llama.cpp sources from the llama-cpp-python 0.3.36 sdist (only ``convert_hf_to_gguf.py``, ``conversion/``
and ``gguf-py/`` are used; nothing is compiled)::

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcpp
    tar xzf /tmp/lcpp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcpp

Run (from the repository root, in the venv holding the packages above)::

    python scripts/generate_artifacts.py --llama-cpp-src /tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp
    # or: LLAMA_CPP_SRC=... python scripts/generate_artifacts.py [--only NAME ...] [--keep-work DIR]

Nothing is downloaded: the tokenizer is a 96-piece SentencePiece model trained on a generated text (a 96-token BPE
``tokenizer.json`` for the converters that read a GPT-2-style vocab: gpt-oss, llama4, gptneox, stablelm), the weights
are random (torch seed 0). Those converters name the vocab's pre-tokenizer by hashing how it splits a test text and
refuse one they do not know, so they run through ``BPE_RUNNER``, which names it "gpt-2" and changes nothing else.
The per-layer cases (Gemma-3, SmolLM3, Llama-4, gpt-oss, StableLM, GPT-NeoX) record transformers' own per-layer plan
in the manifest (``measured.transformers_layers``/``transformers_tables``); tests/artifacts/test_gguf_rules.py holds
what llama.cpp serves per layer. With the versions above a re-run reproduces the committed files byte for byte. A case
whose producer is known to fail (``known_failure``, e.g. Gemma-3 in the ORT builder) is recorded under ``failures``
in the manifest and does not make the script exit non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "artifacts"
SEED = 0
VOCAB = 96
# The seed case: meta-llama/Llama-3.2-1B-Instruct's config.json (as shipped with ropekit's sample configs),
# embedded so this script does not depend on where the library keeps its samples.
SEED_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

# One tiny decoder shape for every checkpoint: 2 query heads, 1 kv head, head_dim 32 -> 16 rotary pairs.
TINY: dict[str, Any] = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "num_hidden_layers": 1,
    "intermediate_size": 64,
    "vocab_size": VOCAB,
    "rms_norm_eps": 1e-5,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
}

# theta 10000, head_dim 32: wavelengths 2*pi*10000**(i/16) = 6.3, 11.2, 19.9, 35.3, 62.8, 111.7, ... so with
# original_max_position_embeddings 64 (llama3 bands 16 / 64) pairs 0-1 keep, 2-4 blend, 5-15 scale.
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
# yarn needs original_max_position_embeddings > beta_fast * 2 * pi (= 201) or the ORT builder's assert trips.
YARN = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 256,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
}
# Phi-3 longrope: 16 factors each; short ones near 1, long ones rising to 8 (the shape Phi-3-mini-128k has).
SHORT_FACTOR = [round(1.0 + 0.02 * i, 4) for i in range(16)]
LONG_FACTOR = [round(1.0 + 7.0 * (i / 15) ** 2, 4) for i in range(16)]


CONVENTIONS: dict[str, str] = {
    "onnx_cache": "cos_cache/sin_cache[pos, i] = attention_factor * cos/sin(pos * inv_freq[i]); shape [rows, "
    "rotary_dim/2]; one column per rotary pair i (ORT rotary_interleaved=0: pair i rotates dims i and i+rd/2); "
    "angles computed in float32 (pos float32 * inv_freq float32), then cast to the cache dtype",
    "onnx_longrope": "cpu/cuda: Constants cos/sin_cache_small [orig, rd/2] (else_branch) and cos/sin_cache_large "
    "[max_pos, rd/2] (then_branch) of If '/model/rope_caches_subgraph/If', condition Greater(total sequence "
    "length from attention_mask, orig); dml: one initializer [orig + max_pos, rd/2], short rows first",
    "gguf_rope_freqs": "rope_freqs.weight [n_rot/2] f32: served inv_freq[i] = freq_base**(-2i/n_rot) / rope_freqs[i]",
    "gguf_longrope": "rope_factors_long/short.weight [n_rot/2] f32, same division; llama.cpp picks long when "
    "n_ctx_seq (n_ctx padded up to a multiple of 256) > n_ctx_orig_yarn",
    "measured": "ONNX: served inv_freq estimated per column by least squares on unwrapped atan2(sin, cos); "
    "attention factor = mean sqrt(cos^2+sin^2). GGUF: llama.cpp run-time rules emulated (llamacpp_served()). "
    "Reference: transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS on the artifact's config.json; a pair is "
    "'off' when |served/expected - 1| > 1e-4 (2e-3 for float16 caches)",
}


@dataclass
class Case:
    """One artifact: a checkpoint config (hub style) and the producer run that turns it into an artifact."""

    name: str
    producer: str  # "ort-genai" | "llama.cpp" | "gguf-writer"
    config: dict[str, Any]
    note: str
    args: list[str] = field(default_factory=list)  # extra producer arguments
    known_failure: str = ""  # the producer is known to fail on this case (recorded, not an error)
    keep_checkpoint: bool = False  # commit the tiny checkpoint beside the artifact (logit tests run both)
    bpe: bool = False  # the converter reads a GPT-2-style (BPE) vocab: give the checkpoint a tokenizer.json
    specials: tuple[str, ...] = ()  # extra special tokens the converter looks up by name (GLM-4: <|endoftext|>)


def _llama(**rope: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **TINY,
        "max_position_embeddings": 256,
        "rope_theta": 10000.0,
    }
    if rope:
        cfg["rope_scaling"] = dict(rope)
        if rope.get("rope_type") == "yarn":
            cfg["max_position_embeddings"] = 1024
    return cfg


def _phi3() -> dict[str, Any]:
    cfg = {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        **TINY,
        "max_position_embeddings": 256,
        "original_max_position_embeddings": 64,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 1.0,
        "rope_scaling": {"type": "longrope", "short_factor": SHORT_FACTOR, "long_factor": LONG_FACTOR},
        "pad_token_id": 0,
        "sliding_window": None,
        "hidden_act": "silu",
    }
    cfg.pop("head_dim")  # Phi-3 derives head_dim from hidden_size / heads (llama.cpp's converter does too)
    return cfg


def _qwen2_yarn(**extra: Any) -> dict[str, Any]:
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        **TINY,
        "max_position_embeddings": 1024,
        "rope_theta": 10000.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "rope_scaling": {**YARN, **extra},
    }


def _qwen3_yarn() -> dict[str, Any]:
    """Qwen3 as its long-context card configures it: base 1e6, yarn factor 4 with explicit betas 32/1. The
    builder serves it without truncation (a mismatch repair rewrites); the rewritten float32 cache, times the
    attention factor 1.139, must then audit as a match (#33: it was refused at 1.5e-7)."""
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **TINY, "max_position_embeddings": 1024,
            "rope_theta": 1000000.0, "rope_scaling": dict(YARN), "attention_bias": False}


def _gemma3() -> dict[str, Any]:
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        **TINY,
        "num_hidden_layers": 2,
        "max_position_embeddings": 256,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
        "query_pre_attn_scalar": 32,
        "hidden_activation": "gelu_pytorch_tanh",
        "pad_token_id": 0,
    }


# --- per-layer llama.cpp cases (tests/artifacts/test_gguf_rules.py) ---------------------------------------------


def _gemma3_gguf() -> dict[str, Any]:
    """Gemma-3 as llama.cpp lays it out: the converter writes no sliding_window_pattern, so llama.cpp uses its
    default (5 sliding layers, then 1 global): six layers whose layer_types follow it."""
    return {**_gemma3(), "num_hidden_layers": 6, "intermediate_size": 32,
            "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}


def _smollm3(no_rope_layers: list[int] | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "architectures": ["SmolLM3ForCausalLM"],
        "model_type": "smollm3",
        **TINY,
        "num_hidden_layers": 4,
        "intermediate_size": 32,
        "max_position_embeddings": 256,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "pad_token_id": 0,
    }
    if no_rope_layers is not None:
        cfg["no_rope_layers"] = no_rope_layers
    return cfg


def _llama4_all_rope() -> dict[str, Any]:
    """A text-only Llama-4 whose every layer rotates (MobileLLM-style: no chunked layers): the converter writes
    attention.sliding_window 0, which makes llama.cpp's NoPE step n_layer, so the last layer loses RoPE."""
    return {
        "architectures": ["Llama4ForCausalLM"],
        "model_type": "llama4_text",
        **TINY,
        "num_hidden_layers": 2,
        "intermediate_size": 32,
        "intermediate_size_mlp": 32,
        "num_local_experts": 1,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "max_position_embeddings": 256,
        "rope_theta": 10000.0,
        "attention_chunk_size": None,
        "no_rope_layers": [1, 1],
        "layer_types": ["full_attention", "full_attention"],
        "use_qk_norm": False,
        "pad_token_id": 0,
    }


def _gpt_oss() -> dict[str, Any]:
    """gpt-oss: yarn with truncate false on sliding and global layers alike (one rope block)."""
    return {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        **TINY,
        "num_hidden_layers": 2,
        "intermediate_size": 32,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "max_position_embeddings": 1024,
        "rope_theta": 150000.0,
        "rope_scaling": {**YARN, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False},
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
        "pad_token_id": 0,
    }


def _neox(model_type: str) -> dict[str, Any]:
    """GPT-NeoX / StableLM with a rotary base other than 10000 (their converters write no rope.freq_base)."""
    cfg: dict[str, Any] = {
        **{k: v for k, v in TINY.items() if k != "head_dim"},
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
        "layer_norm_eps": 1e-5,
    }
    if model_type == "gpt_neox":
        return {**cfg, "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "rotary_pct": 0.25,
                "rotary_emb_base": 50000, "use_parallel_residual": True, "hidden_act": "gelu"}
    return {**cfg, "architectures": ["StableLmForCausalLM"], "model_type": "stablelm", "partial_rotary_factor": 0.25,
            "rope_theta": 50000.0, "use_qkv_bias": False, "hidden_act": "silu"}


def _glm4(**extra: Any) -> dict[str, Any]:
    """GLM-4 (Glm4ForCausalLM): partial rotary 0.5 over interleaved pairs (llama.cpp: glm4, LLAMA_ROPE_TYPE_NORM
    without rope.dimension_sections); two layers."""
    return {"architectures": ["Glm4ForCausalLM"], "model_type": "glm4", **TINY, "num_hidden_layers": 2,
            "max_position_embeddings": 256, "rope_theta": 500000.0, "partial_rotary_factor": 0.5,
            "attention_bias": True, "pad_token_id": 0, **extra}


def _glm4v(section: list[int]) -> dict[str, Any]:
    """GLM-4.1V's text model (Glm4vForConditionalGeneration): GLM-4 with ``mrope_section`` over its 8 rotary
    pairs. Its converter (Glm4Model, use_mrope) writes rope.dimension_sections and permutes Q/K to NEOX order
    (llama.cpp glm4: LLAMA_ROPE_TYPE_MROPE once use_mrope() sees two non-zero sections)."""
    text = {**{k: v for k, v in TINY.items() if k not in ("tie_word_embeddings", "torch_dtype")},
            "model_type": "glm4v_text", "num_hidden_layers": 2, "max_position_embeddings": 256,
            "partial_rotary_factor": 0.5, "attention_bias": True, "pad_token_id": 0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0, "mrope_section": section,
                                "partial_rotary_factor": 0.5}}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 64,
              "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
              "image_size": 28}
    return {"architectures": ["Glm4vForConditionalGeneration"], "model_type": "glm4v", "text_config": text,
            "vision_config": vision, "image_token_id": 93, "video_token_id": 94, "image_start_token_id": 91,
            "image_end_token_id": 92, "video_start_token_id": 89, "video_end_token_id": 90,
            "tie_word_embeddings": True, "torch_dtype": "float32"}


GLM_SPECIALS = ("<|endoftext|>", "<|user|>")  # Glm4Model.set_vocab looks both up in the added vocab


# --- multimodal (mrope) llama.cpp cases: the text model of a tiny VL checkpoint (vision tower 1 block) ------------

VL_TOKENS = {"vision_start_token_id": 91, "vision_end_token_id": 92, "image_token_id": 93, "video_token_id": 94}


def _qwen2vl(model_type: str, section: list[int]) -> dict[str, Any]:
    """Qwen2-VL / Qwen2.5-VL as hub configs keep them: text keys at top level, ``rope_scaling`` of type mrope; 16
    rotary pairs cut into ``section`` (llama.cpp: architecture qwen2vl, LLAMA_ROPE_TYPE_MROPE)."""
    vision: dict[str, Any] = {"depth": 1, "num_heads": 2, "patch_size": 14, "spatial_merge_size": 2,
                              "temporal_patch_size": 2, "in_chans": 3}
    if model_type == "qwen2_vl":
        vision.update(embed_dim=32, hidden_size=64, mlp_ratio=2)
    else:
        vision.update(hidden_size=32, intermediate_size=32, out_hidden_size=64, window_size=112,
                      fullatt_block_indexes=[0], tokens_per_second=2)
    name = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"}
    cfg = {"architectures": [name[model_type]], "model_type": model_type, **TINY, **VL_TOKENS,
           "max_position_embeddings": 256, "rope_theta": 1000000.0, "use_sliding_window": False,
           "rope_scaling": {"type": "mrope", "mrope_section": section}, "vision_config": vision}
    cfg.pop("head_dim")  # Qwen2-VL derives it (hidden_size / heads = 32)
    return cfg


def _qwen3vl(section: list[int]) -> dict[str, Any]:
    """Qwen3-VL as its hub config keeps it (a ``text_config``), interleaved mrope over 16 pairs (llama.cpp: qwen3vl,
    LLAMA_ROPE_TYPE_IMROPE)."""
    text = {**{k: v for k, v in TINY.items() if k != "tie_word_embeddings"}, "model_type": "qwen3_vl_text",
            "max_position_embeddings": 256, "rope_theta": 5000000.0,
            "rope_scaling": {"rope_type": "default", "mrope_section": section, "mrope_interleaved": True}}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 64,
              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
              "num_position_embeddings": 16, "deepstack_visual_indexes": []}
    return {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", **VL_TOKENS,
            "tie_word_embeddings": True, "text_config": text, "vision_config": vision}


QWEN2_YARN_CONFIG: dict[str, Any] = {
    # Qwen2.5-7B-Instruct with the yarn block its model card tells users to add.
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "num_hidden_layers": 28,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "sliding_window": 131072,
    "torch_dtype": "bfloat16",
    "rope_scaling": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "attention_factor": 1.2,
    },
}


CASES: list[Case] = [
    Case("onnx_llama3_fp32", "ort-genai", _llama(**LLAMA3), "Llama llama3, cpu fp32", ["-p", "fp32", "-e", "cpu"]),
    Case(
        "onnx_phi3_longrope",
        "ort-genai",
        _phi3(),
        "Phi-3 longrope: short/long caches in the If subgraph",
        ["-p", "fp32", "-e", "cpu"],
    ),
    Case(
        "onnx_llama_linear",
        "ort-genai",
        _llama(rope_type="linear", factor=4.0),
        "Llama linear factor 4",
        ["-p", "fp32", "-e", "cpu"],
        keep_checkpoint=True,
    ),
    Case(
        "onnx_llama3_fp16_cuda",
        "ort-genai",
        _llama(**LLAMA3),
        "Llama llama3, cuda fp16 (built offline, no GPU)",
        ["-p", "fp16", "-e", "cuda"],
    ),
    Case(
        "onnx_llama_yarn",
        "ort-genai",
        _llama(**YARN),
        "Llama yarn factor 4 (truncate defaults to true)",
        ["-p", "fp32", "-e", "cpu"],
        keep_checkpoint=True,
    ),
    Case(
        "onnx_qwen2_yarn",
        "ort-genai",
        _qwen2_yarn(),
        "Qwen2 yarn factor 4 (truncate defaults to true)",
        ["-p", "fp32", "-e", "cpu"],
        keep_checkpoint=True,
    ),
    Case(
        "onnx_qwen3_yarn",
        "ort-genai",
        _qwen3_yarn(),
        "Qwen3 yarn factor 4, betas 32/1, rope_theta 1e6 (served without truncation)",
        ["-p", "fp32", "-e", "cpu"],
    ),
    Case(
        "onnx_llama_yarn_theta5e5",
        "ort-genai",
        {**_llama(**{**YARN, "factor": 40.0}), "rope_theta": 500000.0},
        "Llama yarn factor 40, rope_theta 5e5 (the builder serves it plain)",
        ["-p", "fp32", "-e", "cpu"],
    ),
    Case(
        "onnx_qwen2_yarn_notruncate",
        "ort-genai",
        _qwen2_yarn(truncate=False),
        "Qwen2 yarn factor 4 with truncate=false",
        ["-p", "fp32", "-e", "cpu"],
    ),
    Case(
        "onnx_gemma3",
        "ort-genai",
        _gemma3(),
        "Gemma-3 text: global (linear 8, theta 1e6) + local (theta 1e4)",
        ["-p", "fp32", "-e", "cpu"],
        known_failure="builder 0.18.0 reads rope_parameters['rope_type'], but transformers 5 nests Gemma-3's "
        "rope_parameters per layer type -> KeyError: 'rope_type' (base.py make_rope_init)",
    ),
    Case(
        "onnx_phi3_longrope_dml_fp16",
        "ort-genai",
        _phi3(),
        "Phi-3 longrope for DML: one concatenated cache",
        ["-p", "fp16", "-e", "dml"],
    ),
    Case("onnx_llama_default", "ort-genai", _llama(), "plain Llama, no rope_scaling", ["-p", "fp32", "-e", "cpu"]),
    Case(
        "onnx_smollm3_nope_dml",
        "ort-genai",
        # initializer_range 0.1 (default 0.02) so that layer 3's attention is selective: at 0.02 its scores are
        # nearly uniform and the wrongly wired rotation moves the fp16 logits by about 3 fp16 steps only; at 0.1
        # the logit proof (test_repair.py) separates the original pack from the repaired one by ~80x.
        {**_smollm3([1, 1, 1, 0]), "initializer_range": 0.1},
        "SmolLM3, layer 3 NoPE, DML fp16: separate RotaryEmbedding nodes on every layer, the NoPE one too",
        ["-p", "fp16", "-e", "dml"],
        keep_checkpoint=True,
    ),
    Case(
        "onnx_smollm3_nope_cpu",
        "ort-genai",
        _smollm3([1, 1, 1, 0]),
        "SmolLM3 on CPU",
        ["-p", "fp32", "-e", "cpu"],
        known_failure="builder 0.18.0 gives NoPE models separate RotaryEmbedding nodes, which read a "
        "position_ids input the CPU/CUDA graphs do not have -> KeyError: 'position_ids' (base.py "
        "make_attention_qk_rope); only the DML build succeeds",
    ),
    Case("gguf_llama3", "llama.cpp", _llama(**LLAMA3), "Llama llama3 -> rope_freqs tensor", ["--outtype", "f16"]),
    Case("gguf_phi3_longrope", "llama.cpp", _phi3(), "Phi-3 longrope -> rope_factors_long/short", ["--outtype", "f16"]),
    Case(
        "gguf_seed_llama32_no_rope_freqs",
        "gguf-writer",
        SEED_CONFIG,
        "Llama-3.2-1B metadata as the converter writes it, but WITHOUT rope_freqs.weight (the seed defect)",
    ),
    Case("gguf_llama_yarn", "llama.cpp", _llama(**YARN), "Llama yarn factor 4", ["--outtype", "f16"]),
    Case(
        "gguf_llama_yarn_betas",
        "llama.cpp",
        _llama(**{**YARN, "beta_fast": 16.0, "beta_slow": 2.0}),
        "Llama yarn factor 4 with non-default betas (keys written, not read by the llama loader)",
        ["--outtype", "f16"],
    ),
    Case(
        "gguf_llama_linear",
        "llama.cpp",
        _llama(rope_type="linear", factor=4.0),
        "Llama linear factor 4",
        ["--outtype", "f16"],
    ),
    Case(
        "gguf_llama_dynamic",
        "llama.cpp",
        _llama(rope_type="dynamic", factor=4.0),
        "Llama dynamic factor 4",
        ["--outtype", "f16"],
    ),
    Case("gguf_qwen2_yarn_keys", "gguf-writer", QWEN2_YARN_CONFIG, "qwen2 GGUF with every yarn key (GGUFWriter)"),
    Case("gguf_gemma3", "llama.cpp", _gemma3_gguf(), "Gemma-3: 5 sliding layers (theta 1e4) + 1 global (linear 8, "
         "theta 1e6)", ["--outtype", "f16"]),
    Case("gguf_smollm3", "llama.cpp", _smollm3(), "SmolLM3, default no_rope_layers (layer 3 NoPE)",
         ["--outtype", "f16"]),
    Case("gguf_smollm3_all_rope", "llama.cpp", _smollm3([1, 1, 1, 1]), "SmolLM3 whose every layer rotates "
         "(llama.cpp still drops RoPE on layer 3)", ["--outtype", "f16"]),
    Case("gguf_llama4_all_rope", "llama.cpp", _llama4_all_rope(), "Llama-4 text, every layer rotating, no chunked "
         "layers (llama.cpp drops RoPE on the last layer)", ["--outtype", "f16"], bpe=True),
    Case("gguf_gpt_oss_yarn", "llama.cpp", _gpt_oss(), "gpt-oss yarn factor 4, truncate false, sliding + full",
         ["--outtype", "f16"], bpe=True),
    Case("gguf_stablelm_base", "llama.cpp", _neox("stablelm"), "StableLM, rope_theta 50000, partial 0.25 (the "
         "converter writes no rope.freq_base)", ["--outtype", "f16"], bpe=True),
    Case("gguf_gptneox_base", "llama.cpp", _neox("gpt_neox"), "GPT-NeoX, rotary_emb_base 50000, rotary_pct 0.25",
         ["--outtype", "f16"], bpe=True,
         known_failure="the gptneox converter reads hparams['rotary_pct'], which transformers 5 folds into "
         "rope_parameters (KeyError: 'rotary_pct'); see gguf_gptneox_keys"),
    Case("gguf_gptneox_keys", "gguf-writer", _neox("gpt_neox"), "GPT-NeoX metadata exactly as its converter writes "
         "it (no rope.freq_base): written with GGUFWriter because the converter fails under transformers 5"),
    Case("gguf_glm4", "llama.cpp", _glm4(), "GLM-4, partial rotary 0.5, theta 5e5 (llama.cpp glm4: NORM pairs)",
         ["--outtype", "f16"], bpe=True, specials=GLM_SPECIALS),
    Case("gguf_glm4v_sections", "llama.cpp", _glm4v([2, 3, 3]), "GLM-4.1V text model, mrope sections [2, 3, 3] "
         "(llama.cpp glm4 with rope.dimension_sections: MROPE)", ["--outtype", "f16"], bpe=True, specials=GLM_SPECIALS),
    Case("gguf_qwen2vl_sections", "llama.cpp", _qwen2vl("qwen2_vl", [4, 6, 6]), "Qwen2-VL text model, mrope "
         "sections [4, 6, 6] (llama.cpp qwen2vl: consecutive sections)", ["--outtype", "f16"]),
    Case("gguf_qwen2vl_qwen25", "llama.cpp", _qwen2vl("qwen2_5_vl", [2, 7, 7]), "Qwen2.5-VL text model, mrope "
         "sections [2, 7, 7] (converted to llama.cpp's qwen2vl)", ["--outtype", "f16"]),
    Case("gguf_qwen2vl_qwen3vl", "llama.cpp", _qwen3vl([6, 5, 5]), "Qwen3-VL text model, interleaved sections "
         "[6, 5, 5] (llama.cpp qwen3vl: imrope)", ["--outtype", "f16"]),
    Case("gguf_qwen2vl_qwen3vl_fourth", "llama.cpp", _qwen3vl([8, 4, 4]), "Qwen3-VL, interleaved sections [8, 4, 4]: "
         "llama.cpp's imrope puts pairs 13 and 14 on its 4th position stream (0 for text tokens)",
         ["--outtype", "f16"]),
]


# ----------------------------------------------------------------------------------------------------------------
# checkpoints


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


# ----------------------------------------------------------------------------------------------------------------
# producers


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}):\n{tail}")


def produce_onnx(case: Case, ckpt: Path, work: Path, dest: Path) -> list[str]:
    pack = work / "packs" / case.name
    shutil.rmtree(pack, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "onnxruntime_genai.models.builder",
        "-i",
        str(ckpt),
        "-o",
        str(pack),
        *case.args,
        "-c",
        str(work / "ort_cache"),
    ]
    run(cmd, cwd=work)
    for name in ("model.onnx", "model.onnx.data", "genai_config.json"):
        if (pack / name).exists():
            shutil.copy(pack / name, dest / name)
    if case.keep_checkpoint:  # the weights the pack was built from, for logit comparisons with transformers
        (dest / "checkpoint").mkdir(exist_ok=True)
        for name in ("config.json", "model.safetensors"):
            shutil.copy(ckpt / name, dest / "checkpoint" / name)
    return ["python", "-m", "onnxruntime_genai.models.builder", "-i", "HF_DIR", "-o", "PACK", *case.args]


# The converter names a GPT-2-style vocab's pre-tokenizer by hashing how it splits a test text and refuses a vocab it
# does not recognise (a tiny trained one never is). This runner names it "gpt-2" and changes nothing else: the
# pre-tokenizer name is vocab metadata, RoPE keys are written as usual.
BPE_RUNNER = '''
import runpy, sys
src = sys.argv[1]
sys.path[:0] = [src, src + "/gguf-py"]
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = [src + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
'''


def produce_gguf(case: Case, ckpt: Path, work: Path, dest: Path, lcpp: Path) -> list[str]:
    out = work / "gguf" / f"{case.name}.gguf"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(lcpp / "gguf-py"))  # the gguf-py bundled with the converter
    args = [str(ckpt), "--outfile", str(out), *case.args]
    if case.bpe:
        cmd = [sys.executable, "-c", BPE_RUNNER, str(lcpp), *args]
    else:
        cmd = [sys.executable, str(lcpp / "convert_hf_to_gguf.py"), *args]
    run(cmd, cwd=lcpp, env=env)
    shutil.copy(out, dest / "model.gguf")
    prefix = ["python", "-c", "BPE_RUNNER", "LLAMA_CPP_SRC"] if case.bpe else ["python", "convert_hf_to_gguf.py"]
    return [*prefix, "HF_DIR", "--outfile", "model.gguf", *case.args]


def write_seed_gguf(case: Case, dest: Path) -> list[str]:
    """Llama-3.2-1B metadata exactly as convert_hf_to_gguf.py writes it for llama3, minus ``rope_freqs.weight``."""
    import gguf

    c = case.config
    w = gguf.GGUFWriter(dest / "model.gguf", "llama")
    w.add_name("Llama 3.2 1B Instruct (metadata only)")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(c["vocab_size"])
    w.add_rope_dimension_count(c["head_dim"])
    # llama3 writes no rope.scaling.* keys: the scaling lives only in rope_freqs.weight, left out on purpose here.
    w.add_tensor("output_norm.weight", np.ones(c["hidden_size"], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ["gguf.GGUFWriter(arch='llama') -- see write_seed_gguf()"]


def write_yarn_keys_gguf(case: Case, dest: Path) -> list[str]:
    """A qwen2 GGUF carrying every rope/yarn key llama.cpp knows (qwen2's loader reads only some of them)."""
    import gguf

    c = case.config
    rs = c["rope_scaling"]
    w = gguf.GGUFWriter(dest / "model.gguf", "qwen2")
    w.add_name("Qwen2.5-7B-Instruct yarn (metadata only)")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_rope_dimension_count(c["hidden_size"] // c["num_attention_heads"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rs["factor"])
    w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_ext_factor(1.0)
    w.add_rope_scaling_yarn_attn_factor(rs["attention_factor"])
    w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_tensor("output_norm.weight", np.ones(c["hidden_size"], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ["gguf.GGUFWriter(arch='qwen2') -- see write_yarn_keys_gguf()"]


def write_gptneox_gguf(case: Case, dest: Path) -> list[str]:
    """GPT-NeoX metadata exactly as ``GPTNeoXModel.set_gguf_parameters`` writes it: no rope.freq_base, no scaling."""
    import gguf

    c = case.config
    w = gguf.GGUFWriter(dest / "model.gguf", "gptneox")
    w.add_name("tiny GPT-NeoX, rotary_emb_base 50000 (metadata only)")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_rope_dimension_count(int(c["rotary_pct"] * (c["hidden_size"] // c["num_attention_heads"])))
    w.add_head_count(c["num_attention_heads"])
    w.add_parallel_residual(c["use_parallel_residual"])
    w.add_layer_norm_eps(c["layer_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tensor("output_norm.weight", np.ones(c["hidden_size"], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ["gguf.GGUFWriter(arch='gptneox') -- see write_gptneox_gguf()"]


WRITERS: dict[str, Callable[[Case, Path], list[str]]] = {
    "gguf_seed_llama32_no_rope_freqs": write_seed_gguf,
    "gguf_qwen2_yarn_keys": write_yarn_keys_gguf,
    "gguf_gptneox_keys": write_gptneox_gguf,
}


# ----------------------------------------------------------------------------------------------------------------
# references (transformers) and measurement


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


def onnx_caches(path: Path) -> list[dict[str, Any]]:
    """Every cos/sin cache in the model: top-level initializers and Constants inside subgraphs (If branches)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    external = {
        t.name
        for t in onnx.external_data_helper._get_all_tensors(model)
        if t.data_location == onnx.TensorProto.EXTERNAL
    }
    onnx.load_external_data_for_model(model, str(path.parent))
    consumers: dict[str, set[str]] = {}
    found: list[dict[str, Any]] = []

    def walk(graph: onnx.GraphProto, where: str) -> None:
        for init in graph.initializer:
            if "cos_cache" in init.name or "sin_cache" in init.name:
                found.append(
                    {
                        "name": init.name,
                        "where": f"{where} initializer",
                        "array": numpy_helper.to_array(init),
                        "external_data": init.name in external,
                    }
                )
        for node in graph.node:
            for inp in node.input:
                consumers.setdefault(inp, set()).add(f"{node.op_type} {node.name!r}")
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g, f"{where} > {node.op_type} {node.name!r} .{attr.name}")
            if node.op_type == "Constant" and any("cache" in o for o in node.output):
                for attr in node.attribute:
                    if attr.name == "value":
                        found.append(
                            {
                                "name": node.output[0],
                                "where": f"{where} Constant {node.name!r}",
                                "array": numpy_helper.to_array(attr.t),
                                "external_data": attr.t.name in external and bool(attr.t.name),
                            }
                        )

    walk(model.graph, "main graph")
    if_outputs = {o: f"If {n.name!r}" for n in model.graph.node if n.op_type == "If" for o in n.output}
    for item in found:
        item["consumers"] = sorted(consumers.get(item["name"], set()))
        item["graph_output_of"] = if_outputs.get(item["name"].replace("_large", "").replace("_small", ""))
    return found


def float32_angle_err(cos: np.ndarray, sin: np.ndarray, inv: np.ndarray, attn: float) -> float:
    """Max deviation from a table built the builder's way: float32 inv_freq, float32 positions and products."""
    inv32 = inv.astype(np.float32)
    ang = np.outer(np.arange(cos.shape[0], dtype=np.float32), inv32).astype(np.float32)
    ref_c = (np.cos(ang).astype(np.float32) * np.float32(attn)).astype(cos.dtype)
    ref_s = (np.sin(ang).astype(np.float32) * np.float32(attn)).astype(cos.dtype)
    return float(max(np.abs(cos.astype(np.float64) - ref_c).max(), np.abs(sin.astype(np.float64) - ref_s).max()))


def onnx_tables(case: Case, by_name: dict[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
    """cos/sin pairs by key; DML's concatenated longrope cache is split into its short and long rows."""
    cfg = case.config
    out: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    for key in sorted({n.replace("cos_", "").replace("sin_", "") for n in by_name}):
        cos, sin = by_name[f"cos_{key}"], by_name[f"sin_{key}"]
        orig = cfg.get("original_max_position_embeddings")
        longrope = cfg.get("rope_scaling", {}).get("type") == "longrope"
        if key == "cache" and longrope and orig and cos.shape[0] == orig + cfg["max_position_embeddings"]:
            out["cache[:orig] (short rows)"] = (cos[:orig], sin[:orig], "small")
            out["cache[orig:] (long rows)"] = (cos[orig:], sin[orig:], "large")
        else:
            out[key] = (cos, sin, key)
    return out


def measure_onnx(case: Case, dest: Path) -> dict[str, Any]:
    caches = onnx_caches(dest / "model.onnx")
    cfg = case.config
    layout = [
        {
            "name": c["name"],
            "where": c["where"],
            "shape": list(c["array"].shape),
            "dtype": str(c["array"].dtype),
            "external_data": c["external_data"],
            "consumers": c["consumers"],
            "selected_by": c["graph_output_of"] if c["where"] != "main graph initializer" else None,
        }
        for c in caches
    ]
    results: dict[str, Any] = {}
    for key, (cos, sin, kind) in onnx_tables(case, {c["name"]: c["array"] for c in caches}).items():
        served, attn_served = estimate_inv_freq(cos, sin)
        rows = cos.shape[0]
        layer_type = None
        base = cfg["rope_theta"]
        seq_len: int | None = rows
        if kind.endswith("_global"):
            layer_type = "full_attention"
        elif kind.endswith("_local"):
            layer_type, base = "sliding_attention", cfg["rope_local_base_freq"]
        if kind.endswith("small"):
            seq_len = cfg["original_max_position_embeddings"]
        elif kind.endswith("large"):
            seq_len = cfg["max_position_embeddings"] + 1
        inv_decl, attn_decl, rope_type = hf_reference(dest, seq_len=seq_len, layer_type=layer_type)
        plain = plain_inv_freq(base, 2 * len(served))
        tol = 2e-3 if cos.dtype == np.float16 else 1e-4
        cmp_decl, cmp_plain = compare(served, inv_decl, tol), compare(served, plain, tol)
        matched = inv_decl if not cmp_decl["pairs_off"] else plain if not cmp_plain["pairs_off"] else None
        matched_attn = attn_decl if not cmp_decl["pairs_off"] else attn_served
        results[key] = {
            "rows": rows,
            "declared_rope_type": rope_type,
            "hf_seq_len_for_reference": seq_len,
            "attention_factor_served": round(attn_served, 6),
            "attention_factor_declared": round(attn_decl, 6),
            "vs_declared": cmp_decl,
            "vs_plain": {k: cmp_plain[k] for k in ("max_rel_err", "pairs_off")},
            "max_abs_table_err_vs_declared_float64": table_err(
                cos.astype(np.float64), sin.astype(np.float64), inv_decl, attn_decl
            ),
            "max_abs_err_vs_float32_angles_of_matched_table": (
                None if matched is None else float32_angle_err(cos, sin, matched, matched_attn)
            ),
            "served": verdict(cmp_decl, cmp_plain, attn_served, attn_decl),
        }
    genai = json.loads((dest / "genai_config.json").read_text())
    rope_in_genai = [k for k in json.dumps(genai).split('"') if "rope" in k.lower()]
    return {"layout": layout, "tables": results, "genai_config_rope_keys": rope_in_genai}


# --- llama.cpp run-time emulation (see /tmp/artifact_notes.md for the source lines) ---------------------------

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


# ----------------------------------------------------------------------------------------------------------------


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--llama-cpp-src",
        default=os.environ.get("LLAMA_CPP_SRC"),
        help="vendor/llama.cpp directory of the llama-cpp-python sdist (or env LLAMA_CPP_SRC)",
    )
    parser.add_argument("--only", nargs="*", help="case names to (re)build; the manifest keeps the others")
    parser.add_argument("--keep-work", help="keep checkpoints and raw producer output in this directory")
    args = parser.parse_args(argv)
    lcpp = Path(args.llama_cpp_src).resolve() if args.llama_cpp_src else None

    manifest_path = OUT / "MANIFEST.json"
    manifest: dict[str, Any] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("artifacts", {})
    manifest["generator"] = "scripts/generate_artifacts.py"
    manifest["conventions"] = CONVENTIONS
    manifest["package_versions"] = {**manifest.get("package_versions", {}), **versions()}  # --only keeps the rest
    selected = [c for c in CASES if not args.only or c.name in args.only]
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
                if case.producer == "ort-genai":
                    ckpt = build_checkpoint(case, sp_model, work)
                    cmd = produce_onnx(case, ckpt, work, dest)
                    version = f"onnxruntime-genai {importlib.metadata.version('onnxruntime-genai')}"
                elif case.producer == "llama.cpp":
                    if lcpp is None:
                        raise RuntimeError("llama.cpp sources not given (--llama-cpp-src / LLAMA_CPP_SRC)")
                    ckpt = build_checkpoint(case, sp_model, work)
                    cmd = produce_gguf(case, ckpt, work, dest, lcpp)
                    version = f"convert_hf_to_gguf.py from {lcpp_version(lcpp)}"
                else:
                    cmd = WRITERS[case.name](case, dest)
                    version = f"gguf {importlib.metadata.version('gguf')} GGUFWriter"
                (dest / "config.json").write_text(json.dumps(case.config, indent=2) + "\n")
                if case.producer == "ort-genai":
                    measured = measure_onnx(case, dest)
                elif case.name in MROPE_CASES:
                    measured = measure_gguf_mrope(case, dest)
                elif case.name in PER_LAYER_CASES:
                    measured = measure_gguf_layers(case, dest)
                else:
                    measured = measure_gguf(case, dest)
            except Exception as exc:  # record and go on with the other producers
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


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(type(obj))


if __name__ == "__main__":
    sys.exit(main())
