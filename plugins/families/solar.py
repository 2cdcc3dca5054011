"""Solar (``model_type`` ``solar``; Upstage's remote code ``configuration_solar.py`` / ``modeling_solar.py``).

Its configuration class admits ``rope_scaling`` ``{"type": "linear" | "dynamic", "factor" > 1}``
only; its modeling file was not found, and the ports read (vLLM's ``solar.py``) apply Llama's
rotary: rotate-half over ``head_dim`` (else ``hidden_size // num_attention_heads``), base
``rope_theta``. So the unscaled table is served, and a ``rope_scaling`` block is refused: the code
that would apply it was not read.
"""

from __future__ import annotations

from ropekit import Example, ModelFamily, hookimpl

__all__ = ["FAMILY", "ropekit_family"]

FAMILY = ModelFamily(
    model_type="solar",
    doc="Solar (Upstage): Llama's rotary (rotate-half, rope_theta); scaling unchecked, refused",
    code="configuration_solar.py (vllm-project/vllm@e88892c9 vllm/transformers_utils/configs/solar.py, a copy); "
         "vllm/model_executor/models/solar.py (vLLM 0.32)",
    architectures=("SolarForCausalLM",),
    rope_types=(),
    defaults={"rope_theta": 10000.0, "max_position_embeddings": 2048},
    examples=(
        Example("solar-d4", {"model_type": "solar", "hidden_size": 8, "num_attention_heads": 2}, (1.0, 0.01)),
    ),
)


@hookimpl
def ropekit_family() -> ModelFamily:
    """Declare ``solar``."""
    return FAMILY
