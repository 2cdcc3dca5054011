"""``ropekit export``: manifest, raw little-endian tables and .npy copies, and a C reader that
serves them with no scheme code (compiled and run here; CI sets ROPEKIT_REQUIRE_CC=1)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit.cli import main
from ropekit.tools.export import export

from ..support import ROOT, SEED_CONFIG

READER = ROOT / "examples" / "c-reader" / "rope_reader.c"
GEMMA4: dict[str, Any] = {
    "head_dim": 64, "global_head_dim": 128, "num_hidden_layers": 4, "max_position_embeddings": 131072,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                           "rope_theta": 1e6},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
}
PHI3: dict[str, Any] = {
    "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 100 for i in range(32)],
                     "long_factor": [1.0 + i for i in range(32)]},
}


def test_manifest_files_and_hashes(tmp_path: Path) -> None:
    model = ropekit.load(SEED_CONFIG)
    manifest = export(model, tmp_path, positions=512)
    assert manifest["format"] == "ropekit-export" and manifest["format_version"] == 1
    layer = manifest["layers"]["full_attention"]
    assert (layer["rope_type"], layer["rotary_dim"], layer["pairs"]) == ("llama3", 64, 32)
    assert layer["params"]["factor"] == 32.0
    for kind, spec in layer["files"].items():
        data = (tmp_path / spec["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == spec["sha256"]
        raw = np.frombuffer(data, dtype=np.dtype(spec["dtype"]).newbyteorder("<")).reshape(spec["shape"])
        np.testing.assert_array_equal(raw, np.load(tmp_path / spec["npy"]))
        if kind == "inv_freq":
            np.testing.assert_array_equal(raw, model.table.inv_freq)
    cos, _ = model.table.cos_sin(512)
    np.testing.assert_array_equal(np.load(tmp_path / layer["files"]["cos"]["npy"]), cos)
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest


def test_seq_len_dependent_export_states_the_rule(tmp_path: Path) -> None:
    manifest = export(ropekit.load(PHI3), tmp_path, seq_lens=[10000])
    layer = manifest["layers"]["full_attention"]
    assert layer["switch_at"] == 4096 and "long_factor when seq_len > original" in layer["seq_len_rule"]
    assert [extra["seq_len"] for extra in layer["beyond"]] == [4097, 10000]
    long = np.load(tmp_path / layer["beyond"][0]["files"]["inv_freq"]["npy"])
    np.testing.assert_array_equal(long, ropekit.load(PHI3).table.at(4097).inv_freq)


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(SEED_CONFIG), "--out", str(tmp_path / "out"), "--positions", "16", "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["layers"]["full_attention"]["files"]["cos"]["shape"] == [16, 64]
    assert (tmp_path / "out" / "manifest.txt").read_text().count("\nlayer ") == 1


def _compiled_reader(folder: Path) -> Path:
    """The C reader, compiled strictly into ``folder`` (skips without a compiler unless CI requires one)."""
    compiler = _compiler()
    if compiler is None:
        pytest.skip("no C compiler")
    binary = folder / "rope_reader"
    subprocess.run([compiler, "-O2", "-std=c99", "-Wall", "-Werror", "-D_POSIX_C_SOURCE=200809L", "-o", str(binary),
                    str(READER), "-lm"], check=True)
    return binary


def _compiler() -> str | None:
    found = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if found is None and os.environ.get("ROPEKIT_REQUIRE_CC"):
        pytest.fail("ROPEKIT_REQUIRE_CC is set but no C compiler was found")
    return found


@pytest.mark.parametrize(("config", "layout"), [(SEED_CONFIG, "neox"), (GEMMA4, "neox"), (PHI3, "gptj"),
                                                (SEED_CONFIG, "half")])
def test_c_reader_needs_no_scheme_code(tmp_path: Path, config: Any, layout: Any) -> None:
    binary = _compiled_reader(tmp_path)
    model = ropekit.load(config)
    export(model, tmp_path / "export", positions=4096, layout=layout)
    done = subprocess.run([str(binary), str(tmp_path / "export"), "4000"], capture_output=True, text=True, check=True)
    rows: dict[str, list[tuple[float, float]]] = {}
    for line in done.stdout.splitlines():
        name, what, *values = line.split()
        if what == "cache_max_abs_diff":
            assert float(values[0]) < 3e-7
        else:
            rows.setdefault(name, []).append((float(values[0]), float(values[1])))
    assert set(rows) == set(model.tables)
    for name, table in model.tables.items():
        cos, sin = table.cos_sin([4000], dtype=np.float64, layout="neox")
        pairs = len(table.inv_freq)
        np.testing.assert_allclose([c for c, _ in rows[name]], cos[0, :pairs], atol=1e-12)
        np.testing.assert_allclose([s for _, s in rows[name]], sin[0, :pairs], atol=1e-12)


# --- attacks: an export never escapes its folder, never mixes two exports, never trusts text ------

HOSTILE_NAMES = ["../../escape", "/abs/path", "x", "./x", "X", "a\nlayer evil rope_type default pairs 1 inv_freq x",
                 "tab\tand space", "é" * 300, "nul\0byte", "con"]


def _hostile_model() -> ropekit.ModelRope:
    blocks = {name: {"rope_type": "default", "rope_theta": 1e4 + i} for i, name in enumerate(HOSTILE_NAMES)}
    names = list(HOSTILE_NAMES)  # every layer placed (a config whose layers cannot be placed is refused at load)
    return ropekit.load({"head_dim": 8, "rope_parameters": blocks, "num_hidden_layers": len(names), "layer_types": names})


def test_layer_names_never_become_paths(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "export"
    manifest = export(_hostile_model(), out)
    written = sorted(p.name for p in out.iterdir())
    assert all(p.parent == out for p in out.iterdir())  # nothing outside, no subfolders
    assert not (tmp_path / "escape").exists() and not Path("/abs/path.inv_freq.f64").exists()
    stems = {spec["files"]["inv_freq"]["path"] for spec in manifest["layers"].values()}
    assert len(stems) == len(HOSTILE_NAMES)  # unique, and unique ignoring case
    assert len({name.lower() for name in written}) == len(written)
    assert all(len(name) < 80 for name in written)
    assert set(manifest["layers"]) == set(HOSTILE_NAMES)  # the names survive as data
    lines = [line for line in (out / "manifest.txt").read_text().splitlines() if not line.startswith("#")]
    assert len(lines) == len(HOSTILE_NAMES)  # one record per layer type: no forged lines
    for name, spec in manifest["layers"].items():
        digest = hashlib.sha256((out / spec["files"]["inv_freq"]["path"]).read_bytes()).hexdigest()
        assert digest == spec["files"]["inv_freq"]["sha256"], name


@pytest.mark.parametrize("setup", ["file", "foreign", "symlink"])
def test_out_must_be_absent_empty_or_a_previous_export(tmp_path: Path, setup: str) -> None:
    out = tmp_path / "out"
    if setup == "file":
        out.write_text("precious")
    elif setup == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("precious")
    else:
        (tmp_path / "elsewhere").mkdir()
        out.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ropekit.ArgumentError, match="directory"):
        export(ropekit.load(SEED_CONFIG), out)
    assert list((tmp_path / "elsewhere").iterdir()) == [] if setup == "symlink" else True
    if setup == "foreign":
        assert (out / "notes.txt").read_text() == "precious" and len(list(out.iterdir())) == 1


def test_re_export_replaces_the_previous_one_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    export(ropekit.load(PHI3), out, positions=8)
    export(ropekit.load(SEED_CONFIG), out)  # a previous export may be replaced
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["layers"]["full_attention"]["rope_type"] == "llama3"
    referenced = {spec["path"] for layer in manifest["layers"].values() for spec in layer["files"].values()}
    referenced |= {spec["npy"] for layer in manifest["layers"].values() for spec in layer["files"].values()}
    assert {p.name for p in out.iterdir()} == referenced | {"manifest.json", "manifest.txt"}  # no stale files
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folders left behind


def test_a_failed_export_leaves_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    export(ropekit.load(SEED_CONFIG), out)
    before = (out / "manifest.json").read_text()

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # killed mid-export

    monkeypatch.setattr(ropekit.tools.export, "_write", boom)
    with pytest.raises(KeyboardInterrupt):
        export(ropekit.load(PHI3), out)
    assert (out / "manifest.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_cli_bad_out_and_positions_are_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    for args in (["--out", str(tmp_path / "file")], ["--out", str(tmp_path / "new"), "--positions", str(2**40)]):
        assert main(["export", str(SEED_CONFIG), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("--out" in err or "--positions" in err)
    assert not (tmp_path / "new").exists()


def test_c_reader_rejects_a_malformed_or_lying_manifest(tmp_path: Path) -> None:
    binary = _compiled_reader(tmp_path)
    out = tmp_path / "export"
    export(ropekit.load(SEED_CONFIG), out, positions=16)
    assert subprocess.run([str(binary), str(out), "3"], capture_output=True, check=False).returncode == 0
    text = (out / "manifest.txt").read_text()
    for forged in (text.replace("inv_freq 00", "inv_freq ../00"), text.replace("pairs 32", "pairs 32x"),
                   text + "layer evil pairs\n", text.replace("pairs 32", "pairs 64")):
        (out / "manifest.txt").write_text(forged)
        result = subprocess.run([str(binary), str(out), "3"], capture_output=True, text=True, check=False)
        assert result.returncode == 2, forged
    (out / "manifest.txt").write_text(text)
    inv = next(out.glob("*.inv_freq.f64"))
    inv.write_bytes(inv.read_bytes() + b"\0")  # a trailing byte: the table is not what the manifest says
    assert subprocess.run([str(binary), str(out), "3"], capture_output=True, check=False).returncode == 2


# --- multimodal tables: the column maps are numbers too ------------------------------------------

QWEN25_VL = {"model_type": "qwen2_5_vl_text", "hidden_size": 2048, "num_attention_heads": 16,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}}
ERNIE_VL = {"model_type": "ernie4_5_vl_moe_text", "hidden_size": 1024, "num_attention_heads": 8,
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [22, 22, 20]}}


@pytest.mark.parametrize(("config", "layout"), [(QWEN25_VL, "neox"), (QWEN25_VL, "half"), (ERNIE_VL, None)])
def test_c_reader_composes_multimodal_rows_from_three_position_streams(tmp_path: Path, config: Any,
                                                                       layout: Any) -> None:
    binary = _compiled_reader(tmp_path)
    table = ropekit.load(config).table
    manifest = export(ropekit.load(config), tmp_path / "export", positions=4096, layout=layout)
    record = manifest["layers"]["full_attention"]
    assert record["mrope"]["composition"] == table.mrope_composition and record["mrope"]["axes"] == 3
    chosen = layout or table.layout
    for positions in (["4000", "17", "250"], ["4000"]):
        done = subprocess.run([str(binary), str(tmp_path / "export"), *positions], capture_output=True, text=True,
                              check=True)
        rows = [line.split() for line in done.stdout.splitlines()]
        values = np.array([[float(row[3]), float(row[4])] for row in rows if row[1] == "mrope_column"])
        where = np.array([[int(p)] for p in positions]) if len(positions) == 3 else [int(positions[0])]
        cos, sin = table.cos_sin(where, dtype=np.float64, layout=chosen)
        np.testing.assert_allclose(values[:, 0], cos[0], atol=1e-12)
        np.testing.assert_allclose(values[:, 1], sin[0], atol=1e-12)
        diffs = [float(row[2]) for row in rows if row[1] == "cache_max_abs_diff"]
        assert diffs == ([] if len(positions) == 3 else [pytest.approx(0.0, abs=3e-7)])


GOLDEN_MROPE = {case["model_type"]: case for case in json.loads(
    (ROOT / "tests" / "data" / "golden" / "mrope.json").read_text(encoding="utf-8"))["cases"]}
COMPOSED = [
    ("qwen2_5_vl_text", None), ("qwen2_5_vl_text", "gptj"),  # consecutive sections, rotate-half / interleaved
    ("glm4v_text", None), ("glm4v_text", "half"),  # consecutive sections, gptj (a partial rotary)
    ("glm_image_text", None),  # consecutive sections, neox, partial rotary
    ("qwen3_vl_text", None), ("qwen3_vl_text", "half"),  # interleaved T, H, W
    ("hy_v4_vl_text", None),  # interleaved, unequal sections
    ("ernie4_5_vl_moe_text", None), ("ernie4_5_vl_moe_text", "neox"),  # H/W pairs then T
    ("hunyuan_vl_text", None),  # full width: 4 axes, a pair's halves on different axes
    ("neomme", None), ("neomme", "half"),  # row/col: 2 axes
]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compiled_reader(tmp_path_factory.mktemp("reader"))


@pytest.mark.parametrize(("model_type", "layout"), COMPOSED, ids=[f"{name}-{layout}" for name, layout in COMPOSED])
def test_c_reader_composes_every_golden_composition(reader: Path, tmp_path: Path, model_type: str,
                                                    layout: Any) -> None:
    """The C reader's rows from one position per axis equal ``cos_sin`` on the same positions, for
    each composition and layout the golden classes use, at several position tuples each."""
    case = GOLDEN_MROPE[model_type]
    model = ropekit.load(case["config"])
    table = model.rotating_table(case["layer_type"]) if case["layer_type"] in model.tables else model.rotating_table()
    manifest = export(model, tmp_path / "export", positions=64, layout=layout)
    record = manifest["layers"][table.layer_type]
    assert record["mrope"]["composition"] == table.mrope_composition and record["mrope"]["axes"] == table.mrope_axes
    rng = np.random.default_rng(zlib.crc32(model_type.encode()))
    golden = np.array(case["positions"])[:, 0, 0]  # a tuple transformers' module was run at
    tuples = [golden, np.zeros(table.mrope_axes, np.int64), np.arange(table.mrope_axes) * 1000 + 7,
              *rng.integers(0, 1 << 20, size=(3, table.mrope_axes))]
    for where in tuples:
        done = subprocess.run([str(reader), str(tmp_path / "export"), *map(str, where)], capture_output=True,
                              text=True, check=True)
        rows = [line.split() for line in done.stdout.splitlines()]
        values = np.array([[float(row[3]), float(row[4])] for row in rows
                           if row[0] == table.layer_type and row[1] == "mrope_column"])
        cos, sin = table.cos_sin(np.asarray(where)[:, None], dtype=np.float64, layout=layout or table.layout)
        assert values.shape == (cos.shape[1], 2), where
        np.testing.assert_allclose(values[:, 0], cos[0], atol=1e-12, err_msg=str(where))
        np.testing.assert_allclose(values[:, 1], sin[0], atol=1e-12, err_msg=str(where))


def test_c_reader_refuses_axis_counts_it_cannot_serve(tmp_path: Path) -> None:
    binary = _compiled_reader(tmp_path)
    export(ropekit.load(QWEN25_VL), tmp_path / "mm")
    wrong = subprocess.run([str(binary), str(tmp_path / "mm"), "1", "2"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "takes 3 positions" in wrong.stderr
    export(ropekit.load(SEED_CONFIG), tmp_path / "text")
    text = subprocess.run([str(binary), str(tmp_path / "text"), "1", "2", "3"], capture_output=True, text=True)
    assert text.returncode == 2 and "is a text table" in text.stderr


@pytest.mark.parametrize(("umask", "folder", "files"), [(0o022, 0o755, 0o644), (0o002, 0o775, 0o664),
                                                         (0o077, 0o700, 0o600)])
def test_the_export_honours_the_umask(tmp_path: Path, capsys: pytest.CaptureFixture[str], umask: int, folder: int,
                                      files: int) -> None:
    """The folder and its files get the modes every tool's mkdir and open give them (not mkdtemp's 0700)."""
    previous = os.umask(umask)
    try:
        assert main(["export", str(SEED_CONFIG), "--out", str(tmp_path / "out"), "--positions", "16"]) == 0
        assert main(["export", str(SEED_CONFIG), "--out", str(tmp_path / "out"), "--positions", "8"]) == 0  # replaced
    finally:
        os.umask(previous)
    capsys.readouterr()
    assert (tmp_path / "out").stat().st_mode & 0o777 == folder
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "out").iterdir()}
    assert "manifest.json" in modes and set(modes.values()) == {files}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]  # no staging folder left beside it
