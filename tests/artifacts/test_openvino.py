"""OpenVINO IRs exported by optimum-intel (``scripts/artifacts/openvino_export.py``): read from the
``.xml`` and ``.bin`` without OpenVINO, each rotary attached to the layers reading it, judged against
the checkpoint's config and against the one optimum-intel saved beside the IR; repaired by rewriting
the rope constants' bytes in a copy; dynamic NTK (frozen at trace time) refused by name. Longrope's
switch is evaluated with OpenVINO (the ``openvino`` extra)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.artifacts.audit import audit_artifact
from ropekit.artifacts.formats.openvino.ir import find_rotaries, read_graph
from ropekit.artifacts.read import read_artifact, read_for_audit
from ropekit.artifacts.repair import annotate
from ropekit.cli.main import main
from tests.support import ARTIFACTS

IR = ARTIFACTS / "openvino"
CASES = sorted(path.name for path in IR.iterdir() if path.is_dir())
HAS_OPENVINO = importlib.util.find_spec("openvino") is not None
needs_openvino = pytest.mark.skipif(not HAS_OPENVINO, reason="openvino is not installed: pip install 'ropekit[openvino]'")
FROZEN = "plain RoPE baked at the trace length; wrong beyond max_position_embeddings (64)"


def _audit(config: Path, served: Path) -> dict[str, Any]:
    model = ropekit.load(config)
    return annotate(model, audit_artifact(model, read_for_audit(model, served))).to_json()


def test_the_committed_cases() -> None:
    assert CASES == ["gemma3", "llama3", "llama_default", "llama_dynamic", "llama_linear", "llama_yarn",
                     "phi3_longrope"]
    manifest = json.loads((IR / "MANIFEST.json").read_text())
    assert sorted(manifest["cases"]) == CASES
    for name in CASES:  # what optimum-intel wrote, measured against transformers on the same weights
        errors = manifest["cases"][name]["max_abs_logit_error"]
        below, beyond = (errors[key] for key in sorted(errors, key=int))
        assert below < 1e-5
        assert (beyond > 1e-4) is (name == "llama_dynamic")


@pytest.mark.parametrize("name", CASES)
def test_checkpoint_config_verdicts(name: str) -> None:
    if name == "phi3_longrope" and not HAS_OPENVINO:
        pytest.skip("openvino is not installed: pip install 'ropekit[openvino]'")
    found = _audit(IR / name / "checkpoint_config.json", IR / name)
    assert found["artifact"]["kind"] == "openvino"
    if name == "llama_dynamic":
        assert found["verdict"] == "mismatch"
        assert FROZEN in found["layers"]["full_attention"]["served_as"]
        assert found["repairable"] is False
        assert "froze transformers' seq_len > 64 branch" in found["repairable_reason"]
    else:
        assert found["verdict"] == "match", json.dumps(found)[:2000]


def test_static_constants_read_without_openvino(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)
    artifact = read_artifact(IR / "llama_yarn" / "openvino_model.xml")
    (table,) = artifact.tables
    assert table.kind == "inv_freq" and table.values.shape == (16,)
    assert table.magnitude == pytest.approx(1.1386294, rel=1e-6)  # yarn's attention factor, a scalar Multiply
    assert table.layers == (0, 1)
    longrope = read_artifact(IR / "phi3_longrope")
    assert longrope.tables == ()
    assert "needs OpenVINO: pip install 'ropekit[openvino]'" in longrope.engine["refused"]


def test_gemma3_rotaries_attach_to_their_layers() -> None:
    graph = read_graph(str(IR / "gemma3"))
    rotaries = find_rotaries(graph)
    assert [rotary.layers for rotary in rotaries] == [(0,), (1,)]
    found = _audit(IR / "gemma3" / "checkpoint_config.json", IR / "gemma3")
    assert set(found["layers"]) == {"sliding_attention", "full_attention"}


@needs_openvino
def test_phi3_saved_config_trap() -> None:
    checkpoint = _audit(IR / "phi3_longrope" / "checkpoint_config.json", IR / "phi3_longrope")
    assert checkpoint["verdict"] == "match"
    assert any("judged against CONFIG" in flag and "max_position_embeddings 64 (CONFIG 256)" in flag
               for flag in checkpoint["flags"])
    saved = _audit(IR / "phi3_longrope" / "config.json", IR / "phi3_longrope")
    assert saved["verdict"] == "mismatch"
    assert "attention factor 1.1547 (declared 1)" in saved["layers"]["full_attention"]["served_as"]
    assert any("judged against the config.json saved beside the IR" in flag for flag in saved["flags"])
    assert saved["repairable"] is True
    evaluated = list(saved["layers"]["full_attention"]["tables"])
    assert [table["comparisons"][0]["declared"] for table in evaluated] == ["seq_len 64", "seq_len 65"]


def _changed_ranges(original: Path, repaired: Path) -> list[int]:
    before = np.frombuffer(original.read_bytes(), dtype=np.uint8)
    after = np.frombuffer(repaired.read_bytes(), dtype=np.uint8)
    assert before.shape == after.shape
    return [int(index) for index in np.flatnonzero(before != after)]


def _rope_bytes(folder: Path) -> set[int]:
    graph = read_graph(str(folder))
    found: set[int] = set()
    for rotary in find_rotaries(graph):
        for ref in rotary.constants():
            found.update(range(ref.offset, ref.offset + ref.size))
    return found


@needs_openvino
def test_repair_phi3_against_saved_config(tmp_path: Path) -> None:
    source = IR / "phi3_longrope"
    out = tmp_path / "fixed"
    code = main(["repair", str(source / "config.json"), "--served", str(source), "--out", str(out), "--json"])
    assert code == 0
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in source.iterdir())
    assert (out / "openvino_model.xml").read_bytes() == (source / "openvino_model.xml").read_bytes()
    changed = _changed_ranges(source / "openvino_model.bin", out / "openvino_model.bin")
    assert changed and set(changed) <= _rope_bytes(source)
    assert _audit(source / "config.json", out)["verdict"] == "match"


def test_repair_xml_writes_x_bin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = IR / "llama3" / "checkpoint_config.json"  # the linear IR against a llama3 declaration
    served = IR / "llama_linear" / "openvino_model.xml"
    assert main(["audit", str(config), "--served", str(served)]) == 1
    capsys.readouterr()
    out = tmp_path / "fixed.xml"
    assert main(["repair", str(config), "--served", str(served), "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "repaired" and result["out"] == str(out)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fixed.bin", "fixed.xml"]
    assert out.read_bytes() == served.read_bytes()
    changed = _changed_ranges(served.with_suffix(".bin"), tmp_path / "fixed.bin")
    assert changed and set(changed) <= _rope_bytes(IR / "llama_linear")
    assert main(["audit", str(config), "--served", str(out)]) == 0


def test_repair_rewrites_the_attention_factor(tmp_path: Path) -> None:
    config = json.loads((IR / "llama_yarn" / "checkpoint_config.json").read_text())
    config["rope_scaling"]["factor"] = 8.0
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "fixed"
    assert main(["repair", str(path), "--served", str(IR / "llama_yarn"), "--out", str(out)]) == 0
    table = read_artifact(out).tables[0]
    assert table.magnitude == pytest.approx(ropekit.load(path).table.attention_factor, rel=1e-6)


def test_repair_gemma3_rewrites_each_layer_types_constant(tmp_path: Path) -> None:
    config = json.loads((IR / "gemma3" / "checkpoint_config.json").read_text())
    config["rope_local_base_freq"] = 20000.0
    config["rope_scaling"]["factor"] = 4.0
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "fixed"
    assert main(["repair", str(path), "--served", str(IR / "gemma3"), "--out", str(out)]) == 0
    assert len(_changed_ranges(IR / "gemma3" / "openvino_model.bin", out / "openvino_model.bin")) > 0
    assert _audit(path, out)["verdict"] == "match"


@pytest.mark.parametrize(("config", "served", "says"), [
    ("llama_dynamic/checkpoint_config.json", "llama_dynamic", "OpenVINO IR cannot serve dynamic: the trace froze"),
    ("llama_yarn/checkpoint_config.json", "llama_linear",
     "OpenVINO IR cannot serve yarn: the graph applies no attention-factor Multiply"),
])
def test_refusals_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, served: str,
                                says: str) -> None:
    out = tmp_path / "fixed"
    code = main(["repair", str(IR / config), "--served", str(IR / served), "--out", str(out), "--json"])
    found = json.loads(capsys.readouterr().out)
    assert code == 1 and found["verdict"] == "not_repairable" and found["out"] is None
    assert says in found["reason"] and "ropekit export" in found["reason"]
    assert list(tmp_path.iterdir()) == []


def test_scan_audit_finds_the_ir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(IR / "llama_dynamic", tmp_path / "llama_dynamic")
    main(["scan", str(tmp_path), "--audit", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    audit = rows[0]["audit"]
    (result,) = [value for key, value in audit.items() if key.endswith("openvino_model.xml")]
    assert result["verdict"] == "mismatch" and result["repairable"] is False


def test_an_xml_without_its_bin_is_invalid_input(tmp_path: Path) -> None:
    shutil.copy(IR / "llama3" / "openvino_model.xml", tmp_path / "openvino_model.xml")
    code = main(["audit", str(IR / "llama3" / "checkpoint_config.json"), "--served", str(tmp_path / "openvino_model.xml")])
    assert code == 2
