"""The engine artifacts under ``tests/data/artifacts/`` that the producer scripts in this folder make: tiny
random Hugging Face checkpoints (fixed seed, one layer, vocab 96) declaring various RoPE schemes (:data:`CASES`, each
naming its producer), and the conventions the manifest records. Shared by ``onnx_builder.py``, ``gguf_convert.py``
and ``gguf_writer.py``; nothing here runs a producer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
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
