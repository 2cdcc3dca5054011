"""The seed defect: Llama-3.2-1B served plain RoPE although it declares rope_type llama3.

Fixed data from the defect report: d=64, theta 500000, factor 32, high 4, low 1, orig 8192.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ropekit
from ropekit.tables.gap import gap_report

from ..support import SEED_CONFIG


@pytest.fixture(scope="module")
def llama3() -> ropekit.RopeTable:
    return ropekit.load(SEED_CONFIG).table


def plain(theta: float = 500000.0, dim: int = 64) -> np.ndarray:
    return np.array([theta ** (-2 * i / dim) for i in range(dim // 2)])


def test_llama3_is_not_plain(llama3: ropekit.RopeTable) -> None:
    differs = ~np.isclose(llama3.inv_freq, plain(), rtol=1e-12, atol=0)
    assert differs.sum() == 17
    assert not np.isclose(llama3.inv_freq, plain(), rtol=1e-6).all()


def test_ratios_are_integers_up_to_32_outside_the_band(llama3: ropekit.RopeTable) -> None:
    ratio = plain() / llama3.inv_freq
    wavelength = 2 * math.pi / plain()
    outside = (wavelength < 8192 / 4) | (wavelength > 8192 / 1)
    np.testing.assert_allclose(ratio[outside], np.round(ratio[outside]), rtol=1e-12)
    assert set(np.round(ratio[outside]).astype(int)) == {1, 32}
    assert ratio.max() == pytest.approx(32.0, rel=1e-12)


def test_three_in_band_entries_are_interpolated_not_switched(llama3: ropekit.RopeTable) -> None:
    ratio = plain() / llama3.inv_freq
    wavelength = 2 * math.pi / plain()
    band = (wavelength >= 8192 / 4) & (wavelength <= 8192 / 1)
    assert band.sum() == 3
    assert np.all((ratio[band] > 1.5) & (ratio[band] < 31.5))
    # the smooth rule: 1 / ratio = (1 - s) / 32 + s, s = (8192 / wavelength - 1) / 3
    smooth = (8192 / wavelength[band] - 1) / 3
    np.testing.assert_allclose(1 / ratio[band], (1 - smooth) / 32 + smooth, rtol=1e-13)


def test_gap_reproduces_the_seed_table() -> None:
    layer = gap_report(ropekit.load(SEED_CONFIG), [128, 1024, 2048])["layers"]["full_attention"]
    assert (layer["pairs"], layer["scaled_pairs"]) == (32, 17)
    assert layer["max_ratio"] == pytest.approx(32.0)
    errors = {p: round(row["max_angle_error"], 3) for p, row in layer["positions"].items()}
    assert errors == {"128": 0.126, "1024": 1.008, "2048": 2.017}
    assert layer["positions"]["2048"]["pairs_over_0.1rad"] == 10
