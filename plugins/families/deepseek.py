"""DeepSeek-MoE (v1) (``model_type`` ``deepseek``; remote code ``modeling_deepseek.py``).

"Copied from transformers.models.llama" (4.36): rotate-half over ``hidden_size // num_attention_heads``,
base ``rope_theta``; ``rope_scaling`` ``linear`` (positions divided by ``factor``) or ``dynamic`` (NTK
base growth once the cache passes ``max_position_embeddings``); anything else raises.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="deepseek",
    doc="DeepSeek-MoE v1 remote code: Llama 4.36's rotary (rotate-half, whole head); linear or dynamic",
    code="modeling_deepseek.py of deepseek-ai/deepseek-moe-16b (a MindSpore port that keeps its 'Copied from "
         "transformers.models.llama' rotary: stored-corpus copy 20182941881)",
    architectures=("DeepseekForCausalLM",),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    rope_types=("linear", "dynamic"),
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 2048},
    examples=(
        Example("deepseek-moe-d4", {"model_type": "deepseek", "hidden_size": 8, "num_attention_heads": 2},
                (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``deepseek``."""
    return FAMILY
