"""MiniCPM-V (``model_type`` ``minicpmv``; remote code ``modeling_minicpmv.py``).

Its config class subclasses its language model's (MiniCPM for V-2, Llama for Llama3-V-2.5, Qwen2 for
V-2.6), so the language model's RoPE keys sit at the top level, and the wrapper builds that language
model from them: rotate-half over the whole head, base ``rope_theta``, the language model's scaling.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="minicpmv",
    doc="MiniCPM-V remote code: its language model (MiniCPM, Llama or Qwen2) from the top-level keys; rotate-half",
    code="HwwwwwwwH/MiniCPM-V-2@84ce9b02a1725e27ecd3a7d820b7cad75a123d83 modeling_minicpmv.py, "
         "configuration_minicpm.py",
    architectures=("MiniCPMV",),
    examples=(
        Example("minicpmv-d4", {"model_type": "minicpmv", "hidden_size": 8, "num_attention_heads": 2,
                                "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``minicpmv``."""
    return FAMILY
