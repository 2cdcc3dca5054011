"""ExecuTorch programs (``.pte``) read with ropekit alone (no executorch): the rope tables ExecuTorch
lifts into the program as constants, found by value, inline, XNNPACK-lowered, fp16 or in a ``.ptd``.

The programs under ``tests/data/artifacts/pte_*`` were made by executorch 1.5.1 from one tiny
checkpoint of its own Llama example that declares Llama-3.2's llama3 factor 32
(``scripts/generate_pte.py``); ``MANIFEST.json`` holds what executorch's own deserializer reads
back from each, which these tests compare with ropekit's reader.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.artifacts.audit import audit_artifact
from ropekit.artifacts.read import read_artifact
from ropekit.cli.main import main

from ..support import ARTIFACTS

MANIFEST: dict[str, Any] = json.loads((ARTIFACTS / "MANIFEST.json").read_text())["artifacts"]
PROGRAMS = sorted(name for name in MANIFEST if name.startswith("pte_"))
FACTOR_8 = ("llama3 with factor 8 (declared 32.0): the engine's own llama3 factor, not the checkpoint's")


def _config(name: str, factor: float | None = None) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((ARTIFACTS / name / "config.json").read_text())
    if factor is not None:
        config["rope_scaling"]["factor"] = factor
    return config


def _audit(name: str, factor: float | None = None, program: Path | None = None) -> dict[str, Any]:
    served = read_artifact(program or ARTIFACTS / name / "model.pte")
    return audit_artifact(ropekit.load(_config(name, factor)), served).to_json()


def test_the_committed_programs_are_the_five_cases() -> None:
    assert PROGRAMS == ["pte_llama32_as_llama31", "pte_llama32_export_llm", "pte_llama32_fp16", "pte_llama32_ptd",
                        "pte_llama32_xnnpack"]
    assert {MANIFEST[name]["producer"] for name in PROGRAMS} == {"executorch 1.5.1 torch 2.13.0+cpu"}
    for name in PROGRAMS:  # tiny: tens of KB each
        assert sum(MANIFEST[name]["files"].values()) < 64_000, name
        assert {path.name: path.stat().st_size for path in (ARTIFACTS / name).iterdir()} == MANIFEST[name]["files"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_program_gives_the_table_executorch_reads_back(name: str) -> None:
    """One [positions, pairs] table per program, equal to what executorch's own deserializer read:
    plain RoPE's inv_freq over the served one, per pair."""
    artifact = read_artifact(ARTIFACTS / name / "model.pte")
    measured = MANIFEST[name]["measured"]
    assert (artifact.kind, artifact.producer, artifact.engine["schema"]) == ("executorch", "ExecuTorch", "ET12")
    assert len(artifact.tables) == 1
    table = artifact.tables[0]
    assert table.sin is not None
    assert (table.kind, table.layout, table.angles) == ("cache", "half", "float32")
    assert (list(table.values.shape), table.dtype) == (measured["table_shape"], measured["table_dtype"])
    assert np.all(table.values[0] == 1.0) and np.all(table.sin[0] == 0.0)
    served = np.arctan2(table.sin[1], table.values[1])
    plain = 500000.0 ** (-np.arange(8) / 8)
    assert [round(float(value), 4) for value in plain / served] == measured["plain_over_served"]


@pytest.mark.parametrize(("name", "factor"), [("pte_llama32_export_llm", 32.0), ("pte_llama32_as_llama31", 8.0)])
def test_the_factor_comes_from_the_export_class_not_the_checkpoint(name: str, factor: float) -> None:
    measured = MANIFEST[name]["measured"]["plain_over_served"]
    assert measured[5:] == [factor] * 3  # the low-frequency pairs are divided by the class's factor
    assert _audit(name, factor)["verdict"] == "match"


def test_the_checkpoint_exported_as_llama3_1_is_named() -> None:
    report = _audit("pte_llama32_as_llama31")
    assert report["verdict"] == "mismatch"
    layer = report["layers"]["full_attention"]
    assert layer["served_as"].startswith(FACTOR_8)
    assert layer["tables"][0]["differing_pairs"] == 4


def test_xnnpack_keeps_the_tables_as_program_constants() -> None:
    artifact = read_artifact(ARTIFACTS / "pte_llama32_xnnpack" / "model.pte")
    assert artifact.engine["delegates"] == ["XnnpackBackend"]
    assert artifact.engine["tables"][0]["cos"].startswith("constant ")
    assert _audit("pte_llama32_xnnpack")["verdict"] == "match"


def test_fp16_tables_still_tell_factor_8_from_32() -> None:
    report = _audit("pte_llama32_fp16", factor=8.0)
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"].startswith("llama3 with factor 32 (declared 8.0)")


