"""TeleChat / TeleChat2 (``model_type`` ``telechat``; remote code ``modeling_telechat.py``): refused.

Its ``RotaryEmbedding(self.head_dim, config=config)`` never reads a base from the config (10000),
and on every forward recomputes the table for the context's total length: base
``10000 * alpha ** (d / (d - 2))`` with ``alpha = 2 ** ceil(log2(len / base_seqlen) + 1) - 1`` (a
power-of-two step) and cos and sin multiplied by ``0.1 * ln(len / training_seqlen) + 1``, in float16.
No rope_type expresses that rule (keys keep the rotation of the step that cached them), so every
TeleChat config is refused, naming it. Up to ``base_seqlen`` tokens the table is plain RoPE at 10000.
"""

from __future__ import annotations

from ropekit import ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="telechat",
    doc="TeleChat/TeleChat2 remote code: base 10000 with its own stepped NTK and mscale by context length (refused)",
    code="Tele-AI/TeleChat2@cd9287f3084d617f6c339b4e09a058656be91633 model/115B/modeling_telechat.py (RotaryEmbedding, "
         "lines 82-141)",
    architectures=("TelechatForCausalLM", "TeleChat2ForCausalLM"),
    unserved="its code ignores any base in the config (10000) and recomputes the table for the context's total "
             "length on every step: base 10000 * alpha ** (d / (d - 2)), "
             "alpha = 2 ** ceil(log2(len / base_seqlen) + 1) - 1, with cos and sin multiplied by "
             "0.1 * ln(len / training_seqlen) + 1; no rope_type serves that rule "
             "(it equals plain RoPE at base 10000 only while the context stays within base_seqlen)",
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``telechat`` (refused, naming its rule)."""
    return FAMILY
