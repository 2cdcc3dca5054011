"""ONNX packs judged layer by layer and rotary kept in a graph evaluated with onnxruntime: on
artifacts the real producers made
(``scripts/artifacts/onnx_builder.py``, ``scripts/generate_graph_exports.py``) and on packs edited here
to wire one thing wrong at a time."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed: pip install 'ropekit[onnx]'")

import ropekit  # noqa: E402
from ropekit.artifacts.audit import audit_artifact  # noqa: E402
from ropekit.artifacts.format import lengths_for  # noqa: E402
from ropekit.artifacts.read import read_artifact  # noqa: E402
from ropekit.cli.main import main  # noqa: E402
from tests.support import ARTIFACTS  # noqa: E402

SMOLLM3 = ARTIFACTS / "onnx_smollm3_nope_dml"
LAYER_KEYS = {"index", "layer_type", "rotates", "cache", "rotary_dim", "interleaved", "verdict", "reason"}


def _audit(folder: Path, served: Path | None = None, **read: Any) -> dict[str, Any]:
    model = ropekit.load(folder / "config.json")
    return audit_artifact(model, read_artifact(served or folder, **read)).to_json()


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


def _key_rotary(graph: Any) -> Any:
    return next(node for node in graph.node if node.name == "/model/layers.0/attn/k_rotary/RotaryEmbedding")


def test_every_rotation_of_a_layer_is_judged_not_only_the_first(tmp_path: Path) -> None:
    def interleave_key(graph: Any) -> None:
        _set(_key_rotary(graph), "interleaved", 1)

    report = _audit(_edited(tmp_path, ARTIFACTS / "onnx_phi3_longrope_dml_fp16", interleave_key))
    entry = report["artifact"]["layers"][0]
    assert (entry["verdict"], entry["interleaved"], entry["rotary_dim"]) == ("mismatch", True, 32)
    assert entry["reason"].startswith(
        "layer 0: the key's rotation (/model/layers.0/attn/k_rotary/RotaryEmbedding) pairs channels interleaved "
        "(gptj) where the model pairs them rotate-half (neox); its rotations disagree "
        "(/model/layers.0/attn/q_rotary/RotaryEmbedding: cache cos_cache, 32 channels, interleaved 0; ")
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == entry["reason"]


def test_a_key_left_unrotated_or_a_query_rotated_twice_is_named(tmp_path: Path) -> None:
    def drop_key_rotation(graph: Any) -> None:
        node = _key_rotary(graph)
        for other in graph.node:
            for position, name in enumerate(other.input):
                if name == node.output[0]:
                    other.input[position] = node.input[0]
        graph.node.remove(node)

    def rotate_again(graph: Any) -> None:
        for node in graph.node:
            if node.op_type == "GroupQueryAttention":
                _set(node, "do_rotary", 1)
                node.input[7], node.input[8] = "cos_cache", "sin_cache"

    source = ARTIFACTS / "onnx_phi3_longrope_dml_fp16"
    unrotated = _audit(_edited(tmp_path / "a", source, drop_key_rotation))["artifact"]["layers"][0]
    assert unrotated["verdict"] == "mismatch"
    assert unrotated["reason"] == ("layer 0: its key is not rotated (only /model/layers.0/attn/q_rotary/"
                                   "RotaryEmbedding rotates)")
    twice = _audit(_edited(tmp_path / "b", source, rotate_again))["artifact"]["layers"][0]
    assert twice["verdict"] == "mismatch"
    assert ("its query is rotated 2 times (/model/layers.0/attn/q_rotary/RotaryEmbedding, "
            "/model/layers.0/attn/GroupQueryAttention)") in twice["reason"]
    assert "its key is rotated 2 times" in twice["reason"]


def test_the_cli_prints_the_layers_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", str(SMOLLM3 / "config.json"), "--served", str(SMOLLM3)])
    out = capsys.readouterr().out
    assert code == 1
    assert "layers: 3 of 4 wired as declared" in out
    assert "  MISMATCH (full_attention) layer 3 applies no RoPE in the model's code" in out  # the index said once


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
    report = audit_artifact(model, artifact).to_json()
    seen = {table["comparisons"][0]["declared"]: table["verdict"] for table in report["layers"]["full_attention"]
            ["tables"]}
    assert {int(key.split()[-1]) if key.startswith("seq_len") else 64: value for key, value in seen.items()} == \
        verdicts
    if "mismatch" in verdicts.values():
        assert report["layers"]["full_attention"]["served_as"].startswith("longrope at load time (seq_len <= 32)")


GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 32, "num_hidden_layers": 6, "max_position_embeddings": 256, "rope_theta": 1000000.0,
          "rope_local_base_freq": 20000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
          "sliding_window": 16, "query_pre_attn_scalar": 32,
          "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}


def _two_rotary_graph(tmp_path: Path, computes: dict[str, str], readers: str) -> Path:
    """A folder with GEMMA3's config and a graph computing one cos/sin pair per entry of ``computes``
    (pair name -> the layer type whose table it computes, or ``plain``: RoPE at 10000), as torch.onnx writes a rotary: positions
    times inv_freq, concatenated, Cos and Sin. ``readers``: ``name`` (each pair read by nodes named
    ``/model/layers.N/...`` of its layer type), ``metadata`` (the dynamo exporter's name scopes), or
    ``none`` (the pairs are graph outputs nothing reads)."""
    from onnx import TensorProto, helper, numpy_helper

    model = ropekit.load(GEMMA3)
    nodes = [helper.make_node("Cast", ["position_ids"], ["positions"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["positions", "axis"], ["column"])]
    initializers = [numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis")]
    outputs = []
    for pair, layer_type in computes.items():
        table = ropekit.plain_inv_freq(10000.0, 32) if layer_type == "plain" else model.tables[layer_type].inv_freq
        inv_freq = np.asarray(table, dtype=np.float32)[None, :]
        initializers.append(numpy_helper.from_array(inv_freq, f"inv_{pair}"))
        nodes += [helper.make_node("Mul", ["column", f"inv_{pair}"], [f"freqs_{pair}"]),
                  helper.make_node("Concat", [f"freqs_{pair}"] * 2, [f"emb_{pair}"], axis=-1),
                  helper.make_node("Cos", [f"emb_{pair}"], [f"cos_{pair}"]),
                  helper.make_node("Sin", [f"emb_{pair}"], [f"sin_{pair}"])]
        read_by = [index for index, name in enumerate(model.layer_types) if name == pair]
        if readers == "none":
            outputs += [f"cos_{pair}", f"sin_{pair}"]
            continue
        for index in read_by:
            for which in ("cos", "sin"):
                name = f"/model/layers.{index}/self_attn/Mul_{which}" if readers == "name" else f"node_{pair}_{index}"
                node = helper.make_node("Mul", [f"{which}_{pair}", f"{which}_{pair}"], [f"{which}_{pair}_{index}"],
                                        name=name)
                if readers == "metadata":
                    scopes = f"['', 'model', 'model.layers.{index}', 'model.layers.{index}.self_attn', 'mul']"
                    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=scopes)
                nodes.append(node)
                outputs.append(f"{which}_{pair}_{index}")
    graph = helper.make_graph(
        nodes, "rotary", [helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "sequence_length"])],
        [helper.make_empty_tensor_value_info(name) for name in outputs], initializers)
    folder = tmp_path / f"gemma3_{readers}"
    folder.mkdir()
    # IR 8 (opset 17): onnxruntime 1.23, the newest for Python 3.10, reads no newer IR than onnx 1.23 writes by default
    graph_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(graph_model, str(folder / "model.onnx"))
    (folder / "config.json").write_text(json.dumps(GEMMA3))
    return folder


@pytest.mark.parametrize("readers", ["name", "metadata", "none"])
def test_a_two_rotary_graph_is_audited_per_layer_type(tmp_path: Path, readers: str) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    folder = _two_rotary_graph(tmp_path, {"full_attention": "full_attention",
                                          "sliding_attention": "sliding_attention"}, readers)
    artifact = read_artifact(folder)
    expected = {"name": [(5,), (0, 1, 2, 3, 4)], "metadata": [(5,), (0, 1, 2, 3, 4)], "none": [(), ()]}[readers]
    assert [table.layers for table in artifact.tables] == expected
    report = audit_artifact(ropekit.load(folder / "config.json"), artifact).to_json()
    assert report["verdict"] == "match", report["layers"]
    for name in ("full_attention", "sliding_attention"):
        tables = report["layers"][name]["tables"]
        assert [(table["verdict"], f"cos_{name}" in table["where"]) for table in tables] == [("match", True)]
        assert ("assigned" in tables[0]) == (readers == "none")


@pytest.mark.parametrize("readers", ["name", "none"])
def test_a_two_rotary_graph_serving_one_table_twice_is_a_mismatch(tmp_path: Path, readers: str) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    folder = _two_rotary_graph(tmp_path, {"full_attention": "full_attention",
                                          "sliding_attention": "full_attention"}, readers)
    report = _audit(folder)
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["verdict"] == "match"
    sliding = report["layers"]["sliding_attention"]
    assert sliding["verdict"] == "mismatch"
    assert sliding["served_as"] == "the full_attention table (linear)"
    if readers == "none":  # neither table is the sliding one: both are reported against it
        assert [table["verdict"] for table in sliding["tables"]] == ["mismatch", "mismatch"]
        assert "none of its tables is the sliding_attention table" in sliding["tables"][0]["assigned"]


def test_a_graph_table_no_layer_type_declares_is_flagged(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    folder = _two_rotary_graph(tmp_path, {"full_attention": "full_attention",
                                          "sliding_attention": "sliding_attention", "extra": "plain"}, "none")
    report = _audit(folder)
    assert {name: layer["verdict"] for name, layer in report["layers"].items()} == {
        "full_attention": "match", "sliding_attention": "match"}
    assert report["verdict"] == "mismatch"
    assert report["flags"] == ["model.onnx: cos_extra / sin_extra evaluated at 64 positions: is no declared layer "
                               "type's table, and the graph does not say which layers read it"]


def test_without_onnxruntime_a_graph_is_no_table_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    report = _audit(ARTIFACTS / "graph_optimum_llama3")
    assert report["verdict"] == "no_table"
    assert "needs onnxruntime: pip install 'ropekit[onnx]'" in report["reason"]


def test_without_onnxruntime_an_inv_freq_buffer_beside_the_rotary_is_not_audited_instead(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # this export also carries original_inv_freq, which matches the short regime: auditing it would say match
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    report = _audit(ARTIFACTS / "graph_torch_dynamo_phi3_longrope")
    assert report["verdict"] == "no_table"
    assert report["layers"] == {"full_attention": {"verdict": "no_table"}}
    assert report["reason"].startswith("the graph computes its rotary (Cos/Sin nodes) but evaluating it needs "
                                       "onnxruntime: pip install 'ropekit[onnx]' (its inner.model.rotary_emb."
                                       "original_inv_freq (graph) is not audited in its place")


def test_a_graph_rotary_that_fails_to_run_is_no_table_with_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    onnxruntime = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no kernel for Cos(19)")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    report = _audit(ARTIFACTS / "graph_torch_dynamo_phi3_longrope")
    assert report["verdict"] == "no_table"
    assert report["reason"].startswith("the graph's rotary (Cos/Sin nodes) could not be isolated and run: "
                                       "RuntimeError: no kernel for Cos(19) (its inner.model.rotary_emb.")
