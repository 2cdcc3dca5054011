"""``*.inv_freq`` tensors in a safetensors checkpoint, read with safetensors' numpy API (no torch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="safetensors is not installed: "
                                        "pip install 'ropekit[safetensors]'")

import ropekit  # noqa: E402
from ropekit.artifacts.audit import audit_artifact  # noqa: E402
from ropekit.artifacts.formats.safetensors.state_dict import read_safetensors  # noqa: E402

LLAMA3 = {"hidden_size": 2048, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}}


def test_reads_inv_freq_tensors_and_audits_them(tmp_path: Path) -> None:
    model = ropekit.load(LLAMA3)
    declared = model.table.inv_freq
    plain = ropekit.plain_inv_freq(500000.0, 64)
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file({
        "model.layers.0.self_attn.rotary_emb.inv_freq": declared.astype(np.float32),
        "model.layers.1.self_attn.rotary_emb.inv_freq": plain.astype(np.float32),
        "model.rotary_emb.original_inv_freq": plain.astype(np.float32),  # a copy transformers keeps: skipped
        "model.embed_tokens.weight": np.zeros((4, 4), dtype=np.float32),
    }, os.fspath(path))
    artifact = read_safetensors(path)
    assert artifact.kind == "safetensors"
    assert [t.where.rsplit(":", 1)[1] for t in artifact.tables] == [
        "model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.1.self_attn.rotary_emb.inv_freq"]
    assert artifact.tables[0].dtype == "float32" and artifact.tables[0].values.dtype == np.float64
    np.testing.assert_allclose(artifact.tables[0].values, declared, rtol=1e-7)
    report = audit_artifact(model, artifact).to_json()
    verdicts = [t["verdict"] for t in report["layers"]["full_attention"]["tables"]]
    assert verdicts == ["match", "mismatch"]
    assert report["layers"]["full_attention"]["served_as"].startswith("plain RoPE, rope_theta 500000 (the llama3")


def test_layer_type_from_the_tensor_name(tmp_path: Path) -> None:
    gemma = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
             "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
             "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                 "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}
    model = ropekit.load(gemma)
    path = tmp_path / "gemma.safetensors"
    safetensors_numpy.save_file({
        "model.rotary_emb.sliding_attention_inv_freq": model.rotating_table("sliding_attention").inv_freq,
        "model.rotary_emb.full_attention_inv_freq": model.rotating_table("sliding_attention").inv_freq,  # the wrong table
    }, os.fspath(path))
    artifact = read_safetensors(path)
    assert {t.layer_type for t in artifact.tables} == {"sliding_attention", "full_attention"}
    assert artifact.tables[0].dtype == "float64"
    report = audit_artifact(model, artifact).to_json()
    assert report["layers"]["sliding_attention"]["verdict"] == "match"
    assert report["layers"]["full_attention"]["served_as"] == "the sliding_attention table (default)"


def test_bfloat16_is_widened_without_torch(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes writes the bfloat16 fixture")
    values = np.array([1.0, 0.5, 0.015625, 3.0e-5])
    path = tmp_path / "bf16.safetensors"
    # safetensors' numpy API cannot write bfloat16 either: write the format by hand (u64 header size, JSON, data)
    data = values.astype(ml_dtypes.bfloat16).tobytes()
    header = b'{"rotary_emb.inv_freq":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}'
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    (table,) = read_safetensors(path).tables
    assert table.dtype == "bfloat16"
    np.testing.assert_allclose(table.values, values, rtol=4e-3)


def test_files_without_a_table_and_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "weights.safetensors"
    safetensors_numpy.save_file({"lm_head.weight": np.ones((2, 2), dtype=np.float32)}, os.fspath(path))
    artifact = read_safetensors(path)
    assert artifact.tables == ()
    assert audit_artifact(ropekit.load(LLAMA3), artifact).to_json()["verdict"] == "no_table"
    bad = tmp_path / "bad.safetensors"
    safetensors_numpy.save_file({"x.inv_freq": np.ones((2, 2), dtype=np.float32)}, os.fspath(bad))
    with pytest.raises(ropekit.ArgumentError, match="an inv_freq is 1-D"):
        read_safetensors(bad)
    ints = tmp_path / "ints.safetensors"
    safetensors_numpy.save_file({"x.inv_freq": np.ones(4, dtype=np.int64)}, os.fspath(ints))
    with pytest.raises(ropekit.ArgumentError, match="a float tensor"):
        read_safetensors(ints)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ropekit.ArgumentError, match="cannot read as safetensors"):
        read_safetensors(junk)
    with pytest.raises(ropekit.ArgumentError, match="no such file"):
        read_safetensors(tmp_path / "missing.safetensors")
    with pytest.raises(ropekit.ArgumentError, match="not a regular file"):
        read_safetensors(tmp_path)


def _by_hand(path: Path, header: dict[str, object] | bytes, data: bytes = b"") -> Path:
    """A safetensors file written by hand: u64 header size, the JSON header, the data buffer."""
    import json

    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


@pytest.mark.parametrize(("header", "data", "words"), [
    (b"{}", None, "header too large"),  # a header size of 2**63
    ({"a.inv_freq": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 8]}}, b"\0" * 8, "invalid shape"),
    ({"a.inv_freq": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 2**62]}}, b"\0" * 8, "invalid shape"),
    ({"a.inv_freq": {"dtype": "F32", "shape": [2**62, 8], "data_offsets": [0, 0]}}, b"", "overflow"),
    (b'{"a":' * 200 + b"1" + b"}" * 200, b"", "recursion limit"),
])
def test_a_safetensors_file_that_lies_about_a_size_is_refused_in_one_line(tmp_path: Path, header: Any, data: Any,
                                                                          words: str) -> None:
    """safetensors' own checks (header at most 100 MB and inside the file, each tensor's shape times its dtype
    equal to its data_offsets, the offsets inside the buffer, JSON nested at most 128 deep) are what bound the
    header: ropekit names the file and passes the reason on."""
    path = tmp_path / "lie.safetensors"
    if data is None:
        path.write_bytes((2**63).to_bytes(8, "little") + header)
    else:
        _by_hand(path, header, data)
    with pytest.raises(ropekit.ArgumentError) as caught:
        read_safetensors(path)
    assert "\n" not in str(caught.value) and f"{path}: cannot read as safetensors" in str(caught.value)
    assert words in str(caught.value)


def test_a_file_of_more_inv_freq_tensors_than_a_model_has_is_refused(tmp_path: Path) -> None:
    """Each inv_freq is a table kept: 5,000 one-entry tensors (80 KB of header) would be 5,000 tables (200,000 were
    17x the file in memory, and each bfloat16 one parsed the whole header again)."""
    def inv_freqs(count: int) -> dict[str, object]:
        return {f"model.layers.{i}.rotary_emb.inv_freq": {"dtype": "BF16", "shape": [1],
                                                          "data_offsets": [2 * i, 2 * i + 2]} for i in range(count)}

    path = _by_hand(tmp_path / "many.safetensors", inv_freqs(5000), b"\x80\x3f" * 5000)
    with pytest.raises(ropekit.ArgumentError, match="more than 4096 inv_freq tensors"):
        read_safetensors(path)
    (table, *rest) = read_safetensors(_by_hand(tmp_path / "kept.safetensors", inv_freqs(4096),
                                               b"\x80\x3f" * 4096)).tables
    assert len(rest) == 4095 and table.values.tolist() == [1.0]
