"""Ministral-3 and Mistral-4 scale queries by position after rotating them
(``llama_4_scaling_beta``): the table carries that rule as data (``query_scaling``,
:meth:`RopeTable.query_scale`), its JSON and exports state it, and the C reader applies it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.tools.export import export
from tests.support import SEED_CONFIG

MINISTRAL3: dict[str, Any] = {"model_type": "ministral3", "hidden_size": 1024, "num_attention_heads": 8,
                              "head_dim": 128, "num_hidden_layers": 2}  # the class's default yarn block


def test_the_class_default_block_brings_its_query_scaling() -> None:
    table = ropekit.load(MINISTRAL3).table
    assert table.rope_type == "yarn"
    assert dict(table.query_scaling or {}) == {"beta": 0.1, "original_max_position_embeddings": 16384.0}
    positions = [0, 16383, 16384, 3 * 16384 + 5, 262143]
    want = [1 + 0.1 * math.log(1 + math.floor(p / 16384)) for p in positions]
    np.testing.assert_allclose(table.query_scale(positions), want, rtol=1e-15)
    assert table.to_json(inv_freq=False)["query_scaling"]["beta"] == 0.1


def test_a_model_without_query_scaling_scales_by_one() -> None:
    table = ropekit.load(SEED_CONFIG).table
    assert table.query_scaling is None and "query_scaling" not in table.to_json()
    assert np.array_equal(table.query_scale(4), np.ones(4))
    with pytest.raises(ropekit.ArgumentTypeError, match="positions"):
        table.query_scale([0.5])


def test_the_export_and_the_c_reader_carry_it(tmp_path: Any) -> None:
    from tests.tools.test_export import _compiled_reader

    binary = _compiled_reader(tmp_path)
    manifest = export(ropekit.load(MINISTRAL3), tmp_path / "export")
    assert manifest["layers"]["full_attention"]["query_scaling"]["original_max_position_embeddings"] == 16384
    import subprocess

    done = subprocess.run([str(binary), str(tmp_path / "export"), "40000"], capture_output=True, text=True,
                          check=True)
    line = next(row for row in done.stdout.splitlines() if " query_scale " in row)
    assert float(line.split()[-1]) == pytest.approx(1 + 0.1 * math.log(1 + 2), rel=1e-15)
