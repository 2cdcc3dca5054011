"""MiMo (``model_type`` ``mimo``; remote code ``configuration_mimo.py`` / ``modeling_mimo.py``).

``class MiMoConfig(Qwen2Config)``, and its model is built from transformers' own Qwen2 classes
(``Qwen2Attention``, ``Qwen2Model``): Qwen2's rotary, rotate-half over ``head_dim`` (else
``hidden_size // num_attention_heads``), base ``rope_theta``. Its multi-token-prediction layers
(``num_nextn_predict_layers``) are Qwen2 attention layers with the same rotary and positions.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="mimo",
    doc="Xiaomi MiMo remote code: transformers' Qwen2 attention and rotary (rotate-half, whole head)",
    code="XiaomiMiMo/MiMo@43be2d82b1696a3645bdaccc7e268271b402766f configuration_mimo.py, modeling_mimo.py",
    architectures=("MiMoForCausalLM",),
    examples=(
        # d = 4: 640000 ** (-0 / 4), 640000 ** (-2 / 4) = 1 / 800
        Example("mimo-d4", {"model_type": "mimo", "hidden_size": 8, "num_attention_heads": 2, "head_dim": 4,
                            "rope_theta": 640000.0}, (1.0, 1 / 800)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``mimo``."""
    return FAMILY
