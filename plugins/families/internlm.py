"""InternLM (v1) (``model_type`` ``internlm``; remote code ``modeling_internlm.py``).

Llama's RoPE code: rotate-half over the whole head (``hidden_size // num_attention_heads``), base
``rope_theta`` (class default 10000). Its ``_init_rope`` builds the dynamic NTK rotary for
``rope_scaling`` of ``type`` ``dynamic`` and raises ``ValueError`` for anything else ("Currently we
only support rotary embedding's type being 'dynamic'"), although its config class lets ``linear``
through. That is the InternLM GitHub repository's code; the code each Hugging Face Hub repository
ships (internlm-7b, internlm-chat-7b, internlm-20b) reads a ``rotary`` object instead (``{"base",
"type": "origin" | "dynamic", "scaling_factor"}``) and defaults it to ``{"base": 10000, "type":
"dynamic"}``. Which code a config runs is decided from the keys each config class writes
(``ropekit.config.remote.internlm_code``): internlm-7b's first config, which states neither, is served
its repository code's dynamic NTK (factor 1).
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="internlm",
    doc="InternLM (v1) remote code: Llama's RoPE (rotate-half, whole head); dynamic NTK scaling only",
    code="InternLM/InternLM@09a2b5ba502a50f80ca4d3821ec8b16c0c3dbc48 tools/transformers/internlm_model/"
         "modeling_internlm.py",
    architectures=("InternLMForCausalLM",),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    rope_types=("dynamic",),
    refused_types={"linear": "InternLM's _init_rope raises ValueError for it (its config class accepts it, its "
                             "model does not)"},
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 2048},
    examples=(
        Example("internlm-d4", {"model_type": "internlm", "hidden_size": 8, "num_attention_heads": 2,
                                "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``internlm``."""
    return FAMILY
