"""MiniCPM (``model_type`` ``minicpm``; remote code ``modeling_minicpm.py``, two generations).

Both: rotate-half over the whole head (``hidden_size // num_attention_heads``), base ``rope_theta``
(class default 10000). MiniCPM-2B/1B's code applies ``rope_scaling`` ``linear`` or ``dynamic`` (and
raises for others); MiniCPM4's code adds ``longrope``, whose factor set it chooses once, when it
builds its cache at ``max_position_embeddings``: the long factors for every position whenever
``max_position_embeddings`` exceeds ``original_max_position_embeddings`` (served by the
``minicpm_longrope`` rope_type, which this family maps ``longrope`` to).
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="minicpm",
    doc="MiniCPM remote code: rotate-half over the whole head; linear, dynamic, and MiniCPM4's longrope",
    code="HwwwwwwwH/MiniCPM-V-2@84ce9b02a1725e27ecd3a7d820b7cad75a123d83 modeling_minicpm.py (MiniCPM-2B); "
         "wxthu/nas_tuner@929b4ec08d9fdafeb3035b90c98bc6fcbdc62929 modeling_minicpm.py (MiniCPM4)",
    architectures=("MiniCPMForCausalLM",),
    unread_keys=("head_dim", "partial_rotary_factor", "rotary_dim"),  # it rotates hidden_size // heads
    rope_types=("linear", "dynamic", "longrope"),
    schemes={"longrope": "minicpm_longrope"},
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 2048},
    examples=(
        Example("minicpm-d4", {"model_type": "minicpm", "hidden_size": 8, "num_attention_heads": 2},
                (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``minicpm``."""
    return FAMILY
