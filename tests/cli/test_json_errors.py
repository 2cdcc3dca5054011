"""With ``--json`` anywhere on the command line, an error exit (2 invalid input, 3 a plugin at fault,
argparse's usage errors included) is also one JSON object on stdout, ``{"error", "key", "exit"}``;
stderr keeps its one line, and exit 1 (a finding) keeps its document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ropekit.cli import main
from ropekit.cli.parser import usage_key

from .. import support
from ..support import MakeDist

SEED_CONFIG = str(support.SEED_CONFIG)


def _error_run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main`` on ``argv``: its status (argparse's SystemExit included), stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as leaving:
        code = int(leaving.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(out: str) -> dict[str, object]:
    lines = out.splitlines()
    assert len(lines) == 1, out
    document = json.loads(lines[0])
    assert set(document) == {"error", "key", "exit"}
    return dict(document)


def test_a_config_error_names_its_json_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": "x"}}))
    code, out, err = _error_run(capsys, "table", str(path), "--json")
    document = _one_error(out)
    assert code == 2 and document["exit"] == 2 and document["key"] == "rope_scaling.factor"
    assert err == f"ropekit: error: {document['error']}\n"
    assert str(document["error"]).startswith("rope_scaling.factor: ")


def test_a_missing_file_is_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    code, out, err = _error_run(capsys, "gap", missing, "--json")
    assert code == 2
    assert _one_error(out) == {"error": f"{missing}: no such file (give a config.json or a model directory)",
                               "key": missing, "exit": 2}
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_argument_error_names_its_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    code, out, _ = _error_run(capsys, "export", SEED_CONFIG, "--out", str(tmp_path / "busy"), "--json")
    document = _one_error(out)
    assert (code, document["key"], document["exit"]) == (2, "--out", 2)
    assert str(document["error"]).startswith(f"--out: {tmp_path / 'busy'}: not empty and not a ropekit export")


@pytest.mark.parametrize(("argv", "key", "needle"), [
    (["table", SEED_CONFIG, "--seq-len", "0", "--json"], "--seq-len", "expected a positive integer, got '0'"),
    (["table", "--json"], "CONFIG", "the following arguments are required: CONFIG"),
    (["--json", "frobnicate"], "COMMAND", "invalid choice: 'frobnicate'"),
    (["gap", SEED_CONFIG, "--json", "--bogus"], "--bogus", "unrecognized arguments: --bogus"),
    (["audit", SEED_CONFIG, "--json"], "--served", "the following arguments are required: --served"),
    (["audit", SEED_CONFIG, "--served", "x", "--layout", "diagonal", "--json"], "--layout",
     "invalid choice: 'diagonal' (choose from 'neox', 'gptj', 'half')"),
])
def test_usage_errors_too(capsys: pytest.CaptureFixture[str], argv: list[str], key: str, needle: str) -> None:
    code, out, err = _error_run(capsys, *argv)
    document = _one_error(out)
    assert (code, document["key"], document["exit"]) == (2, key, 2)
    assert needle in str(document["error"]) and needle in err
    assert err.count("\n") == 1 and err.endswith("(see --help)\n")


def test_without_json_stdout_stays_empty(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _error_run(capsys, "table", str(tmp_path / "nope.json"))[1] == ""
    assert _error_run(capsys, "table", SEED_CONFIG, "--seq-len", "0")[1] == ""


def test_a_finding_keeps_its_document(capsys: pytest.CaptureFixture[str]) -> None:
    pack = support.ROOT / "tests" / "data" / "artifacts" / "onnx_llama_default"
    code, out, _ = _error_run(capsys, "audit", str(support.SEED_CONFIG), "--served", str(pack), "--json")
    document = json.loads(out)
    assert code == 1 and document["verdict"] == "mismatch" and "error" not in document


def test_scan_prints_the_error_as_its_last_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"model_type": "llama", "head_dim": 64}))
    (tmp_path / "empty").mkdir()
    code, out, err = _error_run(capsys, "scan", str(tmp_path / "model"), str(tmp_path / "empty"), "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and lines[0]["status"] == "ok"
    assert lines[-1] == {"error": f"PATH: {tmp_path / 'empty'}: holds no model (a folder with config.json, a model's "
                                  "NAME.json config, an ONNX pack, a .gguf); give a folder of models or a model's file",
                         "key": "PATH", "exit": 2}
    assert err == f"ropekit: error: {lines[-1]['error']}\n"


BROKEN = "raise ImportError('the wheel lost its native module')\n"


def test_a_plugin_at_fault_exits_3_in_the_command(make_dist: MakeDist, tmp_path: Path) -> None:
    make_dist("ropekit-broken", {"broken_type": "broken_plugin"}, {"broken_plugin": BROKEN})
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "broken_type"}}))
    done = subprocess.run([sys.executable, "-m", "ropekit", "table", str(config), "--json"], capture_output=True,
                          text=True, check=False, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": ""})
    document = _one_error(done.stdout)
    assert done.returncode == 3 and document["exit"] == 3 and document["key"] is None
    assert "ropekit-broken" in str(document["error"]) and "the wheel lost its native module" in str(document["error"])
    assert done.stderr == f"ropekit: plugin error: {document['error']}\n"


@pytest.mark.parametrize(("message", "key"), [
    ("argument -o/--output: expected one argument", "--output"),
    ("argument COMMAND: invalid choice: 'x'", "COMMAND"),
    ("the following arguments are required: CONFIG, --served", "CONFIG"),
    ("unrecognized arguments: --a=1 --b", "--a"),
    ("ambiguous option: --p could match --positions, --path", "--p"),
    ("something else entirely", None),
])
def test_usage_key(message: str, key: str | None) -> None:
    assert usage_key(message) == key
