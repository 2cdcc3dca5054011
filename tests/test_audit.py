"""``ropekit audit``: is the table a forward served the one the config declares? If not, which is it?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.audit import audit, estimate_from_cos_sin, read_served
from ropekit.cli import main

SEED_CONFIG = Path(__file__).parent.parent / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"
PHI3: dict[str, Any] = {
    "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 100 for i in range(32)],
                     "long_factor": [1.0 + i for i in range(32)]},
}


def test_seed_plain_rope_served_for_llama3() -> None:
    model = ropekit.load(SEED_CONFIG)
    report = audit(model, ropekit.plain_inv_freq(500000.0, 64).astype(np.float32), positions=[128, 1024, 2048])
    assert report["matches_declared"] is False
    assert report["matched"]["rope_type"] == "default"
    assert report["matched"]["params"] == {"rope_theta": 500000.0}
    assert (report["differing_pairs"], report["pairs"]) == (17, 32)
    assert report["max_ratio"] == pytest.approx(32.0, rel=1e-6)
    assert round(report["positions"]["2048"]["max_angle_error"], 3) == 2.017
    assert report["positions"]["2048"]["pairs_over_0.1rad"] == 10


def test_declared_table_matches_even_as_float32() -> None:
    model = ropekit.load(SEED_CONFIG)
    assert audit(model, model.table.inv_freq.astype(np.float32))["matches_declared"] is True


def test_longrope_long_table_served_at_load_time() -> None:
    model = ropekit.load(PHI3)
    report = audit(model, model.table.at(5000).inv_freq)
    assert report["matches_declared"] is False
    assert report["matched"]["params"] == {"seq_len": 4097}


def test_wrong_theta_is_found_by_fitting() -> None:
    model = ropekit.load({"head_dim": 128, "rope_theta": 1000000.0})
    report = audit(model, ropekit.plain_inv_freq(10000.0, 128))
    assert report["matched"]["params"]["rope_theta"] == pytest.approx(10000.0, rel=1e-9)
    assert "fitted rope_theta" in report["matched"]["description"]


def test_another_layer_types_table() -> None:
    config = {"head_dim": 64, "global_head_dim": 128,
              "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                     "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    model = ropekit.load(config)
    report = audit(model, model["sliding_attention"].inv_freq, layer_type="full_attention")
    assert report["length_mismatch"] == "served 32 pairs, declared 64"
    assert report["matched"]["params"] == {"layer_type": "sliding_attention"}


@pytest.mark.parametrize("layout", ["neox", "gptj"])
def test_cos_sin_caches_are_audited_through_the_recovered_table(layout: Any) -> None:
    model = ropekit.load(SEED_CONFIG)
    plain = ropekit.load({"head_dim": 64, "rope_theta": 500000.0}).table
    cos, sin = plain.cos_sin(4096, layout=layout)
    inv_freq, factor = estimate_from_cos_sin(cos.astype(np.float64), sin.astype(np.float64), layout)
    np.testing.assert_allclose(inv_freq, plain.inv_freq, rtol=1e-5)
    assert factor == pytest.approx(1.0, rel=1e-6)
    report = audit(model, cos.astype(np.float64), sin=sin.astype(np.float64), layout=layout)
    assert report["matches_declared"] is False
    assert report["matched"]["rope_type"] == "default"
    good_cos, good_sin = model.table.cos_sin(4096, layout=layout)
    assert audit(model, good_cos.astype(np.float64), sin=good_sin.astype(np.float64), layout=layout)[
        "matches_declared"]


def test_cos_only() -> None:
    model = ropekit.load(SEED_CONFIG)
    good, _ = model.table.cos_sin(2048)
    assert audit(model, good.astype(np.float64))["matches_declared"] is True
    bad, _ = ropekit.load({"head_dim": 64, "rope_theta": 500000.0}).table.cos_sin(2048)
    report = audit(model, bad.astype(np.float64))
    assert report["matches_declared"] is False
    assert report["matched"]["rope_type"] == "default"


def test_read_served_formats(tmp_path: Path) -> None:
    values = ropekit.plain_inv_freq(10000.0, 16)
    values.astype("<f4").tofile(tmp_path / "t.f32")
    values.astype("<f8").tofile(tmp_path / "t.bin")
    np.save(tmp_path / "t.npy", values)
    np.testing.assert_allclose(read_served(tmp_path / "t.f32"), values, rtol=1e-7)
    np.testing.assert_array_equal(read_served(tmp_path / "t.bin", dtype="float64"), values)
    np.testing.assert_array_equal(read_served(tmp_path / "t.npy"), values)
    with pytest.raises(ropekit.ArgumentError, match="give its dtype"):
        read_served(tmp_path / "t.bin")
    with pytest.raises(ropekit.ArgumentError, match="no such file"):
        read_served(tmp_path / "missing.npy")


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ropekit.plain_inv_freq(500000.0, 64).astype("<f4").tofile(tmp_path / "served.f32")
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "served.f32"), "--positions", "2048"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "it matches: default: plain RoPE, rope_theta 500000" in out
    assert "17 of 32 pairs differ from the declared table, by up to 32x" in out
    np.save(tmp_path / "good.npy", ropekit.load(SEED_CONFIG).table.inv_freq)
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "good.npy"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["matches_declared"] is True
    (tmp_path / "weird.bin").write_bytes(b"\0" * 16)
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "weird.bin")]) == 2
    assert "--served" in capsys.readouterr().err
