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
import struct
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


# -- hostile programs: counts, offsets and references that lie (#46) ------------------------------------------

class Flat:
    """A flatbuffer laid out by hand, front to back (every reference points forward, as a uoffset must): enough
    of ExecuTorch's schema to write programs that lie about their counts, share their tables or overlap."""

    def __init__(self, identifier: bytes = b"ET12") -> None:
        self.data = bytearray(struct.pack("<I", 0) + identifier)

    def _pad(self) -> None:
        self.data.extend(bytes(-len(self.data) % 4))

    def table(self, slots: int, scalars: dict[int, tuple[str, int]],
              refs: tuple[int, ...] = ()) -> tuple[int, dict[int, int]]:
        """A table of ``slots`` fields: ``scalars`` by slot, and ``refs`` (their uoffsets :meth:`link`-ed later).
        Returns its position and where each reference is."""
        self._pad()
        fields = sorted([*scalars, *refs])
        vtable = len(self.data)
        entries = [4 + 8 * fields.index(slot) if slot in fields else 0 for slot in range(slots)]
        self.data.extend(struct.pack(f"<HH{slots}H", 4 + 2 * slots, 4 + 8 * len(fields), *entries))
        self._pad()
        at = len(self.data)
        self.data.extend(struct.pack("<i", at - vtable) + bytes(8 * len(fields)))
        for slot, (fmt, value) in scalars.items():
            struct.pack_into("<" + fmt, self.data, at + 4 + 8 * fields.index(slot), value)
        return at, {slot: at + 4 + 8 * fields.index(slot) for slot in refs}

    def vector(self, fmt: str, values: list[int] | bytes) -> int:
        self._pad()
        at = len(self.data)
        items = values if isinstance(values, bytes) else struct.pack(f"<{len(values)}{fmt}", *values)
        self.data.extend(struct.pack("<I", len(values)) + items)
        return at

    def refs(self, count: int) -> tuple[int, list[int]]:
        """A vector of ``count`` references: its position and where each is."""
        at = self.vector("I", [0] * count)
        return at, [at + 4 + 4 * index for index in range(count)]

    def link(self, at: int, target: int) -> None:
        struct.pack_into("<I", self.data, at, target - at)

    def done(self, root: int) -> bytes:
        struct.pack_into("<I", self.data, 0, root)
        return bytes(self.data)