def test_the_ptd_beside_the_program_is_read_by_name(tmp_path: Path) -> None:
    artifact = read_artifact(ARTIFACTS / "pte_llama32_ptd" / "model.pte")
    assert [Path(file).name for file in artifact.engine["data_files"]] == ["_default_external_constant.ptd"]
    (source,) = artifact.engine["tables"]
    assert (source["cos"], source["sin"]) == ("layers.0.attention.rope.freqs_cos", "layers.0.attention.rope.freqs_sin")
    assert source["aliases"] == [["rope.freqs_cos", "rope.freqs_sin"]]
    assert "layers.0.attention.rope.freqs_cos in _default_external_constant.ptd (cos)" in artifact.tables[0].where
    # the same stem, or a file given by path, is read as well
    shutil.copy(ARTIFACTS / "pte_llama32_ptd" / "model.pte", tmp_path / "model.pte")
    shutil.copy(ARTIFACTS / "pte_llama32_ptd" / "_default_external_constant.ptd", tmp_path / "model.ptd")
    same_stem = read_artifact(tmp_path / "model.pte")
    assert np.array_equal(same_stem.tables[0].values, artifact.tables[0].values)
    (tmp_path / "model.ptd").rename(tmp_path / "weights.bin")
    given = read_artifact(tmp_path / "model.pte", data=tmp_path / "weights.bin")
    assert given.tables[0].sin is not None and artifact.tables[0].sin is not None
    assert np.array_equal(given.tables[0].sin, artifact.tables[0].sin)


def test_a_program_without_its_ptd_is_no_table_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "model.pte"
    shutil.copy(ARTIFACTS / "pte_llama32_ptd" / "model.pte", program)
    report = _audit("pte_llama32_ptd", program=program)
    assert report["verdict"] == "no_table" and report["artifact"]["kind"] == "executorch"
    reason = report["reason"]
    assert reason.startswith("an ExecuTorch program (.pte) whose rope tables ropekit cannot read: its constants are "
                             "stored outside the program (external constants) and the .ptd data file that holds them "
                             "is not beside it (model.ptd, or the _default_external_constant.ptd ExecuTorch writes")
    assert "in the same folder; no .ptd file there); missing keys: layers.0.attention.rope.freqs_cos, " in reason
    assert " and 9 more. Put the .ptd it was exported with beside it. Audit the model it was exported from" in reason
    assert "--served freqs_cos.npy --sin freqs_sin.npy --layout half (they are [positions, pairs]" in reason
    assert "audit_module" in report["request"]
    config = ARTIFACTS / "pte_llama32_ptd" / "config.json"
    assert main(["audit", str(config), "--served", str(program), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "no_table"


def _blank_tables(tmp_path: Path, name: str) -> Path:
    """The program with its cos table's bytes zeroed: what an export without a checkpoint leaves."""
    source = ARTIFACTS / name / "model.pte"
    cos = read_artifact(source).tables[0].values.astype(np.float32).tobytes()
    data = source.read_bytes()
    assert data.count(cos) == 1
    program = tmp_path / "model.pte"
    program.write_bytes(data.replace(cos, bytes(len(cos))))
    return program


@pytest.mark.parametrize(("name", "words"), [
    ("pte_llama32_export_llm", "an export_llm run without a checkpoint leaves the tables uninitialised"),
    ("pte_llama32_xnnpack", "its delegates (XnnpackBackend) are opaque blobs that can hold the tables"),
])
def test_a_program_whose_constants_hold_no_table_is_no_table(tmp_path: Path, name: str, words: str) -> None:
    report = _audit(name, program=_blank_tables(tmp_path, name))
    assert report["verdict"] == "no_table"
    assert report["reason"].startswith("an ExecuTorch program (.pte) whose rope tables ropekit cannot read: no "
                                       "constant cos/sin pair among its constants")
    assert words in report["reason"]


@pytest.mark.parametrize(("cut", "words"), [
    (20_000, "corrupt or truncated ExecuTorch program"),
    (6, "not an ExecuTorch program"),
])
def test_a_truncated_program_is_exit_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: int,
                                                   words: str) -> None:
    program = tmp_path / "cut.pte"
    program.write_bytes((ARTIFACTS / "pte_llama32_export_llm" / "model.pte").read_bytes()[:cut])
    config = ARTIFACTS / "pte_llama32_export_llm" / "config.json"
    assert main(["audit", str(config), "--served", str(program)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ropekit: error: --served: {program}: {words}")


def test_a_foreign_file_and_a_corrupt_ptd_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ARTIFACTS / "pte_llama32_ptd" / "config.json"
    (tmp_path / "zeros.pte").write_bytes(bytes(64))
    assert main(["audit", str(config), "--served", str(tmp_path / "zeros.pte")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "zeros.pte: not an ExecuTorch program (file identifier b'\\x00\\x00\\x00\\x00'" in err
    shutil.copy(ARTIFACTS / "pte_llama32_ptd" / "model.pte", tmp_path / "model.pte")
    data = (ARTIFACTS / "pte_llama32_ptd" / "_default_external_constant.ptd").read_bytes()
    (tmp_path / "model.ptd").write_bytes(data[:1000])
    assert main(["audit", str(config), "--served", str(tmp_path / "model.pte")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'model.ptd'}: corrupt or truncated ExecuTorch data file (.ptd)" in err


def test_repair_refuses_a_program_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A program is never rewritten (exit 1, nothing written); audit predicts it."""
    config, program = (ARTIFACTS / "pte_llama32_as_llama31" / file for file in ("config.json", "model.pte"))
    refusal = ("executorch artifacts are not repaired: an ExecuTorch program's constants are not rewritten; "
               "re-export it from a fixed model")
    out = tmp_path / "fixed.pte"
    assert main(["repair", str(config), "--served", str(program), "--out", str(out)]) == 1
    assert capsys.readouterr().out == f"not repairable: {refusal}; nothing written\n"
    assert list(tmp_path.iterdir()) == []
    assert main(["audit", str(config), "--served", str(program), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["repairable"], document["repairable_reason"]) == (False, f"full_attention: {refusal}")
