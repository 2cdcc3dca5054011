"""ropekit.mlx's cos/sin arrays for multimodal tables: the numpy values (float64 angles, one
rounding) at 3-axis positions, in MLX."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason="mlx is not installed: pip install 'ropekit[mlx]'")

import ropekit  # noqa: E402
import ropekit.mlx as rm  # noqa: E402

QWEN3_VL = {"model_type": "qwen3_vl_text", "hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20],
                                "mrope_interleaved": True}}


def test_three_axis_cos_sin_as_mlx_arrays() -> None:
    table = ropekit.load(QWEN3_VL).table
    positions = np.random.default_rng(0).integers(0, 50_000, size=(3, 2, 6))
    cos, sin = rm.cos_sin(table, mx.array(positions))
    want_cos, want_sin = table.cos_sin(positions)
    assert cos.shape == (2, 6, 128) and cos.dtype == mx.float32
    assert np.array_equal(np.array(cos), want_cos) and np.array_equal(np.array(sin), want_sin)
    half, _ = rm.cos_sin(table, positions, dtype=mx.float16)
    assert half.dtype == mx.float16
    assert np.array_equal(np.array(half), table.cos_sin(positions, dtype=np.float16)[0])


def test_text_positions_and_bad_dtypes() -> None:
    table = ropekit.load(QWEN3_VL).table
    cos, _ = rm.cos_sin(table, 16)
    assert cos.shape == (16, 128)
    with pytest.raises(ropekit.ArgumentError, match="dtype"):
        rm.cos_sin(table, 16, dtype=mx.int32)
