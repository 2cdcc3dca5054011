"""The plugin's own tests: ropekit's conformance suite, plus values from the closed form."""

from __future__ import annotations

import pytest

import ropekit
from ropekit.testing import conformance_suite

test_conformance = conformance_suite("ntk_alpha")

HUNYUAN_LIKE = {
    "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128, "max_position_embeddings": 262144,
    "rope_theta": 10000.0, "rope_scaling": {"rope_type": "ntk_alpha", "alpha": 1000.0},
}


def test_served_with_its_distribution() -> None:
    status = {s.rope_type: s for s in ropekit.default_registry().status()}["ntk_alpha"]
    assert status.distribution == "ropekit-ntk-alpha"


def test_matches_the_closed_form() -> None:
    table = ropekit.load(HUNYUAN_LIKE).table
    base = 10000.0 * 1000.0 ** (128 / 126)
    expected = [base ** (-2 * i / 128) for i in range(64)]
    assert table.rope_type == "ntk_alpha"
    assert table.inv_freq.tolist() == pytest.approx(expected, rel=1e-13)
    # the lowest frequency is slowed by about alpha, the highest is untouched
    assert table.inv_freq[0] == 1.0
    assert 10000.0 ** (-126 / 128) / table.inv_freq[-1] == pytest.approx(1000.0, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.5, -1.0, "1000", True, float("nan")])
def test_bad_alpha_names_the_key(alpha: object) -> None:
    config = {**HUNYUAN_LIKE, "rope_scaling": {"rope_type": "ntk_alpha", "alpha": alpha}}
    with pytest.raises(ropekit.RopeConfigError) as caught:
        ropekit.load(config)
    assert caught.value.path == "rope_scaling.alpha"
