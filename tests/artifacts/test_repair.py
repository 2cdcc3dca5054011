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
import stat
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
from tests.support import ARTIFACTS, flat_artifacts

EXPECTED: dict[str, tuple[str, str]] = {
    "onnx_llama_linear": ("repaired", ""),
    "onnx_llama_yarn": ("repaired", ""),
    "onnx_qwen2_yarn": ("repaired", ""),
    "onnx_qwen3_yarn": ("repaired", ""),
    "onnx_llama_yarn_theta5e5": ("repaired", ""),
    "onnx_smollm3_nope_dml": ("repaired", ""),
    "gguf_seed_llama32_no_rope_freqs": ("repaired", ""),
    "gguf_qwen2_yarn_keys": ("repaired", ""),
    "gguf_stablelm_base": ("repaired", ""),
    "gguf_gptneox_keys": ("repaired", ""),
    "gguf_llama_yarn_betas": ("not_repairable", "loader ignores the file's betas"),
    "gguf_phi3_longrope": ("not_repairable", "picks one factor set by n_ctx"),
    "gguf_gpt_oss_yarn": ("not_repairable", "ggml always truncates yarn's correction range"),
    "gguf_smollm3_all_rope": ("not_repairable", "applies no RoPE in llama.cpp"),
    "gguf_llama4_all_rope": ("not_repairable", "applies no RoPE in llama.cpp"),
    "gguf_qwen2vl_qwen3vl_fourth": ("not_repairable", "puts pairs [13, 14] of the declared sections [8, 4, 4] on its "
                                    "fourth position stream"),
    "graph_optimum_phi3_longrope": ("not_repairable", "the rotary is computed in the graph"),
    "graph_optimum_phi3_longrope_256": ("not_repairable", "the rotary is computed in the graph"),
    "pte_llama32_as_llama31": ("not_repairable", "an ExecuTorch program's constants are not rewritten"),
}


def _served(name: str) -> Path:
    folder = ARTIFACTS / name
    return next((folder / file for file in ("model.gguf", "model.pte") if (folder / file).exists()), folder)


def _digest(path: Path) -> str:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return hashlib.sha256(b"".join(item.read_bytes() for item in files if item.is_file())).hexdigest()


def _out(tmp_path: Path, name: str) -> Path:
    suffix = _served(name).suffix
    return tmp_path / (f"{name}{suffix}" if suffix in (".gguf", ".pte") else name)


