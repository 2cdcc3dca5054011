"""``ropekit audit``: is the table a forward served the one the config declares? If not, which is it?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest

import ropekit
from ropekit.artifacts.audit import audit_artifact, estimate_from_cos_sin
from ropekit.artifacts.formats.arrays.dump import read_served
from ropekit.artifacts.read import read_artifact
from ropekit.artifacts.served import ServedArtifact, ServedTable
from ropekit.cli import main
from ropekit.tables.rotary import cos_sin

from ..support import SEED_CONFIG

PHI3: dict[str, Any] = {
    "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 100 for i in range(32)],
                     "long_factor": [1.0 + i for i in range(32)]},
}


def _array(values: Any, *, sin: Any = None, dtype: str = "float64", layout: str = "neox") -> ServedArtifact:
    kind: Literal["inv_freq", "cache"] = "inv_freq" if np.asarray(values).ndim == 1 else "cache"
    table = ServedTable("test", kind, np.asarray(values, dtype=np.float64), dtype,
                        sin=None if sin is None else np.asarray(sin, dtype=np.float64), layout=layout,
                        angles="exact" if kind == "inv_freq" else "float32")
    return ServedArtifact("test", "array", (table,))


def _layer(report: dict[str, Any], name: str = "full_attention") -> dict[str, Any]:
    layer: dict[str, Any] = report["layers"][name]
    return layer


def test_seed_plain_rope_served_for_llama3() -> None:
    model = ropekit.load(SEED_CONFIG)
    served = _array(ropekit.plain_inv_freq(500000.0, 64).astype(np.float32), dtype="float32")
    report = audit_artifact(model, served, positions=[128, 1024, 2048]).to_json()
    assert report["verdict"] == "mismatch"
    table = _layer(report)["tables"][0]
    assert _layer(report)["served_as"] == "plain RoPE, rope_theta 500000 (the llama3 scaling dropped)"
    assert (table["differing_pairs"], table["pairs"]) == (17, 32)
    assert table["max_ratio"] == pytest.approx(32.0, rel=1e-6)
    assert round(table["positions"]["128"]["max_angle_error"], 3) == 0.126
    assert round(table["positions"]["2048"]["max_angle_error"], 3) == 2.017
    assert table["positions"]["2048"]["pairs_over_0.1rad"] == 10


def test_declared_table_matches_even_as_float32() -> None:
    model = ropekit.load(SEED_CONFIG)
    served = _array(model.table.inv_freq.astype(np.float32), dtype="float32")
    assert audit_artifact(model, served).to_json()["verdict"] == "match"


def test_longrope_long_table_served_at_load_time() -> None:
    model = ropekit.load(PHI3)
    report = audit_artifact(model, _array(model.table.at(5000).inv_freq)).to_json()
    assert report["verdict"] == "mismatch"
    assert _layer(report)["served_as"].startswith("longrope at seq_len 4097")


def test_wrong_theta_is_found_by_fitting() -> None:
    model = ropekit.load({"head_dim": 128, "rope_theta": 1000000.0})
    report = audit_artifact(model, _array(ropekit.plain_inv_freq(10000.0, 128))).to_json()
    assert _layer(report)["served_as"] == "plain RoPE, fitted rope_theta 10000"


def test_another_layer_types_table() -> None:
    config = {"head_dim": 128, "layer_types": ["sliding_attention", "full_attention"],
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    model = ropekit.load(config)
    report = audit_artifact(model, _array(model.rotating_table("sliding_attention").inv_freq)).to_json()
    assert _layer(report, "sliding_attention")["verdict"] == "match"
    assert _layer(report, "full_attention")["served_as"] == "the sliding_attention table (default)"
    with pytest.raises(ropekit.ArgumentError, match="layer_type"):
        audit_artifact(model, _array(model.table.inv_freq), layer_type="chunked").to_json()


@pytest.mark.parametrize("layout", ["neox", "gptj"])
def test_cos_sin_caches_are_audited(layout: Any) -> None:
    model = ropekit.load(SEED_CONFIG)
    plain = ropekit.load({"head_dim": 64, "rope_theta": 500000.0}).table
    cos, sin = plain.cos_sin(4096, layout=layout)
    inv_freq, factor = estimate_from_cos_sin(cos.astype(np.float64), sin.astype(np.float64), layout)
    np.testing.assert_allclose(inv_freq, plain.inv_freq, rtol=1e-5)
    assert factor == pytest.approx(1.0, rel=1e-6)
    report = audit_artifact(model, _array(cos, sin=sin, dtype="float32", layout=layout)).to_json()
    assert _layer(report)["served_as"].startswith("plain RoPE, rope_theta 500000")
    good_cos, good_sin = model.table.cos_sin(4096, layout=layout)
    assert audit_artifact(model, _array(good_cos, sin=good_sin, dtype="float32", layout=layout)).to_json()["verdict"] == "match"


def test_float16_caches_match_and_a_one_pair_error_does_not() -> None:
    model = ropekit.load(SEED_CONFIG)
    cos, sin = model.table.cos_sin(8192, dtype=np.float16, layout="neox")
    assert audit_artifact(model, _array(cos, sin=sin, dtype="float16")).to_json()["verdict"] == "match"
    wrong = model.table.inv_freq.copy()
    wrong[10] *= 1.001  # one pair 0.1% off: 0.14 rad by the last position, far above float16 rounding
    bad_cos, bad_sin = cos_sin(wrong, 1.0, 8192, dtype=np.float16)
    report = audit_artifact(model, _array(bad_cos, sin=bad_sin, dtype="float16")).to_json()
    assert report["verdict"] == "mismatch"


def test_cos_only() -> None:
    model = ropekit.load(SEED_CONFIG)
    good, _ = model.table.cos_sin(2048)
    assert audit_artifact(model, _array(good, dtype="float32")).to_json()["verdict"] == "match"
    bad, _ = ropekit.load({"head_dim": 64, "rope_theta": 500000.0}).table.cos_sin(2048)
    report = audit_artifact(model, _array(bad, dtype="float32")).to_json()
    assert _layer(report)["served_as"].startswith("plain RoPE, rope_theta 500000")


def test_nan_in_a_served_table_is_an_honest_mismatch() -> None:
    model = ropekit.load(SEED_CONFIG)
    values = model.table.inv_freq.copy()
    values[3] = np.nan
    report = audit_artifact(model, _array(values)).to_json()
    assert report["verdict"] == "mismatch"
    json.dumps(report, allow_nan=False)  # one valid JSON document


def test_read_served_formats(tmp_path: Path) -> None:
    values = ropekit.plain_inv_freq(10000.0, 16)
    values.astype("<f4").tofile(tmp_path / "t.f32")
    values.astype("<f8").tofile(tmp_path / "t.raw")
    np.save(tmp_path / "t.npy", values)
    np.testing.assert_allclose(read_served(tmp_path / "t.f32"), values, rtol=1e-7)
    np.testing.assert_array_equal(read_served(tmp_path / "t.raw", dtype="float64"), values)
    np.testing.assert_array_equal(read_served(tmp_path / "t.npy"), values)
    with pytest.raises(ropekit.ArgumentError, match="give its dtype"):
        read_served(tmp_path / "t.raw")
    with pytest.raises(ropekit.ArgumentError, match="no such file"):
        read_served(tmp_path / "missing.npy")


@pytest.mark.parametrize(("name", "content", "words"), [
    ("empty.f64", b"", "empty file"),
    ("odd.f64", b"\0" * 17, "not a whole number"),
    ("empty.npy", b"", "empty file"),
    ("header.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"
     + b" " * 41 + b"\n", "cannot read"),
    ("pickle.bin", b"\x80\x04K\x01.", "never unpickled"),
])
def test_hostile_served_files_are_refused(tmp_path: Path, name: str, content: bytes, words: str) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ropekit.ArgumentError, match=words):
        read_artifact(tmp_path / name)


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ropekit.plain_inv_freq(500000.0, 64).astype("<f4").tofile(tmp_path / "served.f32")
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "served.f32"), "--positions", "2048"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "it matches: plain RoPE, rope_theta 500000" in out
    assert "17 of 32 pairs differ from the declared table, by up to 32x" in out
    np.save(tmp_path / "good.npy", ropekit.load(SEED_CONFIG).table.inv_freq)
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "good.npy"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "match"
    (tmp_path / "weird.raw").write_bytes(b"\0" * 16)
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "weird.raw")]) == 2
    assert "--served" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "good.npy"), "--rtol", "nan"])
    assert stopped.value.code == 2


def test_a_fifo_as_served_is_refused_without_opening_it(tmp_path: Path) -> None:
    import os

    if not hasattr(os, "mkfifo"):
        pytest.skip("needs a POSIX FIFO")
    os.mkfifo(tmp_path / "served.npy")
    with pytest.raises(ropekit.ArgumentError, match="not a regular file"):
        read_artifact(tmp_path / "served.npy")


def test_llama3_with_an_exporters_own_factor_is_named() -> None:
    """ExecuTorch's Llama export takes the llama3 factor from its model class (8 for 3.1, 32 for
    3.2), not from the checkpoint: a Llama-3.2 model exported as 3.1 serves factor 8."""
    model = ropekit.load(SEED_CONFIG)  # Llama-3.2-1B: factor 32
    served = model.table.with_params(factor=8.0)
    _, sin = cos_sin(served.inv_freq, 1.0, 4096, dtype=np.float32, layout="half")
    cos, _ = cos_sin(served.inv_freq, 1.0, 4096, dtype=np.float32, layout="half")
    report = audit_artifact(model, _array(cos, sin=sin, dtype="float32", layout="half")).to_json()
    assert report["verdict"] == "mismatch"
    assert _layer(report)["served_as"].startswith("llama3 with factor 8 (declared 32.0)")


def test_a_table_over_the_whole_head_where_the_model_rotates_part_is_named() -> None:
    partial = {"hidden_size": 1024, "num_attention_heads": 16, "partial_rotary_factor": 0.5, "rope_theta": 10000.0}
    model = ropekit.load(partial)  # head 64, rotary 32: 16 pairs
    whole = ropekit.plain_inv_freq(10000.0, 64)  # 32 pairs: the factor ignored
    report = audit_artifact(model, _array(whole)).to_json()
    assert report["verdict"] == "mismatch"
    assert _layer(report)["served_as"].startswith("plain RoPE over rotary_dim 64 (declared 32")


def test_a_dump_in_the_other_pairing_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = ropekit.load(SEED_CONFIG)  # pairs rotate-half (neox)
    cos, sin = model.table.cos_sin(2048, layout="gptj")  # a correct table, dumped interleaved
    np.save(tmp_path / "cos.npy", cos)
    np.save(tmp_path / "sin.npy", sin)
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "cos.npy"), "--sin",
                 str(tmp_path / "sin.npy"), "--json"]) == 1
    layer = json.loads(capsys.readouterr().out)["layers"]["full_attention"]
    assert layer["served_as"] == (
        "the declared table, its channels paired interleaved (gptj), not rotate-half (neox) as read (the model "
        "pairs them rotate-half (neox)): audit it with --layout gptj if the dump is laid out so; a forward that "
        "applies it as neox pairs channels the other way")
    assert main(["audit", str(SEED_CONFIG), "--served", str(tmp_path / "cos.npy"), "--sin",
                 str(tmp_path / "sin.npy"), "--layout", "gptj", "--json"]) == 0


def test_executorch_buffers_read_with_the_default_layout_name_the_layout_and_the_variant(tmp_path: Path) -> None:
    """ExecuTorch's freqs_cos/freqs_sin are [positions, pairs]; read as rotate-half they have half
    the pairs. The variant is named as it reads with --layout half."""
    model = ropekit.load(SEED_CONFIG)
    served = model.table.with_params(factor=8.0)  # exported as Llama-3.1
    cos, sin = cos_sin(served.inv_freq, 1.0, 2048, dtype=np.float32, layout="half")
    np.save(tmp_path / "freqs_cos.npy", cos)
    np.save(tmp_path / "freqs_sin.npy", sin)
    as_neox = read_artifact(tmp_path / "freqs_cos.npy", sin=tmp_path / "freqs_sin.npy")
    report = audit_artifact(model, as_neox).to_json()
    assert _layer(report)["served_as"].startswith(
        "llama3 with factor 8 (declared 32.0): the engine's own llama3 factor, not the checkpoint's, its columns "
        "laid out one column per pair (half), not rotate-half (neox) as read (ExecuTorch's freqs_cos/freqs_sin are "
        "one column per pair): audit it with --layout half")
    as_half = read_artifact(tmp_path / "freqs_cos.npy", sin=tmp_path / "freqs_sin.npy", layout="half")
    assert _layer(audit_artifact(model, as_half).to_json())["served_as"].startswith("llama3 with factor 8 (declared 32.0)")


@pytest.mark.parametrize(("changes", "named"), [
    ({"factor": 12.0}, "llama3 with factor 12 (declared 32.0), fitted to the served table"),
    ({"factor": 12.0, "low_freq_factor": 2.0, "high_freq_factor": 6.0},  # not (1, 4) at another original
     "llama3 with factor 12 (declared 32.0), low_freq_factor 2 (declared 1.0), high_freq_factor 6 (declared 4.0), "
     "fitted to the served table"),
    ({"factor": 8.0, "original_max_position_embeddings": 16384},
     "llama3 with factor 8 (declared 32.0), original_max_position_embeddings 16384 (declared 8192), fitted"),
])
def test_llama3_parameters_are_fitted_when_no_release_has_them(changes: dict[str, float], named: str) -> None:
    model = ropekit.load(SEED_CONFIG)
    served = model.table.with_params(**changes)
    cos, sin = cos_sin(served.inv_freq, 1.0, 4096, dtype=np.float32, layout="half")
    report = audit_artifact(model, _array(cos, sin=sin, dtype="float32", layout="half")).to_json()
    assert _layer(report)["served_as"].startswith(named)


def test_a_scaled_table_over_another_width_keeps_its_scaling_in_the_name() -> None:
    partial = {"hidden_size": 1024, "num_attention_heads": 16, "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
               "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    model = ropekit.load(partial)  # 16 pairs of linear / 4
    whole = ropekit.plain_inv_freq(10000.0, 64) / 4.0  # linear over the whole head: 32 pairs
    report = audit_artifact(model, _array(whole)).to_json()
    assert _layer(report)["served_as"] == ("linear over rotary_dim 64 (declared 32: the partial_rotary_factor 0.5 "
                                           "not applied as declared)")
