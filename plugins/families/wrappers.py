"""Remote-code wrappers whose language model is a sub-config of a model_type ropekit serves.

A vision- or audio-language model whose own code builds its language model from one key of its
config (``llm_config``, ``text_config``, ``language_config``) and rotates nothing itself: ropekit
serves that sub-config, as its code builds it, with errors and warnings naming the full path
(``llm_config.rope_theta``). The key each wrapper reads is the one its remote configuration class
and vLLM 0.32's model file (``init_vllm_registered_model(..., hf_config=...)``) read. Each entry point
of the ``ropekit.families`` group names one of the plugin objects below (``module:ATTRIBUTE``).
"""

from __future__ import annotations

from ropekit import Example, ModelFamily

from .objects import family_plugin

__all__ = [
    "BAGEL", "COLQWEN3", "DEEPSEEK_V41", "FUNAUDIOCHAT", "INTERNS2_MOBIUS", "INTERNVL_CHAT", "INTERN_S2_PREVIEW",
    "KIMI_K3", "KIMI_VL", "LIGHTONOCR", "LLAMA_NEMOTRON_NANO_VL", "LLAMA_NEMOTRON_VL", "MIDASHENGLM", "MIMOVL",
    "MOSS_AUDIO", "NVLM_D", "OPENVLA", "OPS_COLQWEN3", "OVIS", "QWEN3_VL_NEMOTRON_EMBED", "STEP3_VL", "UNLIMITED_OCR",
]



def _example(model_type: str, key: str, inner: str = "qwen2") -> tuple[Example, ...]:
    """A wrapper around a small language model of ``inner``'s code: d = 4, base 10000 -> (1, 0.01)."""
    language_model: dict[str, object] = {"model_type": inner, "hidden_size": 8, "num_attention_heads": 2, "head_dim": 4,
                                         "rope_theta": 10000.0}
    if inner in ("deepseek_v2", "deepseek_v3"):
        language_model.update(qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=4, kv_lora_rank=4)
    return (Example(f"{model_type}-{inner}-d4", {"model_type": model_type, key: language_model}, (1.0, 0.01)),)


