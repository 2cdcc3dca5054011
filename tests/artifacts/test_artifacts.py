"""``ropekit audit`` on artifacts the real producers made: onnxruntime-genai packs, llama.cpp GGUFs.

The artifacts under ``tests/data/artifacts`` were made offline by the producer scripts in ``scripts/artifacts/``
(its ``producers`` extra); these tests need only the readers (``onnx``, ``gguf``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ropekit
from ropekit.artifacts.audit import audit_artifact
from ropekit.artifacts.read import read_artifact, read_for_audit

from ..support import ARTIFACTS, SEED_CONFIG, flat_artifacts

onnx = pytest.importorskip("onnx", reason="the onnx reader extra (ropekit[onnx]) is not installed")
gguf = pytest.importorskip("gguf", reason="the gguf reader extra (ropekit[gguf]) is not installed")

# artifact: (verdict, words the served_as line must hold; empty for a match)
EXPECTED: dict[str, tuple[str, str]] = {
    "onnx_llama3_fp32": ("match", ""),
    "onnx_llama3_fp16_cuda": ("match", ""),
    "onnx_llama_default": ("match", ""),
    "onnx_phi3_longrope": ("match", ""),
    "onnx_phi3_longrope_dml_fp16": ("match", ""),
    "onnx_qwen2_yarn_notruncate": ("match", ""),
    "onnx_llama_linear": ("mismatch", "plain RoPE, rope_theta 10000 (the linear scaling dropped)"),
    "onnx_llama_yarn": ("mismatch", "plain RoPE, rope_theta 10000 (the yarn scaling dropped), attention factor 1 "
                                    "(declared 1.13863)"),
    "onnx_qwen2_yarn": ("mismatch", "yarn without truncation"),
    "onnx_qwen3_yarn": ("mismatch", "yarn without truncation"),
    "onnx_llama_yarn_theta5e5": ("mismatch", "plain RoPE, rope_theta 500000 (the yarn scaling dropped)"),
    "gguf_llama3": ("match", ""),
    "gguf_llama_linear": ("match", ""),
    "gguf_llama_yarn": ("match", ""),
    "gguf_llama_dynamic": ("match", ""),  # plain up to the file's context length, which is what dynamic declares
    "gguf_llama_yarn_betas": ("mismatch", "yarn with betas 32/1"),
    "gguf_phi3_longrope": ("mismatch", "llama.cpp's n_ctx rule"),
    "gguf_qwen2_yarn_keys": ("mismatch", "attention factor 1.13863 (declared 1.2)"),
    "gguf_seed_llama32_no_rope_freqs": ("mismatch", "plain RoPE, rope_theta 500000 (the llama3 scaling dropped)"),
    # per-layer llama.cpp rules (tests/artifacts/test_gguf_rules.py has the per-layer expectations)
    "gguf_gemma3": ("match", ""),
    "gguf_smollm3": ("match", ""),
    "gguf_smollm3_all_rope": ("mismatch", "layer 3 (full_attention) applies no RoPE in llama.cpp"),
    "gguf_llama4_all_rope": ("mismatch", "drops RoPE on the last layer"),
    "gguf_gpt_oss_yarn": ("mismatch", "yarn with truncation"),
    "gguf_stablelm_base": ("mismatch", "plain RoPE at the file's freq_base 10000"),
    "gguf_gptneox_keys": ("mismatch", "plain RoPE at the file's freq_base 10000"),
    # multimodal llama.cpp architectures (tests/artifacts/test_gguf_rules.py has the per-pair position streams)
    "gguf_qwen2vl_sections": ("match", ""),
    "gguf_qwen2vl_qwen25": ("match", ""),
    "gguf_qwen2vl_qwen3vl": ("match", ""),
    "gguf_qwen2vl_qwen3vl_fourth": ("mismatch", "pairs [13, 14] follow llama.cpp's fourth position stream"),
    # the GLM-4 family, with and without dimension sections (tests/artifacts/test_gguf_rules.py)
    "gguf_glm4": ("match", ""),
    "gguf_glm4v_sections": ("match", ""),
    # per-layer wiring of ONNX packs (tests/artifacts/test_onnx_layers.py has the per-layer expectations)
    "onnx_smollm3_nope_dml": ("mismatch", "layer 3 applies no RoPE in the model's code"),
    # rotary kept in the graph, evaluated with onnxruntime (at 64 positions here: past Phi-3's switch at 32)
    "graph_optimum_phi3_longrope": ("mismatch", "longrope at load time (seq_len <= 32)"),
    "graph_optimum_phi3_longrope_256": ("mismatch", "longrope at load time (seq_len <= 256)"),
    "graph_optimum_llama3": ("match", ""),
    "graph_torch_dynamo_phi3_longrope": ("match", ""),
    # ExecuTorch programs read without executorch (tests/artifacts/test_pte.py has the details)
    "pte_llama32_export_llm": ("match", ""),
    "pte_llama32_as_llama31": ("mismatch", "llama3 with factor 8 (declared 32.0): the engine's own llama3 factor"),
    "pte_llama32_xnnpack": ("match", ""),
    "pte_llama32_fp16": ("match", ""),
    "pte_llama32_ptd": ("match", ""),
}
WIRING_ONLY = {"onnx_smollm3_nope_dml"}
"""Packs whose caches are right and whose wiring is wrong: the manifest measures caches only."""


def _served(name: str) -> Path:
    folder = ARTIFACTS / name
    return next((folder / file for file in ("model.gguf", "model.pte") if (folder / file).exists()), folder)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_audit_names_what_each_producer_served(name: str) -> None:
    verdict, words = EXPECTED[name]
    model = ropekit.load(ARTIFACTS / name / "config.json")
    report = audit_artifact(model, read_for_audit(model, _served(name))).to_json()  # as `ropekit audit` and `repair` read it
    assert report["verdict"] == verdict, report
    layer = report["layers"]["full_attention"]
    assert words in layer.get("served_as", ""), layer.get("served_as")


def test_every_committed_artifact_is_covered() -> None:
    assert set(flat_artifacts()) == set(EXPECTED)  # the stacks' cases: test_openvino.py, test_genie.py


def test_manifest_agrees_with_the_audit_about_correctness() -> None:
    """The generator measured each ONNX pack's baked tables against transformers (not against
    ropekit); the audit must reach the same verdict."""
    manifest = json.loads((ARTIFACTS / "MANIFEST.json").read_text())["artifacts"]
    for name, entry in manifest.items():
        if not name.startswith("onnx_"):
            continue  # a GGUF holds no table: the manifest's GGUF numbers are an emulation, not a measurement
        tables = entry["measured"]["tables"].values()
        correct = all(not table["vs_declared"]["pairs_off"]
                      and abs(table["attention_factor_served"] - table["attention_factor_declared"]) < 1e-3
                      for table in tables)
        assert (EXPECTED[name][0] == "match" or name in WIRING_ONLY) == correct, name


def test_longrope_caches_are_read_from_the_if_subgraph() -> None:
    artifact = read_artifact(ARTIFACTS / "onnx_phi3_longrope")
    regimes = {table.regime: table.values.shape for table in artifact.tables}
    assert regimes == {"short": (64, 16), "long": (256, 16)}
    assert all("/model/rope_caches_subgraph/If" in table.where for table in artifact.tables)


def test_longrope_at_a_large_context_names_the_engine_rule() -> None:
    model = ropekit.load(ARTIFACTS / "gguf_phi3_longrope" / "config.json")
    for n_ctx, verdict in ((64, "mismatch"), (256, "mismatch")):
        report = audit_artifact(model, read_artifact(_served("gguf_phi3_longrope"), n_ctx=n_ctx)).to_json()
        assert report["verdict"] == verdict
        assert "long factors at every length" in report["layers"]["full_attention"]["served_as"]


def test_dynamic_past_the_trained_context_is_served_plain() -> None:
    model = ropekit.load(ARTIFACTS / "gguf_llama_dynamic" / "config.json")
    report = audit_artifact(model, read_artifact(_served("gguf_llama_dynamic"), n_ctx=1024)).to_json()
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"].startswith("plain RoPE")


def test_seed_case_in_gguf_form_gives_the_seeds_numbers() -> None:
    report = audit_artifact(ropekit.load(SEED_CONFIG), read_artifact(_served("gguf_seed_llama32_no_rope_freqs")),
                            positions=[128, 1024, 2048]).to_json()
    table = report["layers"]["full_attention"]["tables"][0]
    assert (table["differing_pairs"], table["pairs"], table["max_ratio"]) == (17, 32, 32.0)
    assert round(table["positions"]["128"]["max_angle_error"], 3) == 0.126
    assert round(table["positions"]["2048"]["max_angle_error"], 3) == 2.017


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ropekit", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_cli_verdicts_and_exit_codes() -> None:
    good = _cli("audit", str(ARTIFACTS / "onnx_llama3_fp32"), "--served", str(ARTIFACTS / "onnx_llama3_fp32"), "--json")
    assert good.returncode == 0 and json.loads(good.stdout)["verdict"] == "match"
    bad = _cli("audit", str(ARTIFACTS / "onnx_llama_linear" / "config.json"), "--served",
               str(ARTIFACTS / "onnx_llama_linear" / "model.onnx"), "--json")
    document: dict[str, Any] = json.loads(bad.stdout)
    assert bad.returncode == 1 and document["verdict"] == "mismatch"
    assert "plain RoPE" in document["layers"]["full_attention"]["served_as"]


def test_gguf_alone_is_checked_for_red_flags() -> None:
    seed = _cli("audit", "--served", str(_served("gguf_seed_llama32_no_rope_freqs")), "--json")
    assert seed.returncode == 1 and "without rope_freqs" in json.loads(seed.stdout)["flags"][0]
    fine = _cli("audit", "--served", str(_served("gguf_llama3")))
    assert fine.returncode == 0 and "no red flags" in fine.stdout
    betas = json.loads(_cli("audit", "--served", str(_served("gguf_llama_yarn_betas")), "--json").stdout)
    assert any("ignored by llama.cpp's llama loader" in flag for flag in betas["flags"])
    # a pack that is not a GGUF needs the model's config: the one inside the pack folder, when it has one
    inside = _cli("audit", "--served", str(ARTIFACTS / "onnx_llama3_fp32"))
    assert inside.returncode == 0 and "MATCH" in inside.stdout
    alone = _cli("audit", "--served", str(ARTIFACTS / "onnx_llama3_fp32" / "model.onnx"))
    assert alone.returncode == 2 and "CONFIG" in alone.stderr


def test_a_pack_without_a_table_is_no_table_never_match(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph), tmp_path / "model.onnx")
    result = _cli("audit", str(SEED_CONFIG), "--served", str(tmp_path), "--json")
    document = json.loads(result.stdout)
    assert result.returncode == 1 and document["verdict"] == "no_table"
    assert "Dump the inv_freq" in document["request"]


def test_hostile_artifacts_are_exit_2(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not a protobuf at all \xff")
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    for served in (tmp_path / "model.onnx", tmp_path / "x.gguf"):
        result = _cli("audit", str(SEED_CONFIG), "--served", str(served))
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_every_inv_freq_initializer_is_audited(tmp_path: Path) -> None:
    """A per-layer export carries several inv_freq tensors: a wrong one must not hide behind a right one."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    model = ropekit.load(SEED_CONFIG)
    good = model.table.inv_freq.astype(np.float32)
    plain = ropekit.plain_inv_freq(500000.0, 64).astype(np.float32)
    for order in ((plain, good), (good, plain)):
        initializers = [numpy_helper.from_array(order[0], "model.layers.0.self_attn.rotary_emb.inv_freq"),
                        numpy_helper.from_array(order[1], "model.rotary_emb.inv_freq")]
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=initializers)
        onnx.save(helper.make_model(graph), tmp_path / "model.onnx")
        assert audit_artifact(model, read_artifact(tmp_path / "model.onnx")).to_json()["verdict"] == "mismatch"


def test_malformed_gguf_metadata_is_refused_by_name(tmp_path: Path) -> None:
    import numpy as np

    from ropekit.tools.scan import scan

    cases = {"dimension_count": ("rope.dimension_count", "abc"), "freq_base": ("rope.freq_base", float("nan")),
             "context_length": ("context_length", "x")}
    for name, (key, value) in cases.items():
        writer = gguf.GGUFWriter(str(tmp_path / f"{name}.gguf"), "llama")
        writer.add_uint32("llama.attention.head_count", 2)
        writer.add_uint32("llama.embedding_length", 64)
        if isinstance(value, str):
            writer.add_string(f"llama.{key}", value)
        else:
            writer.add_float32(f"llama.{key}", value)
        writer.add_tensor("output_norm.weight", np.ones(4, dtype=np.float32))
        for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
            write()
        writer.close()
        with pytest.raises(ropekit.ArgumentError, match=f"llama.{key}"):
            read_artifact(tmp_path / f"{name}.gguf")
    rows = list(scan([str(tmp_path)], audit=True))  # a bad file is a row, never the end of the scan
    assert len(rows) == 3 and {row.status for row in rows} == {"refused"}
