"""The CLI contracts other tools parse (README "Command line"), and its behaviour on bad input."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ropekit
from ropekit.cli import main

from .. import support

SEED_CONFIG = str(support.SEED_CONFIG)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "table", SEED_CONFIG, "--json")
    layer = json.loads(out)["layers"]["full_attention"]
    assert code == 0
    assert {"rope_type", "inv_freq", "attention_factor", "rotary_dim", "head_dim", "params"} <= set(layer)
    assert layer["rope_type"] == "llama3" and len(layer["inv_freq"]) == 32
    assert layer["params"]["factor"] == 32.0 and layer["params"]["rope_theta"] == 500000.0


def test_table_seq_len(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    short = json.loads(run(capsys, "table", str(path), "--json")[1])["layers"]["full_attention"]
    long = json.loads(run(capsys, "table", str(path), "--json", "--seq-len", "8192")[1])["layers"]["full_attention"]
    assert long["seq_len"] == 8192 and long["inv_freq"][-1] < short["inv_freq"][-1]


def test_gap_json_reproduces_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gap", SEED_CONFIG, "--positions", "128,1024,2048", "--json")
    layer = json.loads(out)["layers"]["full_attention"]
    assert code == 0
    assert (layer["pairs"], layer["scaled_pairs"], layer["max_ratio"]) == (32, 17, 32.0)
    assert round(layer["positions"]["2048"]["max_angle_error"], 3) == 2.017
    assert layer["positions"]["2048"]["pairs_over_0.1rad"] == 10


def test_gap_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gap", SEED_CONFIG, "--positions", "128")
    assert code == 0 and "17 of 32 pairs differ from plain RoPE, max ratio 32" in out and "0.1260" in out


def test_list_and_inspect(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "--json")
    rows = {row["rope_type"]: row for row in json.loads(out)["schemes"]}
    assert code == 0
    assert {"default", "llama3", "longrope", "su", "proportional", "linear", "dynamic", "yarn"} <= set(rows)
    assert rows["llama3"]["distribution"] == "ropekit" and rows["su"]["canonical"] == "longrope"
    assert {k["name"] for k in rows["llama3"]["keys"]} >= {"factor", "low_freq_factor", "high_freq_factor"}
    code, out, _ = run(capsys, "list", "--no-import", "--json")
    assert all("keys" not in row for row in json.loads(out)["schemes"])
    code, out, _ = run(capsys, "inspect", SEED_CONFIG)
    assert code == 0 and "rope_type llama3" in out and "factor = 32.0" in out


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"head_dim": 64, "rope_scaling": {"rope_type": "lama3"}}, "rope_scaling.rope_type: unknown rope_type 'lama3'"),
        ({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": "x"}}, "rope_scaling.factor"),
        ({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2, "extra": 1}}, "rope_scaling.extra"),
    ],
)
def test_bad_config_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: dict[str, object], needle: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    for command in ("table", "gap", "inspect"):
        code, out, err = run(capsys, command, str(path), "--json")
        assert code == 2 and json.loads(out) == {"error": err.removeprefix("ropekit: error: ").rstrip("\n"),
                                                 "key": needle.partition(":")[0], "exit": 2}
        assert needle in err and err.count("\n") == 1 and "Traceback" not in err
        code, out, err = run(capsys, command, str(path))
        assert code == 2 and out == "" and needle in err


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["gap", SEED_CONFIG, "--positions", "a,b"], ["table", SEED_CONFIG, "--seq-len", "0"], ["frobnicate"]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
        assert "error" in capsys.readouterr().err


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "table", str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in err


def test_python_dash_m_entry_point() -> None:
    done = subprocess.run([sys.executable, "-m", "ropekit", "table", SEED_CONFIG, "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["layers"]["full_attention"]["rope_type"] == "llama3"
    bad = subprocess.run([sys.executable, "-m", "ropekit", "table", "/nonexistent/config.json"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


_EXIT_PROBE = """
import atexit, gc, sys
from ropekit.cli import run
atexit.register(lambda: print("frozen:", gc.get_freeze_count() > 0, file=sys.stderr))
sys.argv = ["ropekit", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(("argv", "status"), [(["table", SEED_CONFIG, "--json"], 0),
                                             (["table", "/nonexistent/config.json"], 2)])
def test_the_command_exits_with_mains_status_past_the_shutdown_collection(argv: list[str], status: int) -> None:
    """``run`` (the console script and ``python -m ropekit``) freezes the collector on the way out, after
    the output is written, and still exits with ``main``'s status and flushes its streams."""
    done = subprocess.run([sys.executable, "-c", _EXIT_PROBE, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == status, done.stderr
    assert done.stderr.splitlines()[-1] == "frozen: True"
    if status == 0:
        assert json.loads(done.stdout)["layers"]["full_attention"]["rope_type"] == "llama3"


def test_main_leaves_the_collector_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """A caller that goes on running (tests, a tool calling ``main``) keeps its objects collectable."""
    before = gc.get_freeze_count()
    assert run(capsys, "table", SEED_CONFIG, "--json")[0] == 0
    assert gc.get_freeze_count() == before


def test_the_console_script_is_run() -> None:
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "ropekit"]
    assert script.value == "ropekit.cli:run"


def test_lenient_warns_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "extra": 1}}))
    assert main(["table", str(path), "--json"]) == 2
    capsys.readouterr()
    assert main(["table", str(path), "--json", "--lenient"]) == 0
    err = capsys.readouterr().err
    assert err == ("ropekit: warning: rope_scaling.extra: unknown key for rope_type 'linear'; "
                   "its keys are: factor (ignored)\n")


