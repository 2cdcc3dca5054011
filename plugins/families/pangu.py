"""openPangu (Huawei): the dense Embedded models and the Ultra MoE, each with its own remote code.

``PanguEmbedded`` (``modeling_openpangu_dense.py``): Llama's RoPE through transformers' rope
functions, rotate-half over ``head_dim``, base ``rope_theta`` (class default 1.6e7). ``pangu_ultra_moe``
(``modeling_openpangu_moe.py``): multi-head latent attention whose rope sub-head is
``attention_qk_rope_dim`` channels, interleaved as DeepSeek-V3's remote code does (``view(d // 2, 2)
.transpose``), base ``rope_theta``; its code never reads ``rope_scaling``. Each entry point of the
``ropekit.families`` group names one plugin object (``module:ATTRIBUTE``).
"""

from __future__ import annotations

from ropekit import Example, ModelFamily

from .objects import family_plugin

__all__ = ["PANGU_EMBEDDED", "PANGU_ULTRA_MOE"]



PANGU_EMBEDDED = family_plugin(ModelFamily(
    model_type="PanguEmbedded",
    doc="openPangu-Embedded remote code: rotate-half over head_dim, base rope_theta (class default 1.6e7)",
    code="IDLEOAK/openpangu-lightweight-methods@26a4a87d1049c8457f9f77a2068a26e2c41b3b0e "
         "modeling_openpangu_dense.py (a copy of the hub file)",
    architectures=("PanguEmbeddedForCausalLM",),
    defaults={"rope_theta": 16000000.0, "max_position_embeddings": 32768},
    examples=(
        Example("pangu-embedded-d4", {"model_type": "PanguEmbedded", "hidden_size": 8, "num_attention_heads": 2,
                                      "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
))
PANGU_ULTRA_MOE = family_plugin(ModelFamily(
    model_type="pangu_ultra_moe",
    doc="openPangu-Ultra-MoE remote code: the MLA rope sub-head (attention_qk_rope_dim), interleaved pairs, "
        "base rope_theta; rope_scaling never read",
    code="modeling_openpangu_moe.py (Huawei's port in a transformers tree; OpenPanguMoERotaryEmbedding(self."
         "attention_qk_rope_dim, base=config.rope_theta)); vllm/model_executor/models/openpangu.py:327-345",
    architectures=("PanguUltraMoEForCausalLM",),
    layout="gptj",
    width_key="attention_qk_rope_dim",
    unread_keys=("rope_scaling",),
    rope_types=(),
    examples=(
        Example("pangu-ultra-d4", {"model_type": "pangu_ultra_moe", "hidden_size": 16, "num_attention_heads": 2,
                                   "attention_qk_rope_dim": 4, "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
))
