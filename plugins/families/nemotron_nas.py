"""Llama-Nemotron NAS models (``model_type`` ``nemotron-nas``; DeciLM remote code ``modeling_decilm.py``).

Llama's rotary (rotate-half over ``hidden_size // num_attention_heads``, base ``rope_theta``, the
rope_types of the transformers 4.44.2 copy it vendors: ``llama3`` for Nemotron-Super/Ultra) in every
layer whose attention exists: ``block_configs[i].attention`` with ``no_op`` (attention skipped) or
``replace_with_linear`` (a linear map) applies no RoPE in layer ``i``.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="nemotron-nas",
    doc="DeciLM (Llama-Nemotron NAS): Llama's RoPE; layers whose attention is no_op or replace_with_linear have none",
    code="DeltaVector1/Chat-Prompters@d8a2e79269c06877e1ee8ded6851ed120ffc787a modeling_decilm.py (a copy)",
    architectures=("DeciLMForCausalLM",),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    layer_configs="block_configs",
    no_rope_if={"attention.no_op": True, "attention.replace_with_linear": True},
    examples=(
        Example("decilm-d4", {"model_type": "nemotron-nas", "hidden_size": 8, "num_attention_heads": 2,
                              "num_hidden_layers": 2, "rope_theta": 10000.0,
                              "block_configs": [{"attention": {"no_op": False}}, {"attention": {"no_op": True}}]},
                (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``nemotron-nas``."""
    return FAMILY
