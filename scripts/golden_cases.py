"""The config matrix the golden tables are generated for (shared by the generator and the tests).

Each case: a name, a whole config.json mapping (with ``model_type``, so transformers can build
it), and the sequence lengths to evaluate (``None`` is the load-time table).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CASES"]


def _ramp(count: int, start: float, stop: float) -> list[float]:
    step = (stop - start) / max(count - 1, 1)
    return [round(start + step * i, 6) for i in range(count)]


LLAMA32_1B: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 16,
    "head_dim": 64, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}

PHI3_LONG: dict[str, Any] = {
    "model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 4,
    "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": _ramp(48, 1.0, 1.19),
                     "long_factor": _ramp(48, 1.0, 47.5)},
}

CASES: list[tuple[str, dict[str, Any], list[int | None]]] = [
    # --- default -------------------------------------------------------------------------
    ("default-llama2", {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                        "num_hidden_layers": 2, "max_position_embeddings": 4096, "rope_theta": 10000.0,
                        "rope_scaling": None}, [None]),
    ("default-empty-scaling", {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8,
                               "num_hidden_layers": 2, "rope_theta": 1000000.0, "rope_scaling": {}}, [None]),
    ("default-v5-parameters", {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16,
                               "num_hidden_layers": 2,
                               "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}, [None]),
    ("default-head-dim-differs", {"model_type": "qwen3", "hidden_size": 2048, "num_attention_heads": 16,
                                  "num_hidden_layers": 2, "head_dim": 128, "rope_theta": 1000000.0,
                                  "rope_scaling": None}, [None]),
    ("default-partial-phi", {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32,
                             "num_hidden_layers": 2, "partial_rotary_factor": 0.4, "rope_theta": 10000.0}, [None]),
    ("default-neox-rotary-pct", {"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 8,
                                 "num_hidden_layers": 2, "rotary_pct": 0.25, "rotary_emb_base": 10000}, [None]),
    ("default-tiny-theta", {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                            "num_hidden_layers": 1, "rope_theta": 1.5}, [None]),
    # --- llama3 --------------------------------------------------------------------------
    ("llama3-3.2-1b", LLAMA32_1B, [None]),
    ("llama3-3.1-8b", {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                       "num_hidden_layers": 2, "max_position_embeddings": 131072, "rope_theta": 500000.0,
                       "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 8192, "rope_type": "llama3"}}, [None]),
    ("llama3-factor-1", {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 16,
                         "num_hidden_layers": 1, "max_position_embeddings": 16384, "rope_theta": 10000.0,
                         "rope_scaling": {"factor": 1.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0,
                                          "original_max_position_embeddings": 4096, "rope_type": "llama3"}}, [None]),
    ("llama3-partial", {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 16,
                        "num_hidden_layers": 1, "max_position_embeddings": 65536, "rope_theta": 500000.0,
                        "partial_rotary_factor": 0.5,
                        "rope_scaling": {"factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}}, [None]),
    # --- longrope ------------------------------------------------------------------------
    ("longrope-phi3-128k", PHI3_LONG, [None, 4096, 4097, 131072]),
    # A llama config: Phi3Config carries a class default original_max_position_embeddings (4096)
    # that transformers lets override the block's value; a real Phi-3 config.json states it.
    ("longrope-explicit-factor", {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16,
                                  "num_hidden_layers": 1, "max_position_embeddings": 32768, "rope_theta": 250000.0,
                                  "rope_scaling": {"rope_type": "longrope", "factor": 4.0, "attention_factor": 1.25,
                                                   "original_max_position_embeddings": 8192,
                                                   "short_factor": _ramp(32, 1.0, 1.5),
                                                   "long_factor": _ramp(32, 2.0, 9.0)}}, [None, 8192, 8193]),
    ("longrope-partial-phi4", {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 24,
                               "num_hidden_layers": 1, "max_position_embeddings": 131072, "rope_theta": 10000.0,
                               "partial_rotary_factor": 0.75, "original_max_position_embeddings": 4096,
                               "rope_scaling": {"type": "longrope", "short_factor": _ramp(48, 1.0, 3.0),
                                                "long_factor": _ramp(48, 1.0, 60.0)}}, [None, 5000]),
    # --- proportional (Gemma-4) ----------------------------------------------------------
    ("proportional-gemma4", {"model_type": "gemma4_text", "hidden_size": 1536, "num_attention_heads": 8,
                             "num_key_value_heads": 1, "num_hidden_layers": 6, "head_dim": 256,
                             "global_head_dim": 512, "max_position_embeddings": 131072,
                             "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
                             "rope_parameters": {
                                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                    "rope_theta": 1000000.0},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}, [None]),
    # --- linear / dynamic / yarn ---------------------------------------------------------
    ("linear-factor-4", {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                         "num_hidden_layers": 1, "rope_theta": 10000.0,
                         "rope_scaling": {"type": "linear", "factor": 4.0}}, [None]),
    ("gemma3-v4-local-base", {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8,
                              "num_key_value_heads": 4, "num_hidden_layers": 12, "head_dim": 256,
                              "max_position_embeddings": 131072, "rope_theta": 1000000.0,
                              "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
                              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}, [None]),
    ("dynamic-factor-2", {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                          "num_hidden_layers": 1, "max_position_embeddings": 4096, "rope_theta": 10000.0,
                          "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
     [None, 4096, 4097, 8192, 100000]),
    ("dynamic-partial-neox", {"model_type": "gpt_neox", "hidden_size": 2048, "num_attention_heads": 16,
                              "num_hidden_layers": 1, "max_position_embeddings": 2048, "rotary_pct": 0.25,
                              "rotary_emb_base": 10000,
                              "rope_scaling": {"type": "dynamic", "factor": 4.0}}, [None, 2049, 16384]),
    ("yarn-qwen2.5", {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
                      "num_hidden_layers": 1, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
                      "rope_scaling": {"type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 32768}}, [None]),
    ("yarn-deepseek-v3", {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                          "num_hidden_layers": 1, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                          "v_head_dim": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
                          "max_position_embeddings": 163840, "rope_theta": 10000,
                          "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                           "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                           "type": "yarn"}}, [None]),
    ("yarn-kimi-k2-equal-betas", {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 64,
                                  "num_hidden_layers": 1, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                                  "v_head_dim": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
                                  "max_position_embeddings": 131072, "rope_theta": 50000.0,
                                  "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                                                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                                   "type": "yarn"}}, [None]),
    ("yarn-mscale-ratio", {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 16,
                           "num_hidden_layers": 1, "max_position_embeddings": 65536, "rope_theta": 50000.0,
                           "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "mscale": 0.707,
                                            "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}}, [None]),
    ("yarn-gpt-oss-no-truncate", {"model_type": "llama", "hidden_size": 2880, "num_attention_heads": 64,
                                  "head_dim": 64, "num_hidden_layers": 1, "max_position_embeddings": 131072,
                                  "rope_theta": 150000,
                                  "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                                   "beta_slow": 1.0, "truncate": False,
                                                   "original_max_position_embeddings": 4096}}, [None]),
    ("yarn-explicit-attention", {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8,
                                 "num_hidden_layers": 1, "max_position_embeddings": 32768, "rope_theta": 10000.0,
                                 "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "attention_factor": 0.9,
                                                  "beta_fast": 16, "beta_slow": 2,
                                                  "original_max_position_embeddings": 4096}}, [None]),
    # (a yarn block without factor is refused: transformers raises KeyError when it is absent, and
    # deriving it from max / original would turn a missing parameter into a guessed table)
    ("llama3-llama4-equal-factors", {"model_type": "llama", "hidden_size": 5120, "num_attention_heads": 40,
                                     "head_dim": 128, "num_hidden_layers": 1, "max_position_embeddings": 10485760,
                                     "rope_theta": 500000.0,
                                     "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                                                      "original_max_position_embeddings": 8192,
                                                      "rope_type": "llama3"}}, [None]),
    ("yarn-ministral3-block-max-positions", {"model_type": "ministral3", "hidden_size": 4096, "num_attention_heads": 32,
                                             "head_dim": 128, "num_hidden_layers": 1,
                                             "max_position_embeddings": 262144,
                                             "rope_parameters": {"rope_type": "yarn", "type": "yarn", "factor": 16.0,
                                                                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                                                                 "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1,
                                                                 "max_position_embeddings": 262144,
                                                                 "original_max_position_embeddings": 16384,
                                                                 "rope_theta": 1000000000.0}}, [None]),
    ("longrope-phimoe-mscale", {"model_type": "phimoe", "hidden_size": 4096, "num_attention_heads": 32,
                                "num_hidden_layers": 1, "num_local_experts": 2, "max_position_embeddings": 131072,
                                "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                                "rope_scaling": {"type": "longrope", "short_mscale": 1.243, "long_mscale": 1.243,
                                                 "short_factor": _ramp(64, 1.0, 1.3),
                                                 "long_factor": _ramp(64, 1.0, 40.0),
                                                 "original_max_position_embeddings": 4096}}, [None]),
    ("mrope-qwen3-vl-interleaved", {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_attention_heads": 32,
                                    "num_hidden_layers": 1, "max_position_embeddings": 262144, "rope_theta": 5000000.0,
                                    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20],
                                                     "mrope_interleaved": True}}, [None]),
    ("yarn-mistral4-mla-partial", {"model_type": "mistral4", "hidden_size": 2048, "num_attention_heads": 16,
                                   "num_hidden_layers": 1, "qk_rope_head_dim": 64, "qk_nope_head_dim": 64,
                                   "v_head_dim": 128, "kv_lora_rank": 256, "q_lora_rank": 512,
                                   "max_position_embeddings": 1048576,
                                   "rope_parameters": {"type": "yarn", "rope_type": "yarn", "rope_theta": 10000.0,
                                                       "factor": 128.0, "original_max_position_embeddings": 8192,
                                                       "max_position_embeddings": 1048576, "beta_fast": 32.0,
                                                       "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
                                                       "llama_4_scaling_beta": 0.1,
                                                       "partial_rotary_factor": 0.5}}, [None]),
    ("yarn-mrope-qwen3.5-text-config", {"model_type": "qwen3_5", "text_config": {
        "head_dim": 256, "hidden_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2,
        "num_hidden_layers": 4, "max_position_embeddings": 262144,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "rope_type": "yarn",
                            "rope_theta": 10000000, "partial_rotary_factor": 0.25, "factor": 4.0,
                            "original_max_position_embeddings": 262144}}}, [None]),
    ("mrope-qwen2-vl", {"model_type": "qwen2_vl_text", "hidden_size": 3584, "num_attention_heads": 28,
                        "num_hidden_layers": 1, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
                        "rope_scaling": {"type": "default", "mrope_section": [16, 24, 24]}}, [None]),
]
