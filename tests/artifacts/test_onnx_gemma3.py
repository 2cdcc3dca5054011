"""Gemma-3 onnxruntime-genai packs: two cache pairs (``cos_cache_global``/``sin_cache_global`` for
full-attention layers, ``cos_cache_local``/``sin_cache_local`` for sliding ones), each layer's
rotary wired to one of them.

onnxruntime-genai's builder crashes on Gemma-3 under transformers 5 (docs/audit.md), so no pack is
committed: these tests build the layout from the committed SmolLM3 DirectML pack (four layers;
layers 0-2 rotate inside ``GroupQueryAttention``, layer 3 through ``RotaryEmbedding`` nodes), with a
``gemma3_text`` config, the two cache pairs computed here from the declared tables, and each
layer's rotary wired as the builder wires it; then wire or compute one thing wrong at a time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed: pip install 'ropekit[onnx]'")

import ropekit  # noqa: E402
from ropekit.artifacts.audit import audit_artifact  # noqa: E402
from ropekit.artifacts.read import read_artifact  # noqa: E402
from ropekit.artifacts.repair import annotate, repair  # noqa: E402
from ropekit.cli.main import main  # noqa: E402
from tests.support import ARTIFACTS  # noqa: E402

SOURCE = ARTIFACTS / "onnx_smollm3_nope_dml"
LAYER_TYPES = ("sliding_attention", "full_attention", "sliding_attention", "full_attention")
GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 64,
          "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 4,
          "intermediate_size": 32, "vocab_size": 96, "max_position_embeddings": 256, "rope_theta": 1000000.0,
          "rope_local_base_freq": 20000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
          "sliding_window": 16, "query_pre_attn_scalar": 32, "layer_types": list(LAYER_TYPES)}
SUFFIX = {"full_attention": "global", "sliding_attention": "local"}
ROWS = 256


def _inv_freq(theta: float, factor: float = 1.0) -> np.ndarray[Any, Any]:
    return 1.0 / (theta ** (np.arange(0, 32, 2, dtype=np.float64) / 32)) / factor


def _caches(inv_freq: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """cos and sin ``[positions, pairs]`` in float16, as the builder stores them (one column per pair)."""
    angles = np.outer(np.arange(ROWS, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float16), np.sin(angles).astype(np.float16)


def _layer(name: str) -> int | None:
    marker = "/model/layers."
    if not name.startswith(marker):
        return None
    return int(name[len(marker):].split("/", 1)[0])


def _gemma3_pack(tmp_path: Path, *, wired: dict[int, str] | None = None,
                 served: dict[str, np.ndarray[Any, Any]] | None = None) -> Path:
    """A Gemma-3 pack in ``tmp_path``: ``wired`` maps a layer to the layer type whose cache it
    reads (default its own), ``served`` a layer type to the inv_freq its cache is computed from
    (default the declared table: full layers RoPE at 1e6 with linear 8, sliding ones at 2e4)."""
    pack = tmp_path / "gemma3_pack"
    shutil.copytree(SOURCE, pack, ignore=shutil.ignore_patterns("checkpoint"))
    (pack / "config.json").write_text(json.dumps(GEMMA3))
    tables = {"full_attention": _inv_freq(1000000.0, 8.0), "sliding_attention": _inv_freq(20000.0)}
    tables.update(served or {})
    model = onnx.load(str(pack / "model.onnx"), load_external_data=True)
    graph = model.graph
    kept = [tensor for tensor in graph.initializer if tensor.name not in ("cos_cache", "sin_cache")]
    assert len(kept) == len(graph.initializer) - 2
    del graph.initializer[:]
    graph.initializer.extend(kept)
    for layer_type, suffix in SUFFIX.items():
        cos, sin = _caches(tables[layer_type])
        graph.initializer.extend([onnx.numpy_helper.from_array(cos, f"cos_cache_{suffix}"),
                                  onnx.numpy_helper.from_array(sin, f"sin_cache_{suffix}")])
    reads = {index: (wired or {}).get(index, layer_type) for index, layer_type in enumerate(LAYER_TYPES)}
    for node in graph.node:
        index = _layer(node.name)
        if index not in reads:  # outside the attention layers (the builder's final norm is /model/layers.4/...)
            continue
        suffix = SUFFIX[reads[index]]
        for position, name in enumerate(node.input):
            if name in ("cos_cache", "sin_cache"):
                node.input[position] = f"{name}_{suffix}"
        if node.op_type == "GroupQueryAttention" and LAYER_TYPES[index] == "sliding_attention":
            for attribute in node.attribute:
                if attribute.name == "local_window_size":
                    attribute.i = GEMMA3["sliding_window"]  # the builder's sliding layers
    assert not [name for node in graph.node for name in node.input if name in ("cos_cache", "sin_cache")]
    (pack / "model.onnx.data").unlink()
    onnx.save_model(model, str(pack / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=0)
    return pack


def _audit(pack: Path) -> dict[str, Any]:
    return audit_artifact(ropekit.load(pack / "config.json"), read_artifact(pack)).to_json()


def _audit_json(pack: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = main(["audit", str(pack / "config.json"), "--served", str(pack), "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return status, document


def test_the_declared_tables_are_gemma3s() -> None:
    model = ropekit.load(GEMMA3)
    np.testing.assert_allclose(model.tables["full_attention"].inv_freq, _inv_freq(1000000.0, 8.0), rtol=1e-12)
    np.testing.assert_allclose(model.tables["sliding_attention"].inv_freq, _inv_freq(20000.0), rtol=1e-12)
    assert [model.for_layer(index).layer_type for index in range(4)] == list(LAYER_TYPES)  # type: ignore[union-attr]


def test_a_correct_gemma3_pack_audits_as_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = _gemma3_pack(tmp_path)
    artifact = read_artifact(pack)
    assert sorted((table.layer_type, table.dtype, table.values.shape) for table in artifact.tables) == [
        ("full_attention", "float16", (ROWS, 16)), ("sliding_attention", "float16", (ROWS, 16))]
    report = audit_artifact(ropekit.load(pack / "config.json"), artifact).to_json()
    assert report["verdict"] == "match", report
    assert {name: layer["verdict"] for name, layer in report["layers"].items()} == {
        "full_attention": "match", "sliding_attention": "match"}
    layers = report["artifact"]["layers"]
    assert [(entry["index"], entry["layer_type"], entry["cache"], entry["rotates"], entry["rotary_dim"],
             entry["verdict"]) for entry in layers] == [
        (0, "sliding_attention", "cos_cache_local", True, 32, "match"),
        (1, "full_attention", "cos_cache_global", True, 32, "match"),
        (2, "sliding_attention", "cos_cache_local", True, 32, "match"),
        (3, "full_attention", "cos_cache_global", True, 32, "match")]
    assert layers[3]["reason"] == "layer 3 rotates with cos_cache_global as declared (full_attention)"
    status, document = _audit_json(pack, capsys)
    assert status == 0 and document["verdict"] == "match" and "repairable" not in document
    assert [(entry["index"], entry["layer_type"], entry["cache"]) for entry in document["artifact"]["layers"]] == [
        (entry["index"], entry["layer_type"], entry["cache"]) for entry in layers]
    result = repair(ropekit.load(pack / "config.json"), pack, tmp_path / "fixed")
    assert (result.verdict, result.out) == ("unchanged", None) and not (tmp_path / "fixed").exists()


MISWIRED = {  # layer: (the cache it is wired to, how the reason names it)
    0: ("full_attention", "layer 0: it is a sliding_attention layer wired to the full_attention cache "
                          "cos_cache_global"),  # GroupQueryAttention's own rotary
    2: ("full_attention", "layer 2: it is a sliding_attention layer wired to the full_attention cache "
                          "cos_cache_global"),
    1: ("sliding_attention", "layer 1: it is a full_attention layer wired to the sliding_attention cache "
                             "cos_cache_local"),
    3: ("sliding_attention", "layer 3: it is a full_attention layer wired to the sliding_attention cache "
                             "cos_cache_local"),  # RotaryEmbedding nodes on the query and the key
}


@pytest.mark.parametrize("index", sorted(MISWIRED))
def test_a_layer_wired_to_the_other_types_cache_is_named_and_rewired(
        tmp_path: Path, index: int, capsys: pytest.CaptureFixture[str]) -> None:
    wrong, reason = MISWIRED[index]
    own = LAYER_TYPES[index]
    pack = _gemma3_pack(tmp_path, wired={index: wrong})
    report = _audit(pack)
    assert report["verdict"] == "mismatch"
    layers = report["artifact"]["layers"]
    assert [entry["verdict"] for entry in layers] == ["mismatch" if i == index else "match" for i in range(4)]
    entry = layers[index]
    assert (entry["layer_type"], entry["cache"]) == (own, f"cos_cache_{SUFFIX[wrong]}")
    assert entry["reason"] == reason
    # both caches are right: only the layer's own type is a mismatch, reported with the layer's reason
    assert report["layers"][own] == {"verdict": "mismatch", "tables": report["layers"][own]["tables"],
                                     "served_as": reason}
    assert [table["verdict"] for table in report["layers"][own]["tables"]] == ["match"]
    other = next(name for name in LAYER_TYPES if name != own)
    assert report["layers"][other]["verdict"] == "match"

    status, document = _audit_json(pack, capsys)
    assert status == 1 and document["verdict"] == "mismatch"
    assert document["repairable"] is True, document["repairable_reason"]
    assert document["layers"][own]["repairable"] is True
    wanted = f"cos_cache_{SUFFIX[own]}"
    assert document["layers"][own]["repairable_reason"] == (
        f"layer {index} is rewired from cos_cache_{SUFFIX[wrong]} to {wanted}")
    model = ropekit.load(pack / "config.json")
    annotated = annotate(model, audit_artifact(model, read_artifact(pack))).to_json()
    assert annotated["repairable"] is True

    result = repair(model, pack, tmp_path / "fixed")
    assert result.verdict == "repaired", result.reason
    assert list(result.changes) == [{"what": f"layer {index}", "layer_type": own,
                                     "change": f"rewired from cos_cache_{SUFFIX[wrong]} to {wanted}"}]
    fixed = _audit(tmp_path / "fixed")
    assert fixed["verdict"] == "match", fixed
    assert [entry["cache"] for entry in fixed["artifact"]["layers"]] == [
        f"cos_cache_{SUFFIX[name]}" for name in LAYER_TYPES]
    # the graph is the correct pack's, node for node, input for input
    expected = onnx.load(str(_gemma3_pack(tmp_path / "reference") / "model.onnx"), load_external_data=False)
    got = onnx.load(str(tmp_path / "fixed" / "model.onnx"), load_external_data=False)
    assert [(node.name, list(node.input)) for node in got.graph.node] == \
        [(node.name, list(node.input)) for node in expected.graph.node]
    _loads(tmp_path / "fixed")


SERVED = {  # layer type: (what its cache is computed from instead, how audit names it)
    "full_attention": (_inv_freq(1000000.0), "plain RoPE"),  # the linear scaling dropped
    "sliding_attention": (_inv_freq(10000.0), "plain RoPE"),  # the local base lost: RoPE at 10000
}


@pytest.mark.parametrize("layer_type", sorted(SERVED))
def test_a_wrong_cache_is_named_by_layer_type_and_recomputed(
        tmp_path: Path, layer_type: str, capsys: pytest.CaptureFixture[str]) -> None:
    inv_freq, words = SERVED[layer_type]
    pack = _gemma3_pack(tmp_path, served={layer_type: inv_freq})
    report = _audit(pack)
    assert report["verdict"] == "mismatch"
    other = next(name for name in LAYER_TYPES if name != layer_type)
    assert report["layers"][other]["verdict"] == "match"
    summary = report["layers"][layer_type]
    assert summary["verdict"] == "mismatch"
    assert summary["served_as"].startswith(words), summary["served_as"]
    [table] = summary["tables"]
    assert f"cos_cache_{SUFFIX[layer_type]}" in table["where"] and table["verdict"] == "mismatch"
    # the wiring is right: every layer reads its own type's cache
    assert [entry["verdict"] for entry in report["artifact"]["layers"]] == ["match"] * 4

    status, document = _audit_json(pack, capsys)
    assert status == 1 and document["repairable"] is True, document.get("repairable_reason")
    assert document["layers"][layer_type]["repairable_reason"] == "its caches are recomputed from the declared table"
    assert "repairable" not in document["layers"][other]

    model = ropekit.load(pack / "config.json")
    result = repair(model, pack, tmp_path / "fixed")
    assert result.verdict == "repaired", result.reason
    suffix = SUFFIX[layer_type]
    assert [(change["what"], change["layer_type"], change["shape"], change["dtype"]) for change in result.changes] == [
        (f"cos_cache_{suffix} (graph)", layer_type, [ROWS, 16], "float16"),
        (f"sin_cache_{suffix} (graph)", layer_type, [ROWS, 16], "float16")]
    fixed = _audit(tmp_path / "fixed")
    assert fixed["verdict"] == "match", fixed
    # the recomputed caches are the declared table's, the other pair byte for byte as it was
    before = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(pack / "model.onnx")).graph.initializer}
    after = {t.name: onnx.numpy_helper.to_array(t)
             for t in onnx.load(str(tmp_path / "fixed" / "model.onnx")).graph.initializer}
    assert sorted(name for name in after if after[name].tobytes() != before[name].tobytes()) == [
        f"cos_cache_{suffix}", f"sin_cache_{suffix}"]
    declared = {"full_attention": _inv_freq(1000000.0, 8.0), "sliding_attention": _inv_freq(20000.0)}[layer_type]
    cos, sin = _caches(declared)
    np.testing.assert_allclose(after[f"cos_cache_{suffix}"].astype(np.float64), cos.astype(np.float64), atol=1e-3)
    np.testing.assert_allclose(after[f"sin_cache_{suffix}"].astype(np.float64), sin.astype(np.float64), atol=1e-3)
    _loads(tmp_path / "fixed")


def test_a_miswired_layer_and_a_wrong_cache_are_repaired_together(tmp_path: Path) -> None:
    pack = _gemma3_pack(tmp_path, wired={0: "full_attention"}, served={"full_attention": _inv_freq(1000000.0)})
    report = _audit(pack)
    assert report["verdict"] == "mismatch"
    assert report["layers"]["sliding_attention"]["served_as"].startswith("layer 0: it is a sliding_attention layer")
    assert report["layers"]["full_attention"]["served_as"].startswith("plain RoPE")
    model = ropekit.load(pack / "config.json")
    assert annotate(model, audit_artifact(model, read_artifact(pack))).repairable is True
    result = repair(model, pack, tmp_path / "fixed")
    assert result.verdict == "repaired", result.reason
    assert sorted(change.get("change", change["what"]) for change in result.changes) == [
        "cos_cache_global (graph)", "rewired from cos_cache_global to cos_cache_local", "sin_cache_global (graph)"]
    assert _audit(tmp_path / "fixed")["verdict"] == "match"


def test_a_layer_whose_key_alone_reads_the_other_cache_is_rewired(tmp_path: Path) -> None:
    """Layer 3 (full attention, RotaryEmbedding nodes): the query on the global cache, the key on the
    local one. Only the key's rotation is moved (the layer's first rotation, the query's, is right)."""
    key = "/model/layers.3/attn/k_rotary/RotaryEmbedding"
    pack = _gemma3_pack(tmp_path)
    model = onnx.load(str(pack / "model.onnx"), load_external_data=False)
    node = next(node for node in model.graph.node if node.name == key)
    node.input[2], node.input[3] = "cos_cache_local", "sin_cache_local"
    onnx.save(model, str(pack / "model.onnx"))
    report = _audit(pack)
    entry = report["artifact"]["layers"][3]
    assert (entry["verdict"], entry["cache"]) == ("mismatch", "cos_cache_local")
    assert entry["reason"].startswith(f"layer 3: the key's rotation ({key}) reads the sliding_attention cache "
                                      "cos_cache_local in a full_attention layer; its rotations disagree")
    rope = ropekit.load(pack / "config.json")
    annotated = annotate(rope, audit_artifact(rope, read_artifact(pack))).to_json()
    assert (annotated["repairable"], annotated["layers"]["full_attention"]["repairable_reason"]) == (
        True, "layer 3 is rewired from cos_cache_local to cos_cache_global")
    result = repair(rope, pack, tmp_path / "fixed")
    assert result.verdict == "repaired", result.reason
    assert _audit(tmp_path / "fixed")["verdict"] == "match"
    inputs = {node.name: list(node.input) for node in
              onnx.load(str(tmp_path / "fixed" / "model.onnx"), load_external_data=False).graph.node}
    assert inputs[key][2:] == ["cos_cache_global", "sin_cache_global"]
    assert inputs["/model/layers.3/attn/q_rotary/RotaryEmbedding"][2:] == ["cos_cache_global", "sin_cache_global"]


