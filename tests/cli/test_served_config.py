"""``audit --served DIR`` and ``repair --served DIR`` without CONFIG take the model's ``config.json``
inside DIR; an explicit CONFIG wins; an engine's own config there is not the model's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ropekit.cli import main

from .. import support

ARTIFACTS = support.ARTIFACTS


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _declared(document: dict[str, object]) -> str:
    layers = document["layers"]
    assert isinstance(layers, dict)
    return str(layers["full_attention"]["tables"][0]["declared"]["rope_type"])


def test_audit_reads_the_config_inside_the_served_folder(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnx", reason="the onnx reader extra is not installed")
    pack = ARTIFACTS / "onnx_llama_linear"  # config.json (the model's) beside genai_config.json (the engine's)
    code, out, _ = _run(capsys, "audit", "--served", str(pack), "--json")
    implied = json.loads(out)
    explicit_code, explicit_out, _ = _run(capsys, "audit", str(pack / "config.json"), "--served", str(pack), "--json")
    assert code == explicit_code == 1 and implied == json.loads(explicit_out)
    assert implied["verdict"] == "mismatch" and _declared(implied) == "linear"
    code, out, _ = _run(capsys, "audit", str(support.SEED_CONFIG), "--served", str(pack), "--json")  # CONFIG wins
    assert code == 1 and _declared(json.loads(out)) == "llama3"


def test_a_genie_bundle_folder_too(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "audit", "--served", str(ARTIFACTS / "genie" / "llama3"), "--json")
    document = json.loads(out)
    assert code == 0 and document["verdict"] == "match" and _declared(document) == "llama3"


def test_no_model_config_in_the_folder_is_refused_naming_config(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    shutil.copy(ARTIFACTS / "genie" / "llama3" / "genie_config.json", bundle / "genie_config.json")
    code, out, err = _run(capsys, "audit", "--served", str(bundle), "--json")
    assert code == 2 and json.loads(out) == {
        "error": f"CONFIG: missing, and the --served folder {bundle} holds no config.json: give the model's "
                 "config.json (a JSON object with model_type or architectures)", "key": "CONFIG", "exit": 2}
    assert err.count("\n") == 1
    shutil.copy(bundle / "genie_config.json", bundle / "config.json")  # the engine's config under the model's name
    code, out, err = _run(capsys, "repair", "--served", str(bundle), "--out", str(tmp_path / "new"))
    assert code == 2 and out == "" and not (tmp_path / "new").exists()
    assert err == (f"ropekit: error: CONFIG: missing, and the --served folder {bundle} holds a config.json that is a "
                   "Qualcomm Genie engine config, not the model's: give the model's config.json (a JSON object with "
                   "model_type or architectures)\n")


def test_a_served_file_still_needs_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "repair", "--served", str(ARTIFACTS / "onnx_llama_linear" / "model.onnx"), "--out",
                        "/nonexistent/x")
    assert code == 2 and err.startswith("ropekit: error: CONFIG: missing: give the model's config.json (without it, "
                                        "only a --served folder holding the model's config.json can be repaired;")
    code, _, err = _run(capsys, "audit", "--served", str(ARTIFACTS / "onnx_llama_linear" / "model.onnx"))
    assert code == 2 and err == ("ropekit: error: CONFIG: missing: give the model's config.json (only a .gguf can be "
                                 "checked alone)\n")


def test_repair_reads_the_config_inside_the_served_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="the onnx reader extra is not installed")
    pack = ARTIFACTS / "onnx_llama_linear"
    code, out, _ = _run(capsys, "repair", "--served", str(pack), "--out", str(tmp_path / "fixed"), "--json")
    assert code == 0 and json.loads(out)["verdict"] == "repaired"
    code, out, _ = _run(capsys, "audit", str(pack / "config.json"), "--served", str(tmp_path / "fixed"), "--json")
    assert code == 0 and json.loads(out)["verdict"] == "match"