INTERNVL_CHAT = family_plugin(ModelFamily(
    model_type="internvl_chat",
    doc="InternVL (remote code): its language model is llm_config (InternLM2, Qwen2, Llama, Qwen3, ...)",
    code="configuration_internvl_chat.py (llm_config built by its architectures); vllm/model_executor/models/"
         "internvl.py: init_vllm_registered_model(hf_config=config.text_config), text_config aliasing llm_config",
    architectures=("InternVLChatModel",),
    language_model="llm_config",
    examples=_example("internvl_chat", "llm_config", "qwen2"),
))
NVLM_D = family_plugin(ModelFamily(
    model_type="NVLM_D",
    doc="NVLM-D (InternVL's remote code): its language model is llm_config (Qwen2)",
    code="vllm/model_executor/models/nvlm_d.py (InternVL's path: hf_config=config.text_config, from llm_config)",
    architectures=("NVLM_D",),
    language_model="llm_config",
    examples=_example("NVLM_D", "llm_config", "qwen2"),
))
LLAMA_NEMOTRON_NANO_VL = family_plugin(ModelFamily(
    model_type="Llama_Nemotron_Nano_VL",
    doc="Llama-Nemotron-Nano-VL (remote code): its language model is llm_config (Llama-3.1)",
    code="vllm/model_executor/models/nemotron_vl.py: init_vllm_registered_model(hf_config=config.get_text_config()),"
         " llm_config",
    architectures=("Llama_Nemotron_Nano_VL",),
    language_model="llm_config",
    examples=_example("Llama_Nemotron_Nano_VL", "llm_config", "llama"),
))
OVIS = family_plugin(ModelFamily(
    model_type="ovis",
    doc="Ovis (remote code): its language model is llm_config (Qwen2, Llama, Gemma-2)",
    code="vllm/model_executor/models/ovis.py: init_vllm_registered_model(with_hf_config(config.get_text_config()))",
    architectures=("Ovis",),
    language_model="llm_config",
    examples=_example("ovis", "llm_config", "qwen2"),
))
BAGEL = family_plugin(ModelFamily(
    model_type="bagel",
    doc="BAGEL (remote code): its language model is llm_config (Qwen2)",
    code="vllm/model_executor/models/bagel.py: hf_config=config.llm_config, architectures ['Qwen2ForCausalLM']",
    architectures=("BagelForConditionalGeneration",),
    language_model="llm_config",
    examples=_example("bagel", "llm_config", "qwen2"),
))
KIMI_VL = family_plugin(ModelFamily(
    model_type="kimi_vl",
    doc="Kimi-VL (remote code): its language model is text_config (DeepSeek-V3's code)",
    code="vllm/transformers_utils/configs/kimi_vl.py (KimiVLConfig.text_config: DeepseekV3Config); "
         "vllm/model_executor/models/kimi_vl.py builds DeepseekV2ForCausalLM from it",
    architectures=("KimiVLForConditionalGeneration",),
    language_model="text_config",
    examples=_example("kimi_vl", "text_config", "deepseek_v3"),
))
OPENVLA = family_plugin(ModelFamily(
    model_type="openvla",
    doc="OpenVLA (remote code): its language model is text_config (Llama-2)",
    code="vllm/model_executor/models/openvla.py: init_vllm_registered_model(hf_config=config.text_config)",
    architectures=("OpenVLAForActionPrediction",),
    language_model="text_config",
    examples=_example("openvla", "text_config", "llama"),
))
FUNAUDIOCHAT = family_plugin(ModelFamily(
    model_type="funaudiochat",
    doc="Fun-Audio-Chat (remote code): its language model is text_config (Qwen3)",
    code="vllm/transformers_utils/configs/funaudiochat.py; vllm/model_executor/models/funaudiochat.py builds "
         "Qwen3ForCausalLM from text_config",
    architectures=("FunAudioChatForConditionalGeneration",),
    language_model="text_config",
    examples=_example("funaudiochat", "text_config", "qwen3"),
))
INTERN_S2_PREVIEW = family_plugin(ModelFamily(
    model_type="intern_s2_preview",
    doc="Intern-S2-Preview (remote code): its language model is text_config (Qwen3.5-MoE)",
    code="vllm/model_executor/models/interns2_preview.py (Qwen3_5MoeForConditionalGeneration on text_config)",
    architectures=("InternS2PreviewForConditionalGeneration",),
    language_model="text_config",
    examples=_example("intern_s2_preview", "text_config", "qwen3"),
))
MIDASHENGLM = family_plugin(ModelFamily(
    model_type="midashenglm",
    doc="MiDashengLM (remote code): its language model is text_config (a Qwen2.5-Omni text model)",
    code="vllm/transformers_utils/configs/midashenglm.py; vllm/model_executor/models/midashenglm.py builds "
         "Qwen2ForCausalLM from text_config",
    architectures=("MiDashengLMModel",),
    language_model="text_config",
    examples=_example("midashenglm", "text_config", "qwen2"),
))
MIMOVL = family_plugin(ModelFamily(
    model_type="mimovl",
    doc="MiMo-V2-Omni (remote code): its language model is text_config (MiMo-V2-Flash)",
    code="vllm/transformers_utils/configs/mimo_v2_omni.py; vllm/model_executor/models/mimo_v2_omni.py",
    architectures=("MiMoV2OmniForCausalLM",),
    language_model="text_config",
    examples=_example("mimovl", "text_config", "qwen2"),
))
STEP3_VL = family_plugin(ModelFamily(
    model_type="step3_vl",
    doc="Step3-VL (remote code): its language model is text_config (step3_text)",
    code="vllm/transformers_utils/configs/step3_vl.py (Step3VLConfig.text_config: Step3TextConfig)",
    architectures=("Step3VLForConditionalGeneration",),
    language_model="text_config",
    examples=_example("step3_vl", "text_config", "qwen2"),
))
MOSS_AUDIO = family_plugin(ModelFamily(
    model_type="moss_audio",
    doc="MOSS-Audio (remote code): its language model is language_config (a Qwen3Config)",
    code="vllm/transformers_utils/configs/moss_audio.py (language_config = Qwen3Config(**language_config)); "
         "vllm/model_executor/models/moss_audio.py",
    architectures=("MossAudioModel",),
    language_model="language_config",
    examples=_example("moss_audio", "language_config", "qwen3"),
))
LLAMA_NEMOTRON_VL = family_plugin(ModelFamily(
    model_type="llama_nemotron_vl",
    doc="Llama-Nemotron VL embedding/reranking models (remote code): their language model is llm_config (a "
        "bidirectional Llama)",
    code="vllm/model_executor/models/nemotron_vl.py (LlamaNemotronVLModel: hf_config=config.get_text_config(), "
         "llm_config.is_causal = False)",
    architectures=("LlamaNemotronVLModel", "LlamaNemotronVLForSequenceClassification"),
    language_model="llm_config",
    examples=_example("llama_nemotron_vl", "llm_config", "llama"),
))
LIGHTONOCR = family_plugin(ModelFamily(
    model_type="lightonocr",
    doc="LightOnOCR (remote code): its language model is text_config",
    code="vllm/model_executor/models/lightonocr.py:161-173 (init_vllm_registered_model(hf_config=config.text_config))",
    architectures=("LightOnOCRForConditionalGeneration",),
    language_model="text_config",
    examples=_example("lightonocr", "text_config", "qwen3"),
))
COLQWEN3 = family_plugin(ModelFamily(
    model_type="colqwen3",
    doc="ColQwen3 (late interaction, remote code): Qwen3-VL's config; its language model is text_config",
    code="vllm/transformers_utils/configs/colqwen3.py (ColQwen3Config(Qwen3VLConfig))",
    architectures=("ColQwen3",),
    language_model="text_config",
    examples=_example("colqwen3", "text_config", "qwen3"),
))
OPS_COLQWEN3 = family_plugin(ModelFamily(
    model_type="ops_colqwen3",
    doc="OpsColQwen3 (late interaction, remote code): ColQwen3's config; its language model is text_config",
    code="vllm/transformers_utils/configs/colqwen3.py (OpsColQwen3Config(ColQwen3Config))",
    architectures=("OpsColQwen3Model",),
    language_model="text_config",
    examples=_example("ops_colqwen3", "text_config", "qwen3"),
))
QWEN3_VL_NEMOTRON_EMBED = family_plugin(ModelFamily(
    model_type="qwen3_vl_nemotron_embed",
    doc="Qwen3-VL Nemotron embedding (remote code): ColQwen3's config; its language model is text_config",
    code="vllm/transformers_utils/configs/colqwen3.py (Qwen3VLNemotronEmbedConfig(ColQwen3Config))",
    architectures=("Qwen3VLNemotronEmbedModel",),
    language_model="text_config",
    examples=_example("qwen3_vl_nemotron_embed", "text_config", "qwen3"),
))
KIMI_K3 = family_plugin(ModelFamily(
    model_type="kimi_k3",
    doc="Kimi-K3 (remote code): its language model is text_config (Kimi-Linear)",
    code="vllm/transformers_utils/configs/kimi_k3.py:86-104 (text_config -> KimiLinearConfig(**text_config))",
    architectures=("KimiK3ForConditionalGeneration",),
    language_model="text_config",
    examples=_example("kimi_k3", "text_config", "qwen3"),
))
INTERNS2_MOBIUS = family_plugin(ModelFamily(
    model_type="interns2_mobius",
    doc="Intern-S2 Mobius (remote code): its language model is text_config",
    code="vllm/model_executor/models/interns2_mobius.py (the text stack from hf_text_config)",
    architectures=("InternS2MobiusForConditionalGeneration",),
    language_model="text_config",
    examples=_example("interns2_mobius", "text_config", "qwen3"),
))
UNLIMITED_OCR = family_plugin(ModelFamily(
    model_type="unlimited-ocr",
    doc="Unlimited-OCR (remote code): its language model is language_config, which states no model_type and runs "
        "Llama's attention (use_mla false)",
    code="baidu/Unlimited-OCR modeling_deepseekv2.py:1387 (use_mla false: SlidingWindowLlamaAttention, Llama's rotary; "
         "the window is a mask)",
    architectures=("UnlimitedOCRForCausalLM",),
    language_model="language_config",
    language_model_type="unlimited_ocr_text",
    examples=_example("unlimited-ocr", "language_config", "llama"),
))
DEEPSEEK_V41 = family_plugin(ModelFamily(
    model_type="deepseek_v41",
    doc="DeepSeek-V4.1 (remote code): its language model is text_config, a DeepSeek-V4 text model",
    code="vllm/transformers_utils/configs/deepseek_v41.py (DeepseekV41Config flattens text_config onto the top level, "
         "its rope_scaling becoming rope_parameters); vllm/models/deepseek_v41/common/rope.py "
         "(build_deepseek_v4_rope, DeepSeek-V4's)",
    architectures=("DeepseekV41ForCausalLM",),
    language_model="text_config",
    language_model_type="deepseek_v4",
    examples=_example("deepseek_v41", "text_config", "qwen2"),
))
