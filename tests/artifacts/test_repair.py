"""``ropekit repair`` on every committed artifact: repaired copies audit as ``match``, matching
artifacts are left alone, what an engine's own rules cannot serve is refused naming the rule, the
original is never touched; and the proof on outputs: onnxruntime running a repaired pack gives
transformers' logits where the original pack does not."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx is not installed: pip install 'ropekit[onnx]'")
pytest.importorskip("gguf", reason="gguf is not installed: pip install 'ropekit[gguf]'")

import ropekit
from ropekit.artifacts.audit import audit_artifact
from ropekit.artifacts.read import read_artifact
from ropekit.artifacts.repair import repair
from ropekit.cli.main import main
from tests.support import ARTIFACTS

EXPECTED: dict[str, tuple[str, str]] = {
    "onnx_llama_linear": ("repaired", ""),
    "onnx_llama_yarn": ("repaired", ""),
    "onnx_qwen2_yarn": ("repaired", ""),
    "onnx_smollm3_nope_dml": ("repaired", ""),
    "gguf_seed_llama32_no_rope_freqs": ("repaired", ""),
    "gguf_qwen2_yarn_keys": ("repaired", ""),
    "gguf_stablelm_base": ("repaired", ""),
    "gguf_gptneox_keys": ("repaired", ""),
    "gguf_llama_yarn_betas": ("not_repairable", "loader ignores the file's betas"),
    "gguf_phi3_longrope": ("not_repairable", "picks one factor set by n_ctx"),
    "gguf_gpt_oss_yarn": ("not_repairable", "sliding-window sets"),
    "gguf_smollm3_all_rope": ("not_repairable", "applies no RoPE in llama.cpp"),
    "gguf_llama4_all_rope": ("not_repairable", "applies no RoPE in llama.cpp"),
    "graph_optimum_phi3_longrope": ("not_repairable", "the rotary is computed in the graph"),
}


def _served(name: str) -> Path:
    folder = ARTIFACTS / name
    return folder / "model.gguf" if (folder / "model.gguf").exists() else folder


def _digest(path: Path) -> str:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return hashlib.sha256(b"".join(item.read_bytes() for item in files if item.is_file())).hexdigest()


def _out(tmp_path: Path, name: str) -> Path:
    return tmp_path / (f"{name}.gguf" if _served(name).suffix == ".gguf" else name)


@pytest.mark.parametrize("name", sorted(path.name for path in ARTIFACTS.iterdir() if path.is_dir()))
def test_every_committed_artifact_is_repaired_left_alone_or_refused_by_name(tmp_path: Path, name: str) -> None:
    verdict, words = EXPECTED.get(name, ("unchanged", ""))
    model = ropekit.load(ARTIFACTS / name / "config.json")
    before = _digest(_served(name))
    out = _out(tmp_path, name)
    result = repair(model, _served(name), out)
    assert (result.verdict, words in result.reason) == (verdict, True), result.reason
    assert _digest(_served(name)) == before  # the original is never touched
    assert [p.name for p in tmp_path.iterdir()] == ([out.name] if verdict == "repaired" else [])  # no leftovers
    if verdict == "repaired":
        assert result.out == str(out) and result.changes
        assert audit_artifact(model, read_artifact(out))["verdict"] == "match"


def test_a_repaired_pack_keeps_everything_else(tmp_path: Path) -> None:
    import onnx

    source = ARTIFACTS / "onnx_llama_linear"
    result = repair(ropekit.load(source / "config.json"), source, tmp_path / "fixed")
    assert result.verdict == "repaired"
    assert sorted(p.name for p in (tmp_path / "fixed").iterdir()) == sorted(p.name for p in source.iterdir())
    assert (tmp_path / "fixed" / "genai_config.json").read_bytes() == (source / "genai_config.json").read_bytes()
    old = onnx.load(str(source / "model.onnx"))
    new = onnx.load(str(tmp_path / "fixed" / "model.onnx"))
    assert [node.name for node in new.graph.node] == [node.name for node in old.graph.node]
    changed = {t.name for t in new.graph.initializer
               if onnx.numpy_helper.to_array(t).tobytes() != onnx.numpy_helper.to_array(
                   next(o for o in old.graph.initializer if o.name == t.name)).tobytes()}
    assert changed == {"cos_cache", "sin_cache"}
    assert [c["what"] for c in result.changes] == ["cos_cache (graph)", "sin_cache (graph)"]


def test_a_nope_layer_loses_its_rotation_and_nothing_else(tmp_path: Path) -> None:
    import onnx

    source = ARTIFACTS / "onnx_smollm3_nope_dml"
    result = repair(ropekit.load(source / "config.json"), source, tmp_path / "fixed")
    assert [c.get("change") for c in result.changes] == ["rotation removed (a NoPE layer)"]  # caches were right
    graph = onnx.load(str(tmp_path / "fixed" / "model.onnx")).graph
    assert not [node for node in graph.node if node.op_type == "RotaryEmbedding"]
    layers = audit_artifact(ropekit.load(source / "config.json"), read_artifact(tmp_path / "fixed"))["artifact"]
    assert [entry["rotates"] for entry in layers["layers"]] == [True, True, True, False]


def test_a_repaired_gguf_is_read_back_by_gguf_itself(tmp_path: Path) -> None:
    import gguf

    source = _served("gguf_seed_llama32_no_rope_freqs")
    model = ropekit.load(ARTIFACTS / "gguf_seed_llama32_no_rope_freqs" / "config.json")
    out = tmp_path / "fixed.gguf"
    assert repair(model, source, out).verdict == "repaired"
    old, new = gguf.GGUFReader(source), gguf.GGUFReader(out)
    factors = next(t for t in new.tensors if t.name == "rope_freqs.weight").data
    plain = ropekit.plain_inv_freq(500000.0, 64)
    np.testing.assert_allclose(plain / np.asarray(factors, dtype=np.float64), model.table.inv_freq, rtol=1e-6)
    for tensor in old.tensors:  # every other tensor byte for byte
        assert next(t for t in new.tensors if t.name == tensor.name).data.tobytes() == tensor.data.tobytes()
    kept = {k: f.contents() for k, f in old.fields.items() if not k.startswith("GGUF.")}
    assert {k: v for k, v in ((k, f.contents()) for k, f in new.fields.items()) if k in kept} == kept


def test_the_cli_repairs_refuses_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = ARTIFACTS / "onnx_qwen2_yarn"
    config = str(source / "config.json")
    assert main(["repair", config, "--served", str(source), "--out", str(tmp_path / "a"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document) == {"verdict", "out", "changes", "reason"} and document["verdict"] == "repaired"
    assert main(["repair", config, "--served", str(tmp_path / "a"), "--out", str(tmp_path / "b")]) == 0
    assert "already serves the declared table; nothing written" in capsys.readouterr().out
    assert not (tmp_path / "b").exists()
    betas = ARTIFACTS / "gguf_llama_yarn_betas"
    assert main(["repair", str(betas / "config.json"), "--served", str(betas / "model.gguf"), "--out",
                 str(tmp_path / "c.gguf")]) == 1
    assert "not repairable: yarn betas 16/2" in capsys.readouterr().out


def test_audit_says_whether_repair_can_fix_it(capsys: pytest.CaptureFixture[str]) -> None:
    for name, repairable in (("onnx_llama_linear", True), ("gguf_phi3_longrope", False),
                             ("graph_optimum_phi3_longrope", False)):
        folder = ARTIFACTS / name
        main(["audit", str(folder / "config.json"), "--served", str(_served(name)), "--json"])
        document = json.loads(capsys.readouterr().out)
        assert document["repairable"] is repairable, name
        assert document["layers"]["full_attention"]["repairable"] is repairable
        assert document["layers"]["full_attention"]["repairable_reason"]


# ---- hostile inputs: exit 2, the original untouched, nothing left behind ------------------------------------


def _cli(*args: str) -> int:
    source = ARTIFACTS / "onnx_llama_linear"
    return main(["repair", str(source / "config.json"), "--served", *args])


def test_hostile_paths_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = ARTIFACTS / "onnx_llama_linear"
    (tmp_path / "exists").mkdir()
    assert _cli(str(source), "--out", str(tmp_path / "exists")) == 2
    assert "exists; repair never overwrites" in capsys.readouterr().err
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    assert _cli(str(copy), "--out", str(copy / "inside")) == 2
    assert "is inside the artifact" in capsys.readouterr().err
    link = tmp_path / "link"
    link.symlink_to(source, target_is_directory=True)
    assert _cli(str(link), "--out", str(tmp_path / "x")) == 2
    assert "is a symlink" in capsys.readouterr().err
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + os.urandom(64))
    assert _cli(str(garbage), "--out", str(tmp_path / "y.gguf")) == 2
    assert "not a readable GGUF" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "exists", "garbage.gguf", "link"]


def test_a_full_disk_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copy2", full)
    assert _cli(str(ARTIFACTS / "onnx_llama_linear"), "--out", str(tmp_path / "out")) == 2
    assert "No space left on device; nothing was written" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ---- the proof on outputs ----------------------------------------------------------------------------------


def _pack_logits(pack: Path, ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(pack / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    for value in session.get_inputs():
        if value.name.startswith("past_key_values"):
            heads, width = value.shape[1], 32
            feeds[value.name] = np.zeros((1, heads, 0, width), dtype=np.float32)
    logits: np.ndarray[Any, Any] = session.run(["logits"], feeds)[0]
    return logits


@pytest.mark.parametrize("name", ["onnx_llama_linear", "onnx_llama_yarn", "onnx_qwen2_yarn"])
def test_repaired_packs_give_transformers_logits_where_the_originals_do_not(tmp_path: Path, name: str) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'ropekit[torch]'")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    source = ARTIFACTS / name
    model = ropekit.load(source / "config.json")
    assert repair(model, source, tmp_path / "fixed").verdict == "repaired"
    ids = np.random.default_rng(0).integers(3, 96, size=(1, 240)).astype(np.int64)  # past the original context
    reference = transformers.AutoModelForCausalLM.from_pretrained(source / "checkpoint").eval()
    with torch.no_grad():
        want = reference(torch.as_tensor(ids)).logits.numpy()
    before = np.abs(_pack_logits(source, ids) - want)[0, -64:].max()
    after = np.abs(_pack_logits(tmp_path / "fixed", ids) - want)[0, -64:].max()
    assert after < 1e-5, (before, after)  # float32 noise: the repaired pack is the model
    assert before > 1000 * after and before > 1e-4, (before, after)  # the original is measurably another model
