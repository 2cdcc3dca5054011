"""InternLM2 / InternLM2.5 (``model_type`` ``internlm2``; remote code ``modeling_internlm2.py``).

Llama's RoPE code: rotate-half over the whole head (``hidden_size // num_attention_heads``), base
``rope_theta`` (class default 10000), and ``rope_scaling`` of ``type`` ``linear`` (positions divided
by ``factor``) or ``dynamic`` (NTK base growth past ``max_position_embeddings``); its ``_init_rope``
raises ``ValueError`` for any other type.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="internlm2",
    doc="InternLM2/2.5 remote code: Llama's RoPE (rotate-half, whole head); linear or dynamic scaling only",
    code="InternLM/xtuner@98c193e3cc731015580706b05544827e8c4f41b5 "
         "xtuner/_lite/modelings/internlm2/modeling_internlm2.py",
    architectures=("InternLM2ForCausalLM", "InternLM2ForRewardModel"),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    rope_types=("linear", "dynamic"),
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 2048},
    examples=(
        # d = 4: 1e6 ** (-0 / 4), 1e6 ** (-2 / 4)
        Example("internlm2-d4", {"model_type": "internlm2", "hidden_size": 8, "num_attention_heads": 2,
                                 "rope_theta": 1000000.0}, (1.0, 1e-3)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``internlm2``."""
    return FAMILY
