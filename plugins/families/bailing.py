"""Ling / Ring (inclusionAI's Bailing code), and the families built from it.

One published ``model_type``, ``bailing_moe``, runs two codes: Ling v1's ``modeling_bailing_moe.py``
(``BailingMoeForCausalLM``: the whole head rotates, ``rope_scaling`` of legacy ``type`` linear,
dynamic or DeepSeek-V2's YaRN) and Ling 2.0 / Ring 2.0's ``modeling_bailing_moe_v2.py``
(``BailingMoeV2ForCausalLM``: the first ``int(head_dim * partial_rotary_factor)`` channels rotate,
any transformers rope_type). Ling 2.0's exporter writes ``"model_type": "bailing_moe"`` beside the V2
class (inclusionAI/Ling-V2@af8837e tools/convert_dcp_to_safetensors.py:207) and its config class
states no model_type, so ``architectures`` decides, as it decides which code vLLM runs: the ``ling-v2``
family below serves the V2 class (``bailing_moe_v2`` is the model_type of Ming-omni's multimodal
language model, another code, so it is not claimed here). Each entry point of the
``ropekit.families`` group names one plugin object (``module:ATTRIBUTE``).
"""

from __future__ import annotations

from ropekit import Example, ModelFamily

from .objects import family_plugin

__all__ = ["BAILING_MOE", "BAILING_MOE_V3_VL", "LING_V2", "PARAM2MOE"]



_V1 = "inclusionAI/Ling@5ccaeae073d6d3a042f9b784802cefdd0abc819f models/modeling_bailing_moe.py"
_V2 = "inclusionAI/Ling-V2@af8837e677a1aa36895845da084f9c91acf4fed2 models/modeling_bailing_moe_v2.py"

BAILING_MOE = family_plugin(ModelFamily(
    model_type="bailing_moe",
    doc="Ling v1 remote code: rotate-half over the whole head; linear, dynamic, or DeepSeek-V2's YaRN",
    code=_V1,
    architectures=("BailingMoeForCausalLM",),
    variants={"BailingMoeV2ForCausalLM": "ling-v2"},
    unread_keys=("partial_rotary_factor", "rotary_dim"),  # L485: head_dim or hidden_size // heads, all of it
    rope_types=("linear", "dynamic", "yarn"),  # _init_rope L508-544, ValueError for any other
    schemes={"yarn": "deepseek_yarn"},  # BailingMoeYarnRotaryEmbedding: original 4096 and mscale 1 / 0 by default
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 16384},
    examples=(
        Example("bailing-v1-d4", {"model_type": "bailing_moe", "architectures": ["BailingMoeForCausalLM"],
                                  "hidden_size": 8, "num_attention_heads": 2, "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
))
LING_V2 = family_plugin(ModelFamily(
    model_type="ling-v2",
    doc="Ling 2.0 / Ring 2.0 remote code (configs state model_type bailing_moe): the first "
        "int(head_dim * partial_rotary_factor) channels, rotate-half; transformers' rope_types",
    code=_V2,
    architectures=("BailingMoeV2ForCausalLM",),
    defaults={"rope_theta": 600000.0, "head_dim": 128, "max_position_embeddings": 32768},
    examples=(
        # head_dim 8, half of it rotated: d = 4, base 10000
        Example("ling2-d4", {"architectures": ["BailingMoeV2ForCausalLM"],
                             "hidden_size": 16, "num_attention_heads": 2, "head_dim": 8,
                             "partial_rotary_factor": 0.5, "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
))
PARAM2MOE = family_plugin(ModelFamily(
    model_type="param2moe",
    doc="Param-2 MoE remote code: a copy of Ling 2.0's configuration; its modeling code was not read",
    code="configuration_param2moe.py (BailingMoeV2Config's copy); vllm/model_executor/models/param2moe.py:156-175",
    architectures=("Param2MoEForCausalLM",),
    unserved="its modeling code could not be read to check, and the one port read disagrees with the configuration: "
             "vLLM 0.32 passes rope_theta under the key 'base', which its get_rope ignores, so vLLM serves base "
             "10000 whatever rope_theta says; ropekit will not choose between them unchecked",
))
BAILING_MOE_V3_VL = family_plugin(ModelFamily(
    model_type="bailing_moe_v3_vl",
    doc="Ling 3.0 VL: 3-axis interleaved M-RoPE of its own (bailing_mrope)",
    code="inclusionAI/vllm-ling-v3@7a355d72 vllm/model_executor/layers/rotary_embedding/bailing_mrope.py",
    architectures=("BailingMoeV3VLForConditionalGeneration",),
    unserved="its bailing_mrope pairs frequencies with the height position when even and the width position when "
             "odd over the first H + W pairs, and the time position after them; no mrope composition ropekit has "
             "matches it, and its own modeling code was not available to check one against",
))
