"""Orion-14B (``model_type`` ``orion``; remote code ``modeling_orion.py``).

Every port of Orion's code read (vLLM's ``orion.py``, SGLang's, AWS NeuronX's, which cites
``modeling_orion.py::OrionAttention``) applies Llama's rotary: rotate-half over
``hidden_size // num_attention_heads``, base ``rope_theta``. Orion's own ``modeling_orion.py`` was
not found, so the scaling it would apply is unchecked: a ``rope_scaling`` block is refused (published
Orion-14B configs state none).
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="orion",
    doc="Orion-14B: Llama's rotary (rotate-half, whole head, rope_theta); scaling unchecked, refused",
    code="ports of OrionStarAI/Orion-14B modeling_orion.py: vllm/model_executor/models/orion.py (vLLM 0.32), "
         "SGLang orion.py, NeuronX OrionAttention; configuration_orion.py (vLLM's adapted copy)",
    architectures=("OrionForCausalLM",),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    rope_types=(),
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 4096},
    examples=(
        Example("orion-d4", {"model_type": "orion", "hidden_size": 8, "num_attention_heads": 2}, (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``orion``."""
    return FAMILY
