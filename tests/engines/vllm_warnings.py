"""The warnings vLLM 0.32 trips in its own code, shared by the checks that run in vLLM's virtualenv."""

from __future__ import annotations

import pytest

__all__ = ["VLLM_MARKS", "VLLM_WARNINGS"]

# What vLLM 0.32's imports and start-up trip under filterwarnings = error (torch 2.13 deprecations inside torch and
# vLLM, not ropekit's): ignored here and nowhere else.
VLLM_WARNINGS: tuple[tuple[str, type[Warning]], ...] = (
    (r"`torch\.jit\.script_method` is deprecated", DeprecationWarning),
    (r"`torch\.distributed\.reduce_op` is deprecated", FutureWarning),
)
VLLM_MARKS = [pytest.mark.filterwarnings(f"ignore:{message}:{category.__name__}") for message, category in VLLM_WARNINGS]
"""Each check module's ``pytestmark``."""