@pytest.mark.parametrize("columns", [50, 120])
def test_help_wraps_to_the_terminal_width(columns: int) -> None:
    """The help formatter sizes itself as shutil would (COLUMNS first), without importing shutil."""
    env = {"COLUMNS": str(columns), "PATH": "", "PYTHONPATH": ":".join(sys.path)}
    code = ("import sys\nbefore = 'shutil' in sys.modules  # a site hook may have imported it already\n"
            "from ropekit.cli import main\ntry:\n    main(['table', '--help'])\nfinally:\n"
            "    print(before or 'shutil' not in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code],
                          capture_output=True, text=True, env=env, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and any("--seq-len" in line for line in lines)
    assert max(map(len, lines)) <= columns - 2
    assert done.stderr.strip() == "True"
    if columns == 120:  # the --seq-len help fits on one line at this width
        assert max(map(len, lines)) > 50


QWEN25_VL = support.ROOT / "tests" / "data" / "configs" / "published" / "qwen2.5-vl-7b-instruct.json"


def test_inspect_names_a_multimodal_composition(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", str(QWEN25_VL))
    assert code == 0
    assert "  multimodal: 3 position axes, composed as sections, mrope_section [16, 24, 24]" in out


def test_audit_a_multimodal_models_cache_dump(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = ropekit.load(QWEN25_VL).table
    # a cache at text positions (rows are positions 0..N-1, as a dump of a text prompt's cache is): the declared table
    cos, sin = table.cos_sin(range(256), dtype=np.float32)
    np.save(tmp_path / "cos.npy", cos)
    np.save(tmp_path / "sin.npy", sin)
    code, out, _ = run(capsys, "audit", str(QWEN25_VL), "--served", str(tmp_path / "cos.npy"), "--sin",
                       str(tmp_path / "sin.npy"), "--json")
    assert (code, json.loads(out)["verdict"]) == (0, "match")
    # the rows an image's patches get (temporal 0, height and width moving) read as text positions: not the table
    grid = np.arange(256)
    image = np.stack([np.zeros_like(grid), grid // 16, grid % 16])
    cos, sin = table.cos_sin(image, dtype=np.float32)
    np.save(tmp_path / "cos.npy", cos)
    np.save(tmp_path / "sin.npy", sin)
    code, out, _ = run(capsys, "audit", str(QWEN25_VL), "--served", str(tmp_path / "cos.npy"), "--sin",
                       str(tmp_path / "sin.npy"), "--json")
    assert (code, json.loads(out)["verdict"]) == (1, "mismatch")


def test_building_parsers_at_once_leaves_argparse_translating() -> None:
    """The parser is built with argparse's own strings untranslated (no catalogue search on disk);
    builds on several threads at once leave argparse as it was."""
    import argparse
    import threading

    from ropekit.cli.parser import build_parser

    before = argparse._  # type: ignore[attr-defined]
    threads = [threading.Thread(target=lambda: [build_parser(["table", "x"]) for _ in range(100)]) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert argparse._ is before  # type: ignore[attr-defined]
    assert build_parser(["table", "x"]).parse_args(["table", "x"]).config == "x"
