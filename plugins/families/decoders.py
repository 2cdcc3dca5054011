"""Decoder families vLLM 0.32 serves whose code lives in their checkpoints (remote code), one plugin
object each (``module:ATTRIBUTE`` entry points of the ``ropekit.families`` group).

Each declaration says what its code applies, and the code it was read from. Where only the
configuration class and the engines' ports could be read (TeleChat3, Nanbeige, Step-1,
Nemotron-H-Puzzle), ``code`` names them, and a rope_type the ports disagree on is refused with
what they disagree on.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily

from .objects import family_plugin

__all__ = [
    "DEEPSEEK_VL_V2", "DOTS_OCR", "EXTRACT_HIDDEN_STATES", "GTE_NEW", "INKLING_MODEL", "IQUESTLOOPCODER", "ISAAC",
    "K2_HORIZON", "K3_DSPARK", "LLAMA_BIDIREC", "LONGCAT_FLASH_NGRAM", "MEDUSA", "MIMO_V2", "MINICPMO",
    "MINIMAX_M3_MTP", "MINIMAX_M3_TEXT", "MOLMO", "MOONDREAM3", "NANBEIGE", "NEMOTRON_H_PUZZLE", "PHI4MM", "PLAMO3",
    "STEP1", "STEP3_TEXT", "TELECHAT3", "TELEFLM", "ULTRAVOX",
]



def _d4(model_type: str, **extra: object) -> tuple[Example, ...]:
    """A config of ``model_type`` with a 4-wide head at base 10000: inv_freq (1, 0.01)."""
    config = {"model_type": model_type, "hidden_size": 8, "num_attention_heads": 2, "rope_theta": 10000.0, **extra}
    return (Example(f"{model_type}-d4", config, (1.0, 0.01)),)


_WHOLE_HEAD = ("head_dim", "partial_rotary_factor", "rotary_dim")

STEP3_TEXT = family_plugin(ModelFamily(
    model_type="step3_text",
    doc="Step-3 text model remote code: rotate-half over head_dim (class default 256), base rope_theta "
        "(class default 500000)",
    code="modeling_step3.py (Step3TextAttention: Step3RotaryEmbedding(head_dim, rope_theta)); "
         "vllm/model_executor/models/step3_text.py:195",
    architectures=("Step3TextForCausalLM",),
    # its config names the length max_position_embedding: transformers' scaled rope functions, which read
    # max_position_embeddings, would fail on it, so only the plain table is one its code computes
    rope_types=(),
    defaults={"rope_theta": 500000.0, "head_dim": 256},
    examples=_d4("step3_text", head_dim=4),
))
TELECHAT3 = family_plugin(ModelFamily(
    model_type="telechat3",
    doc="TeleChat3 remote code: Llama's RoPE over the whole head, base rope_theta (class default 1e6)",
    code="configuration_telechat3.py (head_dim must equal hidden_size // num_attention_heads); vLLM 0.32 "
         "serves it as LlamaForCausalLM (registry.py:208); modeling_telechat3.py was not read",
    architectures=("TeleChat3ForCausalLM",),
    rope_types=(),
    refused_types={"telechat3-yarn": "the ports disagree on its cos/sin multiplier: vLLM 0.32 rewrites it to yarn "
                                     "with 0.07 * ln(factor) + 1 (transformers_utils/config.py:604-611), mlx-lm uses "
                                     "YaRN's 0.1 * ln(factor) + 1, and the family's own modeling_telechat3.py, which "
                                     "decides, could not be read"},
    defaults={"rope_theta": 1000000.0},
    examples=_d4("telechat3"),
))
NANBEIGE = family_plugin(ModelFamily(
    model_type="nanbeige",
    doc="Nanbeige remote code: Llama's RoPE; rope_scaling of type linear or dynamic only",
    code="configuration_nanbeige.py (_rope_scaling_validation: exactly {type: linear|dynamic, factor > 1}); "
         "modeling_nanbeige.py (Nanbeige/Nanbeige4.2-3B@5ff54fb7) runs Llama's attention num_loops times",
    architectures=("NanbeigeForCausalLM",),
    rope_types=("linear", "dynamic"),
    examples=_d4("nanbeige"),
))
MOLMO = family_plugin(ModelFamily(
    model_type="molmo",
    doc="Molmo remote code: rotate-half over hidden_size // num_attention_heads, base rope_theta, no scaling",
    code="modeling_molmo.py (MolmoForCausalLM passes rope_impl='llama': rotate-half; RotaryEmbedding over "
         "hidden_size // n_heads); vllm/model_executor/models/molmo.py:456",
    architectures=("MolmoForCausalLM",),
    unread_keys=_WHOLE_HEAD,
    rope_types=(),
    examples=_d4("molmo"),
))
PHI4MM = family_plugin(ModelFamily(
    model_type="phi4mm",
    doc="Phi-4-multimodal remote code: Phi-3's rotary over int(head_dim * partial_rotary_factor) leading channels; "
        "longrope (su and yarn configs are rewritten to it)",
    code="modeling_phi4mm.py / configuration_phi4mm.py (Phi4MMLongRoPEScaledRotaryEmbedding; "
         "_rope_scaling_adjustment: su, yarn -> longrope)",
    architectures=("Phi4MMForCausalLM",),
    rope_types=("longrope", "su", "yarn"),
    schemes={"su": "longrope", "yarn": "longrope"},
    examples=_d4("phi4mm"),
))
DOTS_OCR = family_plugin(ModelFamily(
    model_type="dots_ocr",
    doc="dots.ocr remote code: its language model is the config itself, a Qwen2Config (Qwen2's RoPE)",
    code="configuration_dots.py (DotsOCRConfig(Qwen2Config)); vllm/model_executor/models/dots_ocr.py",
    architectures=("DotsOCRForCausalLM",),
    defaults={"rope_theta": 10000.0},
    examples=_d4("dots_ocr"),
))
LLAMA_BIDIREC = family_plugin(ModelFamily(
    model_type="llama_bidirec",
    doc="Llama with bidirectional attention (NVIDIA embedding models): Llama's RoPE",
    code="LlamaBidirectionalConfig(LlamaConfig); vllm/model_executor/models/llama.py:243",
    architectures=("LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification"),
    defaults={"rope_theta": 10000.0},
    examples=_d4("llama_bidirec"),
))
STEP1 = family_plugin(ModelFamily(
    model_type="step1",
    doc="Step-1: ALiBi, no RoPE",
    code="vllm/model_executor/models/step1.py:51-75 (_get_step_alibi_slopes; no get_rope)",
    architectures=("Step1ForCausalLM",),
    no_rope="Step-1's attention adds ALiBi biases (Step's own slopes) and rotates nothing",
))
NEMOTRON_H_PUZZLE = family_plugin(ModelFamily(
    model_type="nemotron_h_puzzle",
    doc="Nemotron-H Puzzle (NAS-pruned Nemotron-H): Mamba-2 hybrid, attention without RoPE",
    code="vllm/model_executor/models/nemotron_h.py (NemotronHPuzzleForCausalLM: no rotary in any layer)",
    architectures=("NemotronHPuzzleForCausalLM",),
    no_rope="Nemotron-H's Mamba-2 layers carry position; its attention layers apply no rotary embedding",
))
IQUESTLOOPCODER = family_plugin(ModelFamily(
    model_type="iquestloopcoder",
    doc="IQuest LoopCoder remote code: rotate-half over head_dim (class default 128), base rope_theta (class "
        "default 500000); every layer re-run loop_num times with the same table; rope_scaling never read",
    code="modeling_iquestloopcoder.py / configuration_iquestloopcoder.py (IQuestLoopCoderRotaryEmbedding; "
         "rope_scaling stored, never read); vllm/model_executor/models/iquest_loopcoder.py:123",
    architectures=("IQuestLoopCoderForCausalLM",),
    unread_keys=("rope_scaling",),
    rope_types=(),
    defaults={"rope_theta": 500000.0, "head_dim": 128, "max_position_embeddings": 8192},
    examples=_d4("iquestloopcoder", head_dim=4),
))
MINICPMO = family_plugin(ModelFamily(
    model_type="minicpmo",
    doc="MiniCPM-o remote code: its language model is the config itself (Qwen2Config in 2.6, Qwen3Config in 4.5): "
        "rotate-half over head_dim, base rope_theta",
    code="configuration_minicpmo.py (MiniCPMOConfig(Qwen2Config), version 2.6; MiniCPMOConfig(Qwen3Config), "
         "version 4.5); vllm/model_executor/models/minicpmo.py",
    architectures=("MiniCPMO",),
    examples=_d4("minicpmo"),
))
LONGCAT_FLASH_NGRAM = family_plugin(ModelFamily(
    model_type="longcat_flash_ngram",
    doc="LongCat-Flash n-gram (LongCat-Flash-Lite): LongCat-Flash's config and attention, read as transformers' "
        "longcat_flash",
    code="vllm/transformers_utils/configs/longcat_flash_ngram.py (transformers' LongcatFlashConfig); "
         "vllm/model_executor/models/longcat_flash_ngram.py reuses longcat_flash.py's attention",
    architectures=("LongcatFlashNgramForCausalLM",),
    same_as="longcat_flash",
    examples=(Example("longcat-ngram-d4", {"model_type": "longcat_flash_ngram", "hidden_size": 8,
                                           "num_attention_heads": 2, "qk_rope_head_dim": 4, "qk_nope_head_dim": 4,
                                           "v_head_dim": 4, "kv_lora_rank": 4, "rope_theta": 10000.0},
                      (1.0, 0.01)),),
))
MINIMAX_M3_TEXT = family_plugin(ModelFamily(
    model_type="minimax_m3_text",
    doc="MiniMax-M3's text model as vLLM names it: transformers' minimax_m3_vl_text",
    code="vllm/transformers_utils/configs/minimax_m3.py (model_type minimax_m3_text for MiniMax-M3-VL's text_config; "
         "transformers names it minimax_m3_vl_text)",
    architectures=("MiniMaxM3SparseForCausalLM",),
    same_as="minimax_m3_vl_text",
    examples=_d4("minimax_m3_text", hidden_size=16, head_dim=8, partial_rotary_factor=0.5),  # half of 8 rotates
))
MOONDREAM3 = family_plugin(ModelFamily(
    model_type="moondream3",
    doc="Moondream 3: its text model's rotary is configured under its own text object",
    code="vikhyat/moondream@0f78e355 moondream/torch/rope.py (precompute_freqs_cis), text.py, hf_moondream.py",
    architectures=("HfMoondream", "Moondream3ForCausalLM"),
    unserved="its text model rotates dim // (2 * n_heads) pairs of each head (the first half: 32 of 64 channels) at "
             "a base of 1.5e6 by default, configured by keys of its own nested under 'text' (usually left out); "
             "ropekit reads no such object, so it will not guess those defaults",
))
ISAAC = family_plugin(ModelFamily(
    model_type="isaac",
    doc="Isaac (Perceptron): Qwen3 with its own M-RoPE, whose section layout differs between its code versions",
    code="modeling_isaac.py (IsaacRotaryEmbedding; copies of its Qwen2.5-VL-based and Qwen3-VL-based versions)",
    architectures=("IsaacForConditionalGeneration",),
    unserved="its IsaacRotaryEmbedding splits each head into mrope sections [head_dim / 4, head_dim / 8, head_dim / 8] "
             "laid out in chunks in its Qwen2.5-VL-based code and interleaved in its Qwen3-VL-based code, and a "
             "config does not say which code its checkpoint runs",
))
MIMO_V2 = family_plugin(ModelFamily(
    model_type="mimo_v2",
    doc="MiMo-V2.5/V2.6 remote code: full layers at rope_theta over int(head_dim * partial_rotary_factor) channels, "
        "sliding-window layers (hybrid_layer_pattern 1) at swa_rope_theta over int(swa_head_dim * "
        "partial_rotary_factor); rotate-half; the scaling block on both",
    code="modeling_mimo_v2.py (MiMoV2RotaryEmbedding(config, is_swa): swa_rope_theta, swa_head_dim; XiaomiMiMo/"
         "MiMo-V2.6-Flash-RL@3b38d063 as quoted by a test fixture); configuration_mimo_v2.py; "
         "vllm/model_executor/models/mimo_v2.py:282-290, 371-416",
    architectures=("MiMoV2ForCausalLM",),
    layer_pattern="hybrid_layer_pattern",
    layer_pattern_types={"0": "full_attention", "1": "sliding_attention"},
    layer_keys={"sliding_attention": {"rope_theta": "swa_rope_theta", "head_dim": "swa_head_dim"}},
    layer_pattern_from=("hybrid_block_size",),  # configuration_mimo_v2.py: no pattern, a block size: some layers SWA
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 32768},
    examples=(
        # full layers d = 4 at 10000; the sliding layer's head is 8 wide at half rotated: d = 4 at 100
        Example("mimo-v2-full-d4", {"model_type": "mimo_v2", "hidden_size": 8, "num_attention_heads": 2,
                                    "head_dim": 8, "swa_head_dim": 8, "partial_rotary_factor": 0.5,
                                    "num_hidden_layers": 2, "hybrid_layer_pattern": [0, 1], "rope_theta": 10000.0,
                                    "swa_rope_theta": 100.0}, (1.0, 0.01)),
        Example("mimo-v2-swa-d4", {"model_type": "mimo_v2", "hidden_size": 8, "num_attention_heads": 2,
                                   "head_dim": 8, "swa_head_dim": 8, "partial_rotary_factor": 0.5,
                                   "num_hidden_layers": 2, "hybrid_layer_pattern": [0, 1], "rope_theta": 10000.0,
                                   "swa_rope_theta": 100.0}, (1.0, 0.1), layer_type="sliding_attention"),
    ),
))
K2_HORIZON = family_plugin(ModelFamily(
    model_type="k2_horizon",
    doc="K2-Horizon: rotate-half over rope_head_dim (default head_dim) at rope_theta (class default 1e6); YaRN "
        "factor 16 by its config class's default when a config states no rope block",
    code="huggingface/transformers@cde3b202f1ebfbcf7c1e2f6895e00aab92057563 src/transformers/models/k2_horizon/"
         "modeling_k2_horizon.py (compute_default_rope_parameters: dim = config.rope_head_dim); "
         "configuration_k2_horizon.py@ba158bf4 (the YaRN default); vllm/model_executor/models/k2_horizon.py:631-647",
    architectures=("K2HorizonForCausalLM",),
    # a narrower rope head rotates pairs (i, head_dim / 2 + i) for i < rope_head_dim / 2 at base ** (-2i /
    # rope_head_dim) (split_to_interleaved), and transformers' scaled types size their table to head_dim instead
    equal_keys={"rope_head_dim": "head_dim"},
    defaults={"rope_theta": 1000000.0, "head_dim": 64, "max_position_embeddings": 131072,
              "rope_parameters": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 8192,
                                  "attention_factor": 1.2772588722239782, "beta_fast": 128.0, "beta_slow": 4.0,
                                  "truncate": True}},
    examples=_d4("k2_horizon", head_dim=4, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
))
PLAMO3 = family_plugin(ModelFamily(
    model_type="plamo3",
    doc="PLaMo 3: its configuration class builds each layer's rope itself",
    code="configuration_plamo3.py (Plamo3Config.rope_parameters, a property; is_full_attn); vllm/model_executor/"
         "models/plamo3.py:166-189; modeling_plamo3.py was not found",
    architectures=("Plamo3ForCausalLM",),
    unserved="its configuration class ignores the config's rope_scaling and builds each layer's rope from keys of its "
             "own: every sliding_window_pattern-th layer at rope_theta, YaRN from rope_scaling_factor and "
             "initial_context_length (beta 32 / 1, truncate false) when that factor is not 1; the others plain at "
             "rope_local_theta; no declaration expresses a block a configuration class synthesises, and its "
             "modeling code, which would confirm the layers, was not found",
))
GTE_NEW = family_plugin(ModelFamily(
    model_type="new",
    doc="Alibaba GTE v1.5 / multilingual encoders (new-impl): rotate-half over hidden_size // num_attention_heads at "
        "rope_theta; rope_scaling of type ntk only",
    code="Alibaba-NLP/new-impl modeling.py (RotaryEmbedding, NTKScalingRotaryEmbedding; NewEmbeddings._init_rope "
         "raises for any other type); vllm/model_executor/models/bert_with_rope.py:135",
    architectures=("NewModel", "NewForSequenceClassification"),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # dim = int(hidden_size / num_attention_heads)
    rope_types=("ntk",),
    examples=_d4("new"),
))
MEDUSA = family_plugin(ModelFamily(
    model_type="medusa",
    doc="Medusa draft heads: residual MLP blocks on the target model's hidden state, no attention",
    code="vllm/model_executor/models/medusa.py (Medusa: ResidualBlock of nn.Linear layers); "
         "vllm/transformers_utils/configs/medusa.py",
    architectures=("MedusaModel",),
    no_rope="Medusa's heads are residual MLP blocks on the target model's last hidden state: they attend to nothing, "
            "so they rotate nothing; the target model's own table is the one a forward uses",
))
EXTRACT_HIDDEN_STATES = family_plugin(ModelFamily(
    model_type="extract_hidden_states",
    doc="vLLM's extract_hidden_states pseudo-draft: it returns the target model's hidden states, no layers of its own",
    code="vllm/transformers_utils/configs/extract_hidden_states.py; "
         "vllm/model_executor/models/extract_hidden_states.py",
    architectures=("ExtractHiddenStatesModel",),
    no_rope="vLLM's extract_hidden_states method wraps the target model's config to hand its hidden states out; it "
            "runs no attention of its own, so it rotates nothing (the target model's table is the one a forward uses)",
))
INKLING_MODEL = family_plugin(ModelFamily(
    model_type="inkling_model",
    doc="Inkling's text model as vLLM names it (transformers' inkling_text): no RoPE",
    code="vllm/models/inkling/configs.py (InklingModelConfig); vllm/models/inkling/nvidia/model.py builds no rotary; "
         "transformers 5.24's inkling_text applies none",
    architectures=("InklingMTPModel",),
    no_rope="Inkling's text model applies no rotary embedding (transformers' inkling_text and vLLM's port alike)",
))
MINIMAX_M3_MTP = family_plugin(ModelFamily(
    model_type="minimax_m3_mtp",
    doc="MiniMax-M3's standalone MTP head: one MiniMax-M3 decoder layer, read as transformers' minimax_m3_vl_text",
    code="vllm/transformers_utils/configs/minimax_m3.py:110-120 (MiniMaxM3MTPConfig reuses the text backbone's "
         "schema, one hidden layer)",
    architectures=("MiniMaxM3MTP",),
    same_as="minimax_m3_vl_text",
    examples=_d4("minimax_m3_mtp", hidden_size=16, head_dim=8, partial_rotary_factor=0.5),
))
TELEFLM = family_plugin(ModelFamily(
    model_type="TeleFLM",
    doc="Tele-FLM (CofeAI): Llama's RoPE over the whole head at rope_theta; its muP multipliers touch no rotary",
    code="vllm/model_executor/models/teleflm.py (TeleFLMForCausalLM(LlamaForCausalLM): muP logits only); the model "
         "card (Rotary Positional Embedding) and CofeAI's FLM-Audio modeling_flmaudio.py (Llama's rotary, base "
         "10000 by default); its own modeling_teleflm.py was not found, so no scaling is served",
    architectures=("TeleFLMForCausalLM",),
    rope_types=(),
    defaults={"rope_theta": 10000.0},
    examples=_d4("TeleFLM"),
))
DEEPSEEK_VL_V2 = family_plugin(ModelFamily(
    model_type="deepseek_vl_v2",
    doc="DeepSeek-VL2 / DeepSeek-OCR: a language_config run by DeepSeek-V2's remote code two ways, chosen by use_mla",
    code="deepseek-ai/DeepSeek-VL2@ef9f91e2b6426536b83294c11742c27be66361b1 deepseek_vl2/models/"
         "modeling_deepseek_vl_v2.py:235-334 (DeepseekV2Config(**language_config)), modeling_deepseek.py:1215-1237",
    architectures=("DeepseekVLV2ForCausalLM", "DeepseekOCRForCausalLM", "DeepseekOCR2ForCausalLM"),
    unserved="its language_config states no model_type and runs DeepSeek-V2's remote code, which use_mla switches "
             "between MLA (interleaved pairs of the qk_rope_head_dim sub-head, DeepSeek-V2's own YaRN) and "
             "transformers 4.x LlamaAttention over hidden_size // num_attention_heads (DeepSeek-OCR); no class "
             "ropekit knows reads that switch, and transformers' deepseek_v2 computes YaRN otherwise",
))
ULTRAVOX = family_plugin(ModelFamily(
    model_type="ultravox",
    doc="Ultravox: its language model is another checkpoint's config whenever text_model_id is set",
    code="vllm/model_executor/models/ultravox.py; vllm/transformers_utils/configs/ultravox.py (text_model_id: "
         "AutoConfig.from_pretrained(text_model_id) replaces text_config)",
    architectures=("UltravoxModel",),
    unserved="its code builds the language model from text_model_id, another checkpoint's config, whenever that is "
             "set, so a text_config beside it may not be what runs; ropekit reads only the config it is given",
))
K3_DSPARK = family_plugin(ModelFamily(
    model_type="k3_dspark",
    doc="Kimi-K3's DSpark draft (vLLM's own model): MLA whose qk_rope_head_dim sub-head rotates in interleaved pairs "
        "at rope_theta (class default 50000)",
    code="vllm/models/kimi_k3/nvidia/mla.py:160-176 (get_rope(qk_rope_head_dim, is_neox_style=False)), "
         "dspark_mla.py:73-88 (use_rope=True); vllm/transformers_utils/configs/k3_dspark.py (rope_theta=50000.0)",
    architectures=("K3DSparkModel",),
    layout="gptj",
    rope_types=(),  # vLLM rewrites any other type to deepseek_yarn / deepseek_llama_scaling: not checked here
    defaults={"rope_theta": 50000.0},
    examples=(Example("k3-dspark-d4", {"model_type": "k3_dspark", "hidden_size": 8, "num_attention_heads": 2,
                                       "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 4,
                                       "kv_lora_rank": 4, "rope_theta": 10000.0}, (1.0, 0.01)),),
))