def hostile_program(*, plans: int = 1, values: int = 1, delegates: int = 0, dims: int = 2, constants: int = 2,
                    shift: int = 0, rows: int = 64, columns: int = 8, storage_offset: int = 0) -> bytes:
    """A program whose ``plans`` plans are one plan, whose ``values`` values are one tensor and whose
    ``delegates`` delegates are one, all by reference (what a flatbuffer allows); its constant buffer holds one
    real cos/sin table ([rows, columns] float32) that ``constants`` tensors (half cos, half sin) each refer to,
    the k-th ``shift`` rows further in (overlapping views of one buffer of ones and one of zeros); ``dims``: the sizes the values'
    tensor claims."""
    angles = np.outer(np.arange(rows), 1.0 / 10000.0 ** (np.arange(columns) / columns))
    cos, sin = np.cos(angles).astype(np.float32).tobytes(), np.sin(angles).astype(np.float32).tobytes()
    if shift:  # every row a table's row 0: each view of the buffer is read whole
        cos, sin = np.ones((rows, columns), np.float32).tobytes(), bytes(len(sin))
    flat = Flat()
    program, program_refs = flat.table(6, {}, (1, 2))
    plan_list, plan_refs = flat.refs(plans)
    flat.link(program_refs[1], plan_list)
    plan, plan_ref = flat.table(8, {}, (2, 7) if delegates else (2,))
    for at in plan_refs:
        flat.link(at, plan)
    kept = rows - shift * (constants // 2)
    value_list, value_refs = flat.refs(max(values, 0) + constants)
    flat.link(plan_ref[2], value_list)
    tensors = [(1, [1] * (dims - 2) + [2, 2] if dims >= 2 else [2], 0)]
    tensors += [(2 + k, [kept, columns], storage_offset + (k // 2) * shift * columns) for k in range(constants)]
    value_targets = []
    for index, sizes, offset in tensors:
        value, value_ref = flat.table(2, {0: ("B", 5)}, (1,))
        tensor, tensor_refs = flat.table(10, {0: ("b", 6), 1: ("i", offset), 5: ("I", index)}, (2,))
        flat.link(value_ref[1], tensor)
        flat.link(tensor_refs[2], flat.vector("i", sizes))
        value_targets.append(value)
    for number, at in enumerate(value_refs):
        flat.link(at, value_targets[0] if number < values else value_targets[1 + number - values])
    if delegates:
        delegate_list, delegate_refs = flat.refs(delegates)
        flat.link(plan_ref[7], delegate_list)
        delegate, delegate_ref = flat.table(1, {}, (0,))
        for at in delegate_refs:
            flat.link(at, delegate)
        flat.link(delegate_ref[0], flat.vector("B", b"XnnpackBackend" * 64))
    buffers, buffer_refs = flat.refs(2 + constants)
    flat.link(program_refs[2], buffers)
    targets = []
    for data in (b"", b"\0" * 16, cos, sin):
        buffer, buffer_ref = flat.table(1, {}, (0,))
        flat.link(buffer_ref[0], flat.vector("B", data))
        targets.append(buffer)
    for number, at in enumerate(buffer_refs):  # 0 empty, 1 the small tensor's, then cos, sin, cos, sin ...
        flat.link(at, targets[number] if number < 2 else targets[2 + number % 2])
    return flat.done(program)


def test_the_hand_made_program_is_read() -> None:
    """The builder's honest program: one [64, 8] table, read once though two tensors refer to each side."""
    artifact = _read_bytes(hostile_program(constants=4))
    assert len(artifact.tables) == 1 and artifact.tables[0].values.shape == (64, 8)
    assert artifact.engine["tables"][0]["aliases"] == [["constant 4", "constant 5"]]


def _read_bytes(data: bytes) -> Any:
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "model.pte"
        path.write_bytes(data)
        return read_artifact(path)


@pytest.mark.parametrize(("case", "words"), [
    ({"plans": 3000, "values": 3000}, "its tables are referenced over and over"),  # 9M visits from 24 KB
    ({"plans": 3000, "delegates": 3000}, "its tables are referenced over and over"),
    ({"dims": 100_000}, "a tensor of 100000 dims at byte"),
    ({"constants": 400, "shift": 1, "rows": 1000}, "tensors overlapping in storage"),  # 200 views of one buffer
    ({"storage_offset": -8}, "starts -32 bytes before its storage"),
])
def test_a_program_that_lies_is_refused_in_one_line(tmp_path: Path, case: dict[str, int], words: str) -> None:
    path = tmp_path / "lie.pte"
    path.write_bytes(hostile_program(**case))
    with pytest.raises(ropekit.ArgumentError) as caught:
        read_artifact(path)
    message = str(caught.value)
    assert "\n" not in message and f"{path}: corrupt or truncated ExecuTorch program: " in message
    assert words in message


def hostile_data_file(*, entries: int, name_bytes: int) -> bytes:
    """A ``.ptd`` whose ``entries`` named tensors are one entry (a name of ``name_bytes`` bytes), by reference."""
    flat = Flat(b"FT01")
    flat.data.extend(b"FH01" + bytes(28))  # the extended header: FH01, then the segment base (0) at byte 32
    root, root_refs = flat.table(3, {}, (1, 2))
    segments, segment_refs = flat.refs(1)
    flat.link(root_refs[1], segments)
    segment, _ = flat.table(2, {0: ("Q", 0), 1: ("Q", 16)})
    flat.link(segment_refs[0], segment)
    named, named_refs = flat.refs(entries)
    flat.link(root_refs[2], named)
    entry, entry_ref = flat.table(2, {1: ("I", 0)}, (0,))
    for at in named_refs:
        flat.link(at, entry)
    flat.link(entry_ref[0], flat.vector("B", b"n" * name_bytes))
    return flat.done(root)


def test_a_data_file_that_aliases_its_entries_is_refused_in_one_line(tmp_path: Path) -> None:
    """20,000 named tensors that are one entry with a 100 KB name: before #46 each alias decoded the name again
    (2 GB of names from a 100 KB file; the work grows as the square of the file)."""
    program = tmp_path / "model.pte"
    shutil.copy(ARTIFACTS / "pte_llama32_ptd" / "model.pte", program)
    (tmp_path / "model.ptd").write_bytes(hostile_data_file(entries=20_000, name_bytes=100_000))
    with pytest.raises(ropekit.ArgumentError) as caught:
        read_artifact(program)
    message = str(caught.value)
    assert "\n" not in message and "model.ptd: corrupt or truncated ExecuTorch data file (.ptd)" in message
    assert "its tables are referenced over and over" in message
