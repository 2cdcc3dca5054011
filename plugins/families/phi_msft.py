"""phi-1.5 / phi-2 as first published (``model_type`` ``phi-msft``; remote code ``modeling_phi.py``, MixFormer).

``RotaryEmbedding(self.rotary_emb_dim)`` over the first ``rotary_dim`` channels of each head
(``n_embd // n_head`` wide; ``rotary_dim`` defaults to 32), base 10000 by the module's default (no
config key sets it), the two halves of those channels paired (``q_rot.chunk(2, dim=-1)``: rotate-half);
no scaling.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="phi-msft",
    doc="phi-1.5/phi-2 MixFormer remote code: rotary_dim channels, rotate-half, base 10000 hard-coded",
    code="modeling_phi.py of microsoft/phi-2 (MixFormer; stored-corpus copies 57501100238, 9655640326) and "
         "configuration_phi.py (PhiConfig, model_type phi-msft: corpus copy 5666255142)",
    architectures=(),
    fixed_theta=10000.0,
    rope_types=(),
    defaults={"rotary_dim": 32, "n_positions": 2048},
    inert_keys={"flash_rotary": "chooses flash-attn's fused rotary kernel (FlashRotaryEmbedding) over RotaryEmbedding; "
                                "both rotate the same halves by the same angles"},
    examples=(
        Example("phi-msft-d4", {"model_type": "phi-msft", "n_embd": 16, "n_head": 2, "rotary_dim": 4},
                (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``phi-msft``."""
    return FAMILY
