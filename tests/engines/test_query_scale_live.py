"""``RopeTable.query_scale`` against the function Ministral-3's and Mistral-4's own attention calls."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'ropekit[torch]'")
pytest.importorskip("transformers", reason="transformers is not installed: pip install 'ropekit[reference]'")

import ropekit  # noqa: E402


@pytest.mark.parametrize("model_type", ["ministral3", "mistral4"])
def test_query_scale_is_what_the_class_multiplies_queries_by(model_type: str) -> None:
    import importlib

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    config = {"model_type": model_type, "hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
              "num_hidden_layers": 2, "qk_rope_head_dim": 64, "qk_nope_head_dim": 64, "v_head_dim": 128,
              "kv_lora_rank": 64, "q_lora_rank": 64}
    table = ropekit.load(config).table
    scaling = table.query_scaling
    assert scaling is not None
    positions = np.array([0, 1, 8191, 8192, 16384, 100_000, 1_000_000])
    want = module.get_llama_4_attn_scale(torch.as_tensor(positions, dtype=torch.float64)[None], scaling["beta"],
                                         int(scaling["original_max_position_embeddings"]))
    np.testing.assert_allclose(table.query_scale(positions), want.reshape(-1).numpy(), rtol=1e-12)
