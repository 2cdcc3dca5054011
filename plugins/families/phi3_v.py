"""Phi-3-vision / Phi-3.5-vision (``model_type`` ``phi3_v``; remote code ``modeling_phi3_v.py``).

Phi-3's rotary: rotate-half over ``hidden_size // num_attention_heads``, base ``rope_theta``;
``rope_scaling`` of type ``su`` (``longrope`` in later revisions): per-pair ``short_factor`` or
``long_factor``, chosen on each forward by ``max(position_ids) + 1 > original_max_position_embeddings``
(a top-level key), cos/sin multiplied by ``sqrt(1 + ln(max / original) / ln(original))``: ropekit's
``longrope``. Its own ``yarn`` variant (the same factor lists, cos/sin scaled by ``0.1 * ln(s) + 1``)
is not transformers' yarn, and is refused.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="phi3_v",
    doc="Phi-3(.5)-vision remote code: Phi-3's rotary; su/longrope factor lists chosen per forward",
    code="Aritra02091998/Phi-3-vision-128k-instruct-Improvised-for-QLORA-Training@"
         "16e16b08556652bc108b7c5d7e3ce94881148246 modeling_phi3_v.py (a copy)",
    architectures=("Phi3VForCausalLM",),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    rope_types=("su", "longrope"),
    refused_types={"yarn": "Phi-3-vision's own YaRN variant multiplies cos/sin by 0.1 * ln(max / original) + 1 over "
                           "the short/long factor lists; ropekit's yarn is transformers' (a ramp between bands), which "
                           "it is not"},
    examples=(
        Example("phi3v-d4", {"model_type": "phi3_v", "hidden_size": 8, "num_attention_heads": 2,
                             "rope_theta": 10000.0}, (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``phi3_v``."""
    return FAMILY
