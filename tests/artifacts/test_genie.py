"""Qualcomm Genie bundles: ``genie_config.json`` files written by qai-hub-models' own
``create_genie_config`` (``scripts/artifacts/genie_config.py``), read as the table Genie builds from
their keys, audited per layer type, repaired where Genie's schema can say the declared table (llama3's
block) and refused by name where it cannot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ropekit
from ropekit.artifacts.audit import audit_artifact
from ropekit.artifacts.read import read_artifact, read_for_audit
from ropekit.artifacts.repair import annotate
from ropekit.cli.main import main
from tests.support import ARTIFACTS

GENIE = ARTIFACTS / "genie"
EXPECTED: dict[str, tuple[str, str]] = {
    "llama_default": ("match", ""),
    "llama3": ("match", ""),
    "llama3_no_block": ("mismatch", "plain RoPE, rope_theta 500000 (the llama3 scaling dropped)"),
    "llama_linear": ("mismatch", "plain RoPE, rope_theta 10000 (the linear scaling dropped)"),
    "llama_yarn": ("mismatch", "plain RoPE, rope_theta 10000 (the yarn scaling dropped), attention factor 1 "
                               "(declared 1.13863)"),
    "llama_dynamic": ("mismatch", "plain RoPE, rope_theta 10000 (the dynamic scaling dropped)"),
    "phi35_longrope": ("mismatch", "plain RoPE, rope_theta 10000 (the longrope scaling dropped), attention factor 1"),
    "gemma3": ("mismatch", "the sliding_attention table (default)"),
    "phi4mini_partial": ("mismatch", "plain RoPE over rotary_dim 64 (declared 48"),
}
REFUSED = {"llama_linear": "no key for a linear factor", "llama_yarn": "no key for yarn's ramp and attention factor",
           "llama_dynamic": "no key for dynamic NTK's length-dependent base",
           "phi35_longrope": "no key for longrope's per-pair factors", "gemma3": "no key for per-layer bases",
           "phi4mini_partial": "no key saying which channels rotate"}


def _audit(name: str, served: Path | None = None) -> dict[str, Any]:
    model = ropekit.load(GENIE / name / "config.json")
    report = audit_artifact(model, read_for_audit(model, served or GENIE / name))
    return annotate(model, report).to_json()


def test_every_case_is_expected() -> None:
    assert sorted(path.name for path in GENIE.iterdir() if path.is_dir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict_names_what_genie_serves(name: str) -> None:
    verdict, served_as = EXPECTED[name]
    found = _audit(name)
    assert found["artifact"]["kind"] == "genie"
    assert found["verdict"] == verdict
    said = json.dumps(found)
    assert served_as in said
    if verdict == "mismatch":
        assert found["repairable"] is (name == "llama3_no_block")
        if name in REFUSED:
            assert REFUSED[name] in found["repairable_reason"]
            assert "Genie cannot serve" in found["repairable_reason"]
            assert "ropekit export" in found["repairable_reason"]


def test_the_file_and_its_folder_read_alike() -> None:
    folder = read_artifact(GENIE / "llama3")
    file = read_artifact(GENIE / "llama3" / "genie_config.json")
    assert folder.kind == file.kind == "genie"
    assert folder.engine["form"] == "positional-encoding"
    assert read_artifact(GENIE / "llama_linear").engine["form"] == "QnnHtp"
    assert (folder.tables[0].values == file.tables[0].values).all()


def test_the_file_is_recognised_by_its_content(tmp_path: Path) -> None:
    renamed = tmp_path / "bundle.json"
    renamed.write_bytes((GENIE / "llama3" / "genie_config.json").read_bytes())
    assert read_artifact(renamed).kind == "genie"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"dialog": {}}))
    with pytest.raises(ropekit.ArgumentError, match=r"no keys of an engine file; a \.json artifact is read by its "
                       r"keys: genie \(dialog\.engine\)"):
        read_artifact(other)  # no dialog.engine: not Genie's, and no other format reads a .json


def _rope_free(config: dict[str, Any]) -> dict[str, Any]:
    engine = config["dialog"]["engine"]
    engine["model"].pop("positional-encoding", None)
    for key in ("rope-theta", "pos-id-dim"):
        engine["backend"]["QnnHtp"].pop(key, None)
    return config


@pytest.mark.parametrize("as_folder", [False, True])
def test_repair_adds_llama3_block(tmp_path: Path, as_folder: bool) -> None:
    source = GENIE / "llama3_no_block"
    served = source if as_folder else source / "genie_config.json"
    out = tmp_path / ("fixed" if as_folder else "fixed.json")
    before = served.read_bytes() if not as_folder else (served / "genie_config.json").read_bytes()
    assert main(["repair", str(source / "config.json"), "--served", str(served), "--out", str(out), "--json"]) == 0
    written = out / "genie_config.json" if as_folder else out
    # what create_genie_config itself writes for the llama3 config, byte for byte
    assert written.read_bytes() == (GENIE / "llama3" / "genie_config.json").read_bytes()
    original = json.loads(before)
    assert _rope_free(json.loads(written.read_text())) == _rope_free(original)
    assert (served.read_bytes() if not as_folder else (served / "genie_config.json").read_bytes()) == before
    if as_folder:
        assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in source.iterdir())
    assert main(["audit", str(source / "config.json"), "--served", str(out)]) == 0


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusal_names_genie_and_writes_nothing(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fixed.json"
    code = main(["repair", str(GENIE / name / "config.json"), "--served", str(GENIE / name / "genie_config.json"),
                 "--out", str(out), "--json"])
    found = json.loads(capsys.readouterr().out)
    assert code == 1
    assert found["verdict"] == "not_repairable" and found["out"] is None
    assert found["reason"].startswith("Genie cannot serve ")
    assert REFUSED[name] in found["reason"]
    assert list(tmp_path.iterdir()) == []


def test_scan_audit_finds_the_bundle(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(GENIE / "llama3_no_block"), "--audit", "--json"]) in (0, 1)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    audit = rows[0]["audit"]
    assert any(isinstance(value, dict) and value.get("verdict") == "mismatch" and value.get("repairable") is True
               for value in audit.values()), audit


def test_a_theta_genie_cannot_write(tmp_path: Path) -> None:
    """create_genie_config casts rope_theta to an int: a fractional base is served rounded down, and the
    repair cannot write it back."""
    config = json.loads((GENIE / "llama_default" / "config.json").read_text())
    config["rope_theta"] = 10000.5
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = ropekit.load(path)
    found = annotate(model, audit_artifact(model, read_for_audit(model, GENIE / "llama_default"))).to_json()
    assert found["verdict"] == "mismatch"
    assert "plain RoPE at Genie's rope-theta 10000 (declared 10000.5)" in found["layers"]["full_attention"]["served_as"]
    assert found["repairable"] is False and "is not an integer" in found["repairable_reason"]


def test_plain_rope_theta_is_rewritten_in_the_form_it_has(tmp_path: Path) -> None:
    config = json.loads((GENIE / "llama_default" / "config.json").read_text())
    config["rope_theta"] = 20000.0
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "fixed.json"
    assert main(["repair", str(path), "--served", str(GENIE / "llama_default" / "genie_config.json"), "--out",
                 str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["dialog"]["engine"]["backend"]["QnnHtp"]["rope-theta"] == 20000
    original = json.loads((GENIE / "llama_default" / "genie_config.json").read_text())
    assert _rope_free(written) == _rope_free(original)


def test_a_vlm_mrope_block_is_no_table_with_its_reason(tmp_path: Path) -> None:
    written = json.loads((GENIE / "llama3" / "genie_config.json").read_text())
    written["dialog"]["engine"]["model"]["positional-encoding"]["rope-scaling"] = {
        "rope-type": "qwen2vl-mrope", "time-step": 2, "spatial-merge-size": 2, "mrope-section": [16, 24, 24]}
    path = tmp_path / "genie_config.json"
    path.write_text(json.dumps(written))
    found = _audit("llama3", path)
    assert found["verdict"] == "no_table"
    assert "not llama3's block" in found["reason"]