def _audit_json(config: Path, served: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    status = main(["audit", str(config), "--served", str(served), "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert status == (0 if document["verdict"] == "match" else 1)
    return document


@pytest.mark.parametrize("name", flat_artifacts())  # the stacks' repairs: test_openvino.py, test_genie.py
def test_every_committed_artifact_is_repaired_left_alone_or_refused_by_name(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict, words = EXPECTED.get(name, ("unchanged", ""))
    model = ropekit.load(ARTIFACTS / name / "config.json")
    document = _audit_json(ARTIFACTS / name / "config.json", _served(name), capsys)
    before = _digest(_served(name))
    out = _out(tmp_path, name)
    result = repair(model, _served(name), out)
    assert (result.verdict, words in result.reason) == (verdict, True), result.reason
    assert _digest(_served(name)) == before  # the original is never touched
    assert [p.name for p in tmp_path.iterdir()] == ([out.name] if verdict == "repaired" else [])  # no leftovers
    if verdict == "repaired":
        assert result.out == str(out) and result.changes
        assert audit_artifact(model, read_artifact(out)).to_json()["verdict"] == "match"
    # audit's prediction is repair's verdict, for every mismatching artifact
    assert (document["verdict"] == "mismatch") == (verdict != "unchanged")
    if document["verdict"] == "mismatch":
        assert document["repairable"] is (verdict == "repaired"), document["repairable_reason"]
        mismatching = [layer for layer in document["layers"].values() if layer["verdict"] == "mismatch"]
        assert mismatching and all(layer["repairable"] is (verdict == "repaired") for layer in mismatching)
        if verdict == "not_repairable":
            assert result.reason in document["repairable_reason"]
    else:
        assert "repairable" not in document


@pytest.mark.parametrize("name", ["onnx_qwen3_yarn", "onnx_llama_yarn_theta5e5"])
def test_a_rewritten_yarn_cache_within_float32_is_repaired(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """#33: builder packs with yarn (Qwen3 at base 1e6 with betas 32/1, Llama at factor 40) were refused with
    'the rewritten copy still does not serve the declared table: an unidentified table (max difference 1.5e-07)'.
    The copy is right within float32: a cache times an attention factor is rounded twice. The repair's verdict is
    the audit's (the CLI, on the written copy), and both call it a match."""
    config = ARTIFACTS / name / "config.json"
    status = main(["repair", str(config), "--served", str(ARTIFACTS / name), "--out", str(tmp_path / "fixed")])
    out = capsys.readouterr().out
    assert status == 0 and out.startswith(f"repaired: wrote {tmp_path / 'fixed'}; it audits as match"), out
    document = _audit_json(config, tmp_path / "fixed", capsys)
    assert document["verdict"] == "match"
    (table,) = document["layers"]["full_attention"]["tables"]
    (comparison,) = table["comparisons"]
    eps = float(np.finfo(np.float32).eps)
    assert eps < comparison["max_cache_error"] < 2 * eps  # over one float32 epsilon, within two roundings
    assert comparison["declared_attention_factor"] > 1.1


def test_a_traced_longrope_export_the_audit_calls_a_mismatch_is_never_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#33: optimum-onnx traced Phi-3's rotary with its short factors frozen. With an original context of 256 (past
    the default evaluation length 64), 'ropekit audit' said MISMATCH above 256 positions while 'ropekit repair' read
    the graph at 64 positions only and said 'unchanged: it already serves the declared table' (exit 0). Both now read
    it the one way (both sides of the switch): a mismatch, and repair refuses it by name (exit 1)."""
    name = "graph_optimum_phi3_longrope_256"
    config, served = ARTIFACTS / name / "config.json", ARTIFACTS / name
    document = _audit_json(config, served, capsys)
    assert document["verdict"] == "mismatch" and document["repairable"] is False
    assert document["artifact"]["engine"]["graph_rotary"].endswith("evaluated with onnxruntime at [256, 257] positions")
    verdicts = [table["verdict"] for table in document["layers"]["full_attention"]["tables"]]
    assert verdicts == ["match", "mismatch"]  # the short factors, frozen: right at 256, wrong at 257
    status = main(["repair", str(config), "--served", str(served), "--out", str(tmp_path / "fixed")])
    out = capsys.readouterr().out
    assert status == 1 and out.startswith("not repairable: the rotary is computed in the graph"), out
    assert not (tmp_path / "fixed").exists()


@pytest.mark.parametrize(("flags", "audits"), [([], 1), (["--rtol", "0.01"], 2), (["--layer-type", "full_attention"], 2)])
def test_ropekit_audit_computes_the_audit_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str], audits: int
) -> None:
    """#33: 'ropekit audit' audited twice (repairable re-audited). With the default tolerances over every layer type
    the audit it prints is the one repair decides from; other tolerances or one layer type need repair's own."""
    import ropekit.artifacts.audit as audit_module
    import ropekit.artifacts.repair.decide as decide

    calls: list[str] = []
    real = audit_module.audit_artifact

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append("audit")
        return real(*args, **kwargs)

    monkeypatch.setattr(audit_module, "audit_artifact", counted)
    monkeypatch.setattr(decide, "audit_artifact", counted)
    name = "onnx_qwen3_yarn"
    status = main(["audit", str(ARTIFACTS / name / "config.json"), "--served", str(ARTIFACTS / name), "--json", *flags])
    document = json.loads(capsys.readouterr().out)
    assert status == 1 and document["repairable"] is True
    assert len(calls) == audits


def test_ropekit_repair_decides_from_the_audit_it_made_and_never_reaudits_the_original(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """#33: 'ropekit repair' audits the original once (the command's audit) and the plan is made from
    that report; the only other audits are the written copy's, staged and moved, by the audit itself."""
    import ropekit.artifacts.audit as audit_module
    from ropekit.artifacts.repair import decide, run

    real = audit_module.audit_artifact
    audited: list[str] = []

    def counted(model: Any, artifact: Any, **kwargs: Any) -> Any:
        audited.append(str(artifact.path))
        return real(model, artifact, **kwargs)

    for module in (audit_module, decide, run):
        monkeypatch.setattr(module, "audit_artifact", counted)
    import ropekit.cli.commands  # noqa: F401  (imports audit_artifact on first use, from the patched module)

    name = "onnx_llama_linear"
    out = tmp_path / "fixed"
    status = main(["repair", str(ARTIFACTS / name / "config.json"), "--served", str(ARTIFACTS / name), "--out",
                   str(out), "--json"])
    assert status == 0 and json.loads(capsys.readouterr().out)["verdict"] == "repaired"
    original = [path for path in audited if str(ARTIFACTS / name) in path]
    copies = [path for path in audited if str(tmp_path) in path]
    assert len(original) == 1  # the command's one audit, which repair decided from
    assert len(copies) == 2  # the staged copy and the moved one, judged by the audit itself
    assert copies[-1] == str(out / "model.onnx")


def test_repair_given_a_report_audits_only_the_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ropekit.artifacts.read import read_for_audit
    from ropekit.artifacts.repair import run

    source = ARTIFACTS / "onnx_llama_linear"
    model = ropekit.load(source / "config.json")
    report = audit_artifact(model, read_for_audit(model, source))
    assert report.verdict == "mismatch" and report.served is not None
    real = audit_artifact
    audited: list[str] = []

    def counted(model: Any, artifact: Any, **kwargs: Any) -> Any:
        audited.append(str(artifact.path))
        return real(model, artifact, **kwargs)

    monkeypatch.setattr(run, "audit_artifact", counted)
    result = repair(model, source, tmp_path / "fixed", report=report)
    assert result.verdict == "repaired"
    assert all(str(tmp_path) in path for path in audited) and len(audited) == 2
    narrowed = audit_artifact(model, read_for_audit(model, source), rtol=0.01)
    with pytest.raises(ropekit.ArgumentError, match="default tolerances"):
        repair(model, source, tmp_path / "other", report=narrowed)


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
    layers = audit_artifact(ropekit.load(source / "config.json"), read_artifact(tmp_path / "fixed")).to_json()["artifact"]
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


# ---- audit's prediction is repair's verdict on packs and files made wrong in other ways ----------------------


def _pack_copy(tmp_path: Path, name: str = "onnx_llama_linear") -> Path:
    copy = tmp_path / "pack"
    shutil.copytree(ARTIFACTS / name, copy, ignore=shutil.ignore_patterns("checkpoint"))
    return copy


def _interleaved(tmp_path: Path) -> tuple[Path, Path]:
    import onnx

    pack = _pack_copy(tmp_path)
    proto = onnx.load(str(pack / "model.onnx"), load_external_data=False)
    for node in proto.graph.node:
        for attribute in node.attribute:
            if attribute.name == "rotary_interleaved":
                attribute.i = 1
    onnx.save(proto, str(pack / "model.onnx"))
    return pack / "config.json", pack


def _narrow(tmp_path: Path) -> tuple[Path, Path]:
    import onnx

    pack = _pack_copy(tmp_path)
    proto = onnx.load(str(pack / "model.onnx"))
    for tensor in proto.graph.initializer:
        if tensor.name in ("cos_cache", "sin_cache"):
            tensor.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor)[:, :8].copy(), tensor.name))
    (pack / "model.onnx.data").unlink()
    onnx.save_model(proto, str(pack / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=0)
    return pack / "config.json", pack


def _config(tmp_path: Path, name: str, **changes: Any) -> Path:
    config = json.loads((ARTIFACTS / name / "config.json").read_text())
    config.update(changes)
    config = {key: value for key, value in config.items() if value is not None}  # None: the key dropped
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def _longrope_single_cache(tmp_path: Path) -> tuple[Path, Path]:
    scaling = {"rope_type": "longrope", "original_max_position_embeddings": 64, "short_factor": [1.0] * 16,
               "long_factor": [4.0] * 16}
    return _config(tmp_path, "onnx_llama_linear", rope_scaling=scaling), ARTIFACTS / "onnx_llama_linear"


def _nope_on_gqa(tmp_path: Path) -> tuple[Path, Path]:
    config = _config(tmp_path, "onnx_llama_linear", model_type="smollm3", architectures=["SmolLM3ForCausalLM"],
                     no_rope_layers=[0], hidden_act="silu")
    return config, ARTIFACTS / "onnx_llama_linear"


def _gemma3_local_base(tmp_path: Path) -> tuple[Path, Path]:
    return _config(tmp_path, "gguf_gemma3", rope_local_base_freq=20000.0), _served("gguf_gemma3")


def _gemma3_local_scaled(tmp_path: Path) -> tuple[Path, Path]:
    layer_types = ["sliding_attention"] * 5 + ["full_attention"]
    scaling = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
               "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}
    config = _config(tmp_path, "gguf_gemma3", layer_types=layer_types, rope_parameters=scaling, rope_scaling=None,
                     rope_theta=None, rope_local_base_freq=None)
    return config, _served("gguf_gemma3")


def _longrope_factors(name: str) -> Any:
    def build(tmp_path: Path) -> tuple[Path, Path]:  # other factors than the pack's: both regimes recomputed
        config = json.loads((ARTIFACTS / name / "config.json").read_text())
        scaling = config.get("rope_scaling") or config["rope_parameters"]
        scaling["long_factor"] = [factor * 1.5 for factor in scaling["long_factor"]]
        scaling["short_factor"] = [factor * 1.1 for factor in scaling["short_factor"]]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config))
        return path, ARTIFACTS / name

    return build


def _single_onnx(tmp_path: Path) -> tuple[Path, Path]:
    return ARTIFACTS / "onnx_smollm3_nope_dml" / "config.json", ARTIFACTS / "onnx_smollm3_nope_dml" / "model.onnx"


VARIANTS = {
    "interleaved pairing": (_interleaved, "not_repairable", "layer 0: it pairs channels interleaved (gptj)"),
    "cache of another width": (_narrow, "not_repairable", "a cache of another width is not rewritten"),
    "one longrope cache": (_longrope_single_cache, "not_repairable", "no If branch (small/large)"),
    "NoPE layer on GroupQueryAttention": (_nope_on_gqa, "repaired", "wrote"),
    "Gemma-3 sliding base": (_gemma3_local_base, "repaired", "wrote"),
    "Gemma-3 sliding scaling": (_gemma3_local_scaled, "not_repairable", "with freq_scale 1"),
    "single .onnx with external data": (_single_onnx, "repaired", "wrote"),
    "longrope If branches": (_longrope_factors("onnx_phi3_longrope"), "repaired", "wrote"),
    "longrope DirectML concatenation": (_longrope_factors("onnx_phi3_longrope_dml_fp16"), "repaired", "wrote"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_audit_predicts_exactly_what_repair_does(tmp_path: Path, variant: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    build, verdict, words = VARIANTS[variant]
    config, served = build(tmp_path)
    document = _audit_json(config, served, capsys)
    out = tmp_path / ("fixed" + served.suffix)
    result = repair(ropekit.load(config), served, out)
    assert (result.verdict, words in result.reason) == (verdict, True), result.reason
    assert document["verdict"] == "mismatch" and document["repairable"] is (verdict == "repaired")
    if verdict == "not_repairable":
        assert result.reason in document["repairable_reason"] and not out.exists()
        assert result.reason.count("layer 0") <= 1  # named once, not "layer 0: layer 0:"
    else:
        assert audit_artifact(ropekit.load(config), read_artifact(out)).to_json()["verdict"] == "match"


def test_a_nope_layer_on_group_query_attention_turns_its_do_rotary_off_and_nothing_else(tmp_path: Path) -> None:
    import onnx

    config, served = _nope_on_gqa(tmp_path)
    result = repair(ropekit.load(config), served, tmp_path / "fixed")
    assert [c["change"] for c in result.changes if "change" in c] == ["rotation removed (a NoPE layer)"]
    attributes = {node.name: {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
                  for node in onnx.load(str(tmp_path / "fixed" / "model.onnx")).graph.node}
    before = {node.name: {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
              for node in onnx.load(str(served / "model.onnx")).graph.node}
    attention = "/model/layers.0/attn/GroupQueryAttention"
    assert (before[attention]["do_rotary"], attributes[attention]["do_rotary"]) == (1, 0)
    assert {name: value for name, value in attributes.items() if name != attention} == \
        {name: value for name, value in before.items() if name != attention}


def test_gemma3_sliding_layers_get_their_base_through_freq_base_swa(tmp_path: Path) -> None:
    import gguf

    config, served = _gemma3_local_base(tmp_path)
    out = tmp_path / "fixed.gguf"
    result = repair(ropekit.load(config), served, out)
    assert [(c["layer_type"], c["what"], c["keys"]) for c in result.changes] == [
        ("sliding_attention", "rope.freq_base_swa", {"rope.freq_base_swa": 20000.0})]
    old, new = gguf.GGUFReader(served), gguf.GGUFReader(out)
    fields = {k: f.contents() for k, f in new.fields.items() if not k.startswith("GGUF.")}
    kept = {k: f.contents() for k, f in old.fields.items() if not k.startswith("GGUF.")}
    assert (kept.pop("gemma3.rope.freq_base_swa"), fields.pop("gemma3.rope.freq_base_swa")) == (10000.0, 20000.0)
    assert fields == kept  # every other key as it was
    assert [(t.name, t.data.tobytes()) for t in new.tensors] == [(t.name, t.data.tobytes()) for t in old.tensors]
    engine = read_artifact(out).engine
    assert (engine["freq_base_swa"], engine["caches"]["swa"]["freq_scale"]) == (20000.0, 1.0)


def test_a_yarn_gguf_gets_the_declared_magnitude_through_attn_factor(tmp_path: Path) -> None:
    name = "gguf_qwen2_yarn_keys"
    model = ropekit.load(ARTIFACTS / name / "config.json")
    result = repair(model, _served(name), tmp_path / "fixed.gguf")
    magnitude = next(c for c in result.changes if c["what"] == "rope.scaling.attn_factor")
    assert "multiplies every rope type's cos/sin by rope.scaling.attn_factor times its own yarn magnitude" in \
        magnitude["change"]
    served = read_artifact(tmp_path / "fixed.gguf").tables[0].magnitude
    assert served == pytest.approx(model.table.attention_factor, rel=1e-6) and model.table.attention_factor == 1.2


# ---- a single .onnx with external data: the copy gets its own data file --------------------------------------


def test_a_single_onnx_is_copied_with_its_own_external_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx

    pack = _pack_copy(tmp_path)
    os.chmod(pack / "model.onnx.data", 0o640)
    before = _digest(pack)
    config = ARTIFACTS / "onnx_llama_linear" / "config.json"
    elsewhere = tmp_path / "t1"
    elsewhere.mkdir()
    for out in (elsewhere / "fixed.onnx", pack / "fixed.onnx"):  # another folder, and beside the original
        assert main(["repair", str(config), "--served", str(pack / "model.onnx"), "--out", str(out)]) == 0
        assert "repaired: wrote" in capsys.readouterr().out
        data = out.parent / "fixed.onnx.data"
        locations = {entry.value for tensor in onnx.load(str(out), load_external_data=False).graph.initializer
                     for entry in tensor.external_data if entry.key == "location"}
        assert locations == {"fixed.onnx.data"}  # never the original's model.onnx.data
        assert (stat.S_IMODE(os.stat(data).st_mode), stat.S_IMODE(os.stat(out).st_mode)) == (0o640, 0o644)
        assert main(["audit", str(config), "--served", str(out)]) == 0
        capsys.readouterr()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["fixed.onnx", "fixed.onnx.data"]
    (pack / "fixed.onnx").unlink()
    (pack / "fixed.onnx.data").unlink()
    assert _digest(pack) == before
    assert main(["repair", str(config), "--served", str(pack / "model.onnx"), "--out", str(tmp_path / "x")]) == 2
    assert "the copy of" in capsys.readouterr().err and not (tmp_path / "x").exists()
    (tmp_path / "y.onnx.data").write_bytes(b"someone's")
    assert main(["repair", str(config), "--served", str(pack / "model.onnx"), "--out", str(tmp_path / "y.onnx")]) == 2
    assert "y.onnx.data exists" in capsys.readouterr().err
    assert (tmp_path / "y.onnx.data").read_bytes() == b"someone's" and not (tmp_path / "y.onnx").exists()


def test_a_repaired_pack_keeps_its_file_modes(tmp_path: Path) -> None:
    pack = _pack_copy(tmp_path)
    os.chmod(pack / "model.onnx", 0o640)
    os.chmod(pack / "model.onnx.data", 0o604)
    assert repair(ropekit.load(pack / "config.json"), pack, tmp_path / "fixed").verdict == "repaired"
    modes = {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in (tmp_path / "fixed").iterdir()}
    assert modes == {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in pack.iterdir()}
    gguf_copy = tmp_path / "source.gguf"
    shutil.copy(_served("gguf_stablelm_base"), gguf_copy)
    os.chmod(gguf_copy, 0o640)
    model = ropekit.load(ARTIFACTS / "gguf_stablelm_base" / "config.json")
    assert repair(model, gguf_copy, tmp_path / "fixed.gguf").verdict == "repaired"
    assert stat.S_IMODE(os.stat(tmp_path / "fixed.gguf").st_mode) == 0o640


def test_the_copy_is_audited_again_after_the_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ropekit.artifacts import files as repair_files
    from ropekit.artifacts.repair import run as repair_run

    moved = repair_files.publish

    def lossy(moves: list[tuple[str, str]]) -> None:  # a move that lost the external data
        moved(moves)
        os.unlink(moves[0][1])

    monkeypatch.setattr(repair_run, "publish", lossy)
    source = ARTIFACTS / "onnx_llama_linear" / "model.onnx"
    result = repair(ropekit.load(ARTIFACTS / "onnx_llama_linear" / "config.json"), source, tmp_path / "fixed.onnx")
    assert result.verdict == "not_repairable" and result.out is None
    assert f"the copy moved to {tmp_path / 'fixed.onnx'}" in result.reason and "it was removed" in result.reason
    assert list(tmp_path.iterdir()) == []


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
    garbage.write_bytes(b"GGUF" + b"\xff" * 64)  # version 0xffffffff: never a readable GGUF
    assert _cli(str(garbage), "--out", str(tmp_path / "y.gguf")) == 2
    assert "not a GGUF llama.cpp would load: header version: 4294967295" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "exists", "garbage.gguf", "link"]


def test_a_full_disk_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copy2", full)
    assert _cli(str(ARTIFACTS / "onnx_llama_linear"), "--out", str(tmp_path / "out")) == 2
    assert "No space left on device; nothing was written" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_folder_symlink_or_a_fifo_inside_a_pack_is_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the pack's")
    pack = _pack_copy(tmp_path)
    (pack / "extra").symlink_to(outside, target_is_directory=True)
    assert _cli(str(pack), "--out", str(tmp_path / "fixed")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{pack / 'extra'} is a symlink; give a pack of plain files and folders" in err
    (pack / "extra").unlink()
    os.mkfifo(pack / "pipe")
    assert _cli(str(pack), "--out", str(tmp_path / "fixed")) == 2
    assert f"{pack / 'pipe'} is not a regular file or folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "pack"]


def test_an_out_that_appears_meanwhile_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from ropekit.artifacts.repair import run as repair_run

    checked = repair_run._verify

    def racing(model: Any, path: str, n_ctx: int | None, what: str) -> None:
        checked(model, path, n_ctx, what)
        if not (tmp_path / "out").exists():  # someone creates --out (empty) while the copy is written
            (tmp_path / "out").mkdir()

    monkeypatch.setattr(repair_run, "_verify", racing)
    assert _cli(str(ARTIFACTS / "onnx_llama_linear"), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'out'} appeared while the copy was written" in err
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("error", [ValueError("bad\nvalue"), KeyError("location"), RuntimeError("protobuf")])
def test_an_error_while_rewriting_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], error: Exception) -> None:
    import onnx

    def broken(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.setattr(onnx, "save_model", broken)
    assert _cli(str(ARTIFACTS / "onnx_llama_linear"), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ropekit: error: --served: ")
    assert f"cannot be rewritten: {type(error).__name__}: " in err and "; nothing was written" in err
    assert list(tmp_path.iterdir()) == []


def test_an_unparsable_onnx_is_refused_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = _pack_copy(tmp_path)
    (pack / "model.onnx").write_bytes(b"\x08\x07" + b"\x0f" * 64)  # wire type 7: never a protobuf (random bytes sometimes were)
    assert _cli(str(pack), "--out", str(tmp_path / "fixed")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable ONNX model" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]


# ---- the proof on outputs ----------------------------------------------------------------------------------


def _pack_logits(pack: Path, ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(pack / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    for value in session.get_inputs():
        if value.name == "position_ids":  # the DML layout feeds positions (its RotaryEmbedding nodes read them)
            feeds[value.name] = np.arange(ids.shape[1], dtype=np.int64)[None]
        elif value.name.startswith("past_key_values"):
            heads, width = value.shape[1], 32
            dtype = np.float16 if value.type == "tensor(float16)" else np.float32
            feeds[value.name] = np.zeros((1, heads, 0, width), dtype=dtype)
    logits: np.ndarray[Any, Any] = session.run(["logits"], feeds)[0]
    return logits.astype(np.float32)


PROOF = {  # pack: (tokens, first compared position), every compared position past the original context
    "onnx_llama_linear": (256, 64),  # linear 4 over a 256-row cache: trained on 64 positions
    "onnx_llama_yarn": (600, 256),  # yarn: original_max_position_embeddings 256
    "onnx_qwen2_yarn": (600, 256),
}


@pytest.mark.parametrize("name", sorted(PROOF))
def test_repaired_packs_give_transformers_logits_where_the_originals_do_not(tmp_path: Path, name: str) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'ropekit[torch]'")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    source = ARTIFACTS / name
    model = ropekit.load(source / "config.json")
    tokens, first = PROOF[name]
    original = model.table.params.get("original_max_position_embeddings") or tokens // 4
    assert first >= original and tokens <= (model.table.geometry.max_position_embeddings or 0)
    assert repair(model, source, tmp_path / "fixed").verdict == "repaired"
    ids = np.random.default_rng(0).integers(3, 96, size=(1, tokens)).astype(np.int64)
    reference = transformers.AutoModelForCausalLM.from_pretrained(source / "checkpoint").eval()
    with torch.no_grad():
        want = reference(torch.as_tensor(ids)).logits.numpy()
    before = np.abs(_pack_logits(source, ids) - want)[0, first:].max()
    after = np.abs(_pack_logits(tmp_path / "fixed", ids) - want)[0, first:].max()
    assert after < 1e-5, (before, after)  # float32 noise: the repaired pack is the model
    assert before > 1000 * after and before > 5e-4, (before, after)  # the original is measurably another model


def test_a_repaired_nope_layer_gives_transformers_logits_where_the_original_does_not(tmp_path: Path) -> None:
    """SmolLM3's layer 3 is NoPE; the DML fp16 pack rotates it. Every position but 0 (where the rotation is the
    identity) is affected, so all 256 rows of the cache are compared, against transformers in float32."""
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: pip install 'ropekit[onnx]'")
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install 'ropekit[torch]'")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    source = ARTIFACTS / "onnx_smollm3_nope_dml"
    model = ropekit.load(source / "config.json")
    tokens = model.rotating_table().geometry.max_position_embeddings or 0
    assert tokens == 256 and repair(model, source, tmp_path / "fixed").verdict == "repaired"
    ids = np.random.default_rng(0).integers(3, 96, size=(1, tokens)).astype(np.int64)
    reference = transformers.AutoModelForCausalLM.from_pretrained(source / "checkpoint").eval()
    with torch.no_grad():
        want = reference(torch.as_tensor(ids)).logits.numpy()
    before = np.abs(_pack_logits(source, ids) - want)[0].max()
    after = np.abs(_pack_logits(tmp_path / "fixed", ids) - want)[0].max()
    assert after < 1e-2, (before, after)  # float16 noise (logits up to ~3.6, a float16 step there is 2e-3)
    assert before > 20 * after and before > 0.1, (before, after)  # the original rotates a NoPE layer


def test_swapped_mrope_sections_are_rewritten_and_a_composition_is_refused(tmp_path: Path) -> None:
    import gguf

    source = tmp_path / "swapped.gguf"
    shutil.copy(_served("gguf_qwen2vl_sections"), source)
    field = gguf.GGUFReader(str(source), "r+").fields["qwen2vl.rope.dimension_sections"]
    for index, value in zip(field.data, [6, 6, 4, 0], strict=True):
        field.parts[index][0] = value
    model = ropekit.load(ARTIFACTS / "gguf_qwen2vl_sections" / "config.json")
    from ropekit.artifacts.repair import annotate

    document = annotate(model, audit_artifact(model, read_artifact(source))).to_json()
    assert document["verdict"] == "mismatch" and document["repairable"] is True
    result = repair(model, source, tmp_path / "fixed.gguf")
    assert result.verdict == "repaired"
    assert [change["keys"] for change in result.changes] == [{"rope.dimension_sections": [4, 6, 6, 0]}]
    fixed = gguf.GGUFReader(str(tmp_path / "fixed.gguf"))
    assert fixed.fields["qwen2vl.rope.dimension_sections"].contents() == [4, 6, 6, 0]
    assert len(fixed.tensors) == len(gguf.GGUFReader(str(source)).tensors)
    assert audit_artifact(model, read_artifact(tmp_path / "fixed.gguf")).to_json()["verdict"] == "match"
    config = json.loads((ARTIFACTS / "gguf_qwen2vl_qwen3vl" / "config.json").read_text())
    config["text_config"].update(rope_theta=1000000.0)
    config["text_config"]["rope_scaling"]["mrope_section"] = [4, 6, 6]
    (tmp_path / "config.json").write_text(json.dumps(config))
    interleaved = ropekit.load(tmp_path / "config.json")
    refused = repair(interleaved, _served("gguf_qwen2vl_sections"), tmp_path / "no.gguf")
    assert refused.verdict == "not_repairable" and not (tmp_path / "no.gguf").exists()
    assert "llama.cpp's qwen2vl always composes consecutive sections" in refused.reason
    document = audit_artifact(interleaved, read_artifact(_served("gguf_qwen2vl_sections"))).to_json()
    assert annotate(interleaved, audit_artifact(interleaved, read_artifact(_served("gguf_qwen2vl_sections")))).repairable is False