def test_a_miswired_layer_that_is_also_interleaved_is_refused(tmp_path: Path) -> None:
    """Moving the layer to its own cache would leave its pairing wrong: refused, naming both."""
    pack = _gemma3_pack(tmp_path, wired={0: "full_attention"})
    model = onnx.load(str(pack / "model.onnx"), load_external_data=False)
    for node in model.graph.node:
        if node.name == "/model/layers.0/attn/GroupQueryAttention":
            for attribute in node.attribute:
                if attribute.name == "rotary_interleaved":
                    attribute.i = 1
    onnx.save(model, str(pack / "model.onnx"))
    report = _audit(pack)
    reason = report["artifact"]["layers"][0]["reason"]
    assert reason == ("layer 0: it is a sliding_attention layer wired to the full_attention cache cos_cache_global; "
                      "it pairs channels interleaved (gptj) where the model pairs them rotate-half (neox)")
    result = repair(ropekit.load(pack / "config.json"), pack, tmp_path / "fixed")
    assert result.verdict == "not_repairable"
    assert result.reason == (f"{reason}; only removing a rotation or moving a layer to its own layer type's cache is "
                             "a safe graph edit: rebuild the pack")
    assert not (tmp_path / "fixed").exists()


def test_a_pack_without_the_other_types_cache_cannot_be_rewired(tmp_path: Path) -> None:
    """Both pairs computed from one table under the global name only: a sliding layer has no local
    cache to move to."""
    pack = _gemma3_pack(tmp_path, wired={0: "full_attention", 2: "full_attention"})
    model = onnx.load(str(pack / "model.onnx"), load_external_data=True)
    local = [t for t in model.graph.initializer if t.name.endswith("_cache_local")]
    for tensor in local:
        model.graph.initializer.remove(tensor)
    (pack / "model.onnx.data").unlink()
    onnx.save_model(model, str(pack / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=0)
    report = _audit(pack)
    assert report["verdict"] == "mismatch"
    assert report["layers"]["sliding_attention"]["served_as"].startswith(
        "layer 0: it is a sliding_attention layer wired to the full_attention cache cos_cache_global")
    result = repair(ropekit.load(pack / "config.json"), pack, tmp_path / "fixed")
    assert result.verdict == "not_repairable"
    assert "the pack has no sliding_attention cache to wire it to: rebuild the pack" in result.reason
    assert not (tmp_path / "fixed").exists()


def _loads(pack: Path) -> None:
    """The pack loads in onnxruntime on CPU and runs a short prompt (finite logits: the rewired
    graph reads caches that exist, of the width its rotary wants)."""
    onnxruntime = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    session = onnxruntime.InferenceSession(str(pack / "model.onnx"), providers=["CPUExecutionProvider"])
    ids = np.arange(3, 11, dtype=np.int64)[None]
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                             "position_ids": np.arange(ids.shape[1], dtype=np.int64)[None]}
    for value in session.get_inputs():
        if value.name.startswith("past_key_values"):
            feeds[value.name] = np.zeros((1, value.shape[1], 0, 32), dtype=np.float16)
    logits = session.run(["logits"], feeds)[0]
    assert logits.shape == (1, 8, 96) and bool(np.isfinite(logits).all())
