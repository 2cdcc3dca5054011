"""ONNX packs judged layer by layer, rotary kept in a graph evaluated with onnxruntime, and
ExecuTorch programs refused by name: on artifacts the real producers made
(``scripts/generate_artifacts.py``, ``scripts/generate_graph_exports.py``) and on packs edited here
to wire one thing wrong at a time."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed: pip install 'ropekit[onnx]'")

import ropekit  # noqa: E402
from ropekit.artifacts.audit import audit_artifact  # noqa: E402
from ropekit.artifacts.onnx_graph import lengths_for  # noqa: E402
from ropekit.artifacts.read import read_artifact  # noqa: E402
from ropekit.cli.main import main  # noqa: E402
from tests.support import ARTIFACTS  # noqa: E402

SMOLLM3 = ARTIFACTS / "onnx_smollm3_nope_dml"
LAYER_KEYS = {"index", "layer_type", "rotates", "cache", "rotary_dim", "interleaved", "verdict", "reason"}


def _audit(folder: Path, served: Path | None = None, **read: Any) -> dict[str, Any]:
    model = ropekit.load(folder / "config.json")
    return audit_artifact(model, read_artifact(served or folder, **read))


def test_a_nope_layer_rotated_by_the_builder_is_named() -> None:
    report = _audit(SMOLLM3)
    layers = report["artifact"]["layers"]
    assert [set(entry) for entry in layers] == [LAYER_KEYS] * 4
    assert [(entry["index"], entry["rotates"], entry["verdict"]) for entry in layers] == [
        (0, True, "match"), (1, True, "match"), (2, True, "match"), (3, True, "mismatch")]
    assert "layer 3 applies no RoPE in the model's code" in layers[3]["reason"]
    assert report["verdict"] == "mismatch"
    assert all(entry["cache"] == "cos_cache" and entry["rotary_dim"] == 32 and entry["interleaved"] is False
               for entry in layers)


def test_every_committed_pack_reports_its_layers() -> None:
    for folder in sorted(ARTIFACTS.glob("onnx_*")):
        report = _audit(folder)
        layers = report["artifact"]["layers"]
        assert layers, folder.name
        assert all(entry["rotates"] for entry in layers), folder.name  # every layer of these models rotates


def _edited(tmp_path: Path, source: Path, edit: Any) -> Path:
    """A copy of the pack at ``source`` with ``edit(graph)`` applied to its model."""
    target = tmp_path / source.name
    shutil.copytree(source, target)
    model = onnx.load(str(target / "model.onnx"), load_external_data=False)
    edit(model.graph)
    onnx.save(model, str(target / "model.onnx"))
    return target


def _set(node: Any, name: str, value: int) -> None:
    for attribute in node.attribute:
        if attribute.name == name:
            attribute.i = value


def test_a_rotating_layer_left_unrotated_is_a_mismatch(tmp_path: Path) -> None:
    def no_rotary(graph: Any) -> None:
        for node in graph.node:
            if node.op_type == "GroupQueryAttention":
                _set(node, "do_rotary", 0)

    pack = _edited(tmp_path, ARTIFACTS / "onnx_llama3_fp32", no_rotary)
    report = _audit(pack)
    entry = report["artifact"]["layers"][0]
    assert (entry["rotates"], entry["verdict"]) == (False, "mismatch")
    assert "rotates in the model's code (full_attention), but the pack does not" in entry["reason"]
    assert report["verdict"] == "mismatch"


def test_pairing_and_width_are_checked_per_layer(tmp_path: Path) -> None:
    def interleave(graph: Any) -> None:
        for node in graph.node:
            if node.op_type == "RotaryEmbedding":
                _set(node, "interleaved", 1)

    def narrow(graph: Any) -> None:
        for node in graph.node:
            if node.op_type == "RotaryEmbedding":
                _set(node, "rotary_embedding_dim", 16)

    source = ARTIFACTS / "onnx_phi3_longrope_dml_fp16"
    paired = _audit(_edited(tmp_path / "a", source, interleave))["artifact"]["layers"][0]
    assert paired["verdict"] == "mismatch" and paired["interleaved"] is True
    assert "interleaved (gptj) where the model pairs them rotate-half (neox)" in paired["reason"]
    narrowed = _audit(_edited(tmp_path / "b", source, narrow))["artifact"]["layers"][0]
    assert narrowed["verdict"] == "mismatch" and "rotates 16 channels where the model rotates 32" in narrowed["reason"]


def test_the_cli_prints_the_layers_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", str(SMOLLM3 / "config.json"), "--served", str(SMOLLM3)])
    out = capsys.readouterr().out
    assert code == 1
    assert "layers: 3 of 4 wired as declared" in out and "MISMATCH layer 3 (full_attention)" in out


def test_scan_audit_carries_the_layer_findings(tmp_path: Path) -> None:
    from ropekit.tools.scan import _audit_artifacts

    results, problems = _audit_artifacts(ropekit.load(SMOLLM3 / "config.json"), (str(SMOLLM3),))
    assert results[str(SMOLLM3)]["verdict"] == "mismatch"
    assert [entry["index"] for entry in results[str(SMOLLM3)]["layers"]] == [3]
    assert "layer 3 applies no RoPE" in problems


# ---- rotary kept in the graph ---------------------------------------------------------------------------


def test_lengths_straddle_every_switch() -> None:
    assert lengths_for([32, None]) == (32, 33)
    assert lengths_for([None]) == (64,)


@pytest.mark.parametrize(("name", "verdicts"), [
    ("graph_optimum_phi3_longrope", {32: "match", 33: "mismatch"}),  # traced at its dummy length: short factors
    ("graph_torch_dynamo_phi3_longrope", {32: "match", 33: "match"}),
    ("graph_optimum_llama3", {64: "match"}),
])
def test_a_graph_that_computes_its_rotary_is_run_on_both_sides_of_the_switch(
        name: str, verdicts: dict[int, str]) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    folder = ARTIFACTS / name
    model = ropekit.load(folder / "config.json")
    artifact = read_artifact(folder, graph_lengths=lengths_for(t.switch_at for t in model.tables.values()))
    assert "graph_rotary" in artifact.engine
    report = audit_artifact(model, artifact)
    seen = {table["comparisons"][0]["declared"]: table["verdict"] for table in report["layers"]["full_attention"]
            ["tables"]}
    assert {int(key.split()[-1]) if key.startswith("seq_len") else 64: value for key, value in seen.items()} == \
        verdicts
    if "mismatch" in verdicts.values():
        assert report["layers"]["full_attention"]["served_as"].startswith("longrope at load time (seq_len <= 32)")


def test_without_onnxruntime_a_graph_is_no_table_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    report = _audit(ARTIFACTS / "graph_optimum_llama3")
    assert report["verdict"] == "no_table"
    assert "needs onnxruntime: pip install 'ropekit[onnx]'" in report["reason"]


def test_an_executorch_program_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "llama.pte"
    program.write_bytes(b"\x00" * 64)
    report = audit_artifact(ropekit.load(SMOLLM3 / "config.json"), read_artifact(program))
    assert report["verdict"] == "no_table" and report["artifact"]["kind"] == "executorch"
    assert "ExecuTorch program (.pte)" in report["reason"] and "audit_module" in report["request"]
    assert main(["audit", str(SMOLLM3 / "config.json"), "--served", str(program), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "no_table"
