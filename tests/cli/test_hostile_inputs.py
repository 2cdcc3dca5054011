"""Every failure class issue #46's campaign found, in a real ``python -m ropekit`` process, with the inputs that
found it and new ones of the same class: exit 2 with one escaped line naming the file and the place (a malformed
file or config), exit 1 naming a non-finite value an artifact states (valid ``--json``), output that never fails on
the terminal's encoding, and no traceback anywhere."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..support import ARTIFACTS, SEED_CONFIG

onnx = pytest.importorskip("onnx", reason="the onnx reader extra (ropekit[onnx]) is not installed")
pytest.importorskip("gguf", reason="the gguf reader extra (ropekit[gguf]) is not installed")

LLAMA3 = ARTIFACTS / "gguf_llama3" / "config.json"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ropekit", *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, **(env or {})}, errors="backslashreplace")


def _refused(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, one line on stderr holding every needle, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ropekit: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# -- GGUF: counts that lie ------------------------------------------------------------------------------------

def _string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def gguf_bytes(*, kv: list[bytes] | None = None, n_kv: int | None = None, n_tensors: int = 0,
               tail: bytes = b"") -> bytes:
    """A GGUF v3 header with the key-value records ``kv`` (``n_kv`` and ``n_tensors`` as stated, true or not)."""
    records = kv if kv is not None else [_string("general.architecture") + struct.pack("<I", 8) + _string("llama")]
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(records) if n_kv is None else n_kv)
    return head + b"".join(records) + tail


ARCH = _string("general.architecture") + struct.pack("<I", 8) + _string("llama")
SCORES_LIE = _string("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 2**64 - 1)
"""The campaign's 114-byte hang: a float32 array claiming 2**64 - 1 items."""

LYING_GGUFS: dict[str, tuple[bytes, str]] = {
    "scores_count": (gguf_bytes(kv=[ARCH, SCORES_LIE]), "'tokenizer.ggml.scores': an array of 18446744073709551615"),
    "string_array_count": (gguf_bytes(kv=[ARCH, _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**40)]),
                           "'tokenizer.ggml.tokens': an array of 1099511627776"),
    "kv_count": (gguf_bytes(n_kv=2**63), "header kv_count: 9223372036854775808"),
    "tensor_count": (gguf_bytes(n_tensors=2**62), "header tensor_count"),
    "key_length": (gguf_bytes(kv=[struct.pack("<Q", 2**63) + b"x" * 16]), "key #0 name: a length of 9223372036854775808"),
    "string_length": (gguf_bytes(kv=[_string("general.architecture") + struct.pack("<IQ", 8, 2**50)]),
                      "key 'general.architecture'"),
    "nested_arrays": (gguf_bytes(kv=[ARCH, _string("x.y") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 8]),
                      "arrays nested deeper than 4"),
    "tensor_dims": (gguf_bytes(kv=[ARCH], n_tensors=1, tail=_string("rope_freqs.weight") + struct.pack(
        "<I4QIQ", 4, 2**20, 2**20, 2**20, 2**20, 0, 0)), "tensor 'rope_freqs.weight': dims"),
    "tensor_offset": (gguf_bytes(kv=[ARCH], n_tensors=1, tail=_string("rope_freqs.weight") + struct.pack(
        "<IQIQ", 1, 4, 0, 2**40) + b"\0" * 64), "tensor 'rope_freqs.weight'"),
    "value_type": (gguf_bytes(kv=[ARCH, _string("llama.x") + struct.pack("<I", 77)]), "value type 77"),
}


@pytest.mark.parametrize("case", sorted(LYING_GGUFS))
def test_a_gguf_that_lies_about_a_count_is_refused_by_name(tmp_path: Path, case: str) -> None:
    data, needle = LYING_GGUFS[case]
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(data)
    _refused(_cli("audit", str(LLAMA3), "--served", str(path)), str(path), "not a GGUF llama.cpp would load", needle)


def test_the_lying_gguf_is_refused_by_repair_and_scan_too(tmp_path: Path) -> None:
    path = tmp_path / "lie.gguf"
    path.write_bytes(gguf_bytes(kv=[ARCH, SCORES_LIE]))
    assert len(path.read_bytes()) == 114  # the campaign's file, byte for byte
    _refused(_cli("repair", str(LLAMA3), "--served", str(path), "--out", str(tmp_path / "out.gguf")),
             "tokenizer.ggml.scores")
    assert not (tmp_path / "out.gguf").exists() and sorted(os.listdir(tmp_path)) == ["lie.gguf"]
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(LLAMA3, model / "config.json")
    shutil.copy(path, model / "model.gguf")
    result = _cli("scan", str(model), "--audit", "--json")
    assert "Traceback" not in result.stderr and result.returncode in (0, 1, 2)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert any("tokenizer.ggml.scores" in json.dumps(row) for row in rows), result.stdout


# -- ONNX: tensors and attributes no producer writes ------------------------------------------------------------

def _onnx_pack(tmp_path: Path, tensor: Any, nodes: list[Any] | None = None) -> Path:
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes or [helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], initializer=[tensor])
    pack = tmp_path / "pack"
    pack.mkdir()
    onnx.save(helper.make_model(graph), pack / "model.onnx")
    return pack


@pytest.mark.parametrize("element_type", [0, 99, 7])
def test_an_onnx_table_of_an_undefined_unknown_or_integer_type_is_refused(tmp_path: Path, element_type: int) -> None:
    from onnx import TensorProto

    tensor = TensorProto(name="model.rotary_emb.inv_freq", data_type=element_type, dims=[4], raw_data=b"\0" * 16)
    pack = _onnx_pack(tmp_path, tensor)
    _refused(_cli("audit", str(SEED_CONFIG), "--served", str(pack)), "model.rotary_emb.inv_freq",
             f"element type {element_type}", "a RoPE table is one of float32")


@pytest.mark.parametrize("dims", [[4, 4], [2**40], [0, 2**62]])
def test_onnx_dims_that_do_not_match_the_data_are_refused(tmp_path: Path, dims: list[int]) -> None:
    from onnx import TensorProto

    tensor = TensorProto(name="cos_cache", data_type=TensorProto.FLOAT, dims=dims, raw_data=b"\0" * 16)
    pack = _onnx_pack(tmp_path, tensor)
    _refused(_cli("audit", str(SEED_CONFIG), "--served", str(pack)), "tensor graph:cos_cache", f"dims {dims}")


@pytest.mark.parametrize("value", [b"wide", 2.5, [1, 2]])
def test_an_onnx_attribute_of_the_wrong_type_is_refused_by_node(tmp_path: Path, value: Any) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("RotaryEmbedding", ["x", "p", "cos_cache", "sin_cache"], ["y"],
                            name="/model/layers.0/attn/q_rotary/RotaryEmbedding", domain="com.microsoft",
                            rotary_embedding_dim=value)
    tensor = numpy_helper.from_array(np.ones((8, 4), np.float32), "cos_cache")
    partner = helper.make_node("Constant", [], ["sin_cache"], value=numpy_helper.from_array(
        np.zeros((8, 4), np.float32), "sin_cache"))
    pack = _onnx_pack(tmp_path, tensor, [partner, node])
    _refused(_cli("audit", str(SEED_CONFIG), "--served", str(pack)), "/model/layers.0/attn/q_rotary/RotaryEmbedding",
             "attribute rotary_embedding_dim", "an integer is valid")
    del TensorProto


def test_a_multi_line_message_from_the_onnx_package_is_one_escaped_line(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "model.onnx").write_bytes(b"\x0a\x05line1\x0aline2\x1b[31m" * 3)
    line = _refused(_cli("audit", str(SEED_CONFIG), "--served", str(pack)), "model.onnx")
    assert "\x1b" not in line


def test_onnx_external_data_outside_the_folder_or_the_file_is_refused(tmp_path: Path) -> None:
    from onnx import TensorProto

    for name, entries, needle in (("outside", {"location": "../x.bin"}, "a file name inside the model's folder"),
                                  ("past_end", {"location": "w.bin", "offset": "0", "length": "4096"},
                                   "the data must lie inside the file")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "w.bin").write_bytes(b"\0" * 16)
        tensor = TensorProto(name="cos_cache", data_type=TensorProto.FLOAT, dims=[2, 2],
                             data_location=TensorProto.EXTERNAL)
        for key, value in entries.items():
            tensor.external_data.add(key=key, value=value)
        pack = _onnx_pack(folder, tensor)
        (pack / "w.bin").write_bytes(b"\0" * 16)
        _refused(_cli("audit", str(SEED_CONFIG), "--served", str(pack)), "cos_cache", needle)


# -- OpenVINO IR: edges and numbers ---------------------------------------------------------------------------

def _ir(tmp_path: Path, edit: str, replacement: str) -> Path:
    source = ARTIFACTS / "openvino" / "llama3"
    folder = tmp_path / "ir"
    shutil.copytree(source, folder)
    text = (folder / "openvino_model.xml").read_text()
    assert edit in text
    (folder / "openvino_model.xml").write_text(text.replace(edit, replacement, 1))
    return folder


@pytest.mark.parametrize(("edit", "replacement", "needle"), [
    ('<edge from-layer="', '<edge from-layer="99999', "edge #0 from-layer='99999"),
    ('to-layer="', 'to-layer="x', "to-layer='x"),
    ('to-port="', 'to-port="one', "edge #0 to-port is 'one"),
    ("<dim>", "<dim>4.5", "output dim is '4.5"),
    ('shape="" offset="', 'shape="" offset="-1', "offset is -1"),
    ('shape="96, 64"', 'shape="96, 6x4"', "shape is ' 6x4'"),
])
def test_an_openvino_ir_with_a_broken_edge_or_number_is_refused(tmp_path: Path, edit: str, replacement: str,
                                                                needle: str) -> None:
    folder = _ir(tmp_path, edit, replacement)
    _refused(_cli("audit", str(ARTIFACTS / "openvino" / "llama3" / "config.json"), "--served", str(folder)),
             "openvino_model.xml", needle)


# -- Genie: blocks that are not objects, numbers that break the smoothing, NaN ----------------------------------

@pytest.mark.parametrize(("config", "needle"), [
    ({"dialog": {"engine": {"model": 5}}}, "dialog.engine.model is 5 (int); Genie reads an object there"),
    ({"dialog": {"engine": {"backend": [1]}}}, "dialog.engine.backend is [1] (list)"),
    ({"dialog": {"engine": {"backend": {"QnnHtp": "x"}}}}, "dialog.engine.backend.QnnHtp is 'x' (str)"),
    ({"dialog": {"engine": {}, "context": 3}}, "dialog.context is 3 (int)"),
    ({"dialog": {"engine": {"model": {"positional-encoding": [1]}}}},
     "dialog.engine.model.positional-encoding is [1] (list)"),
])
def test_a_genie_block_that_is_not_an_object_is_refused_by_path(tmp_path: Path, config: Any, needle: str) -> None:
    path = tmp_path / "genie_config.json"
    path.write_text(json.dumps(config))
    _refused(_cli("audit", str(LLAMA3), "--served", str(path)), str(path), needle)


def _llama3_genie(**scaling: float) -> dict[str, Any]:
    block = {"rope-type": "llama3", "factor": 8.0, "low-freq-factor": 1.0, "high-freq-factor": 4.0,
             "original-max-position-embeddings": 8192, **scaling}
    return {"dialog": {"engine": {"model": {"positional-encoding": {"rope-theta": 500000, "rope-dim": 32,
                                                                    "rope-scaling": block}}}}}


@pytest.mark.parametrize(("key", "value", "valid"), [
    ("low-freq-factor", 0, "a number > 0"), ("factor", -1, "a number > 0"),
    ("high-freq-factor", 1.0, "a number > low-freq-factor (1)"), ("original-max-position-embeddings", 0, "> 0"),
])
def test_llama3_values_its_smoothing_cannot_use_are_refused(tmp_path: Path, key: str, value: float,
                                                            valid: str) -> None:
    path = tmp_path / "genie_config.json"
    path.write_text(json.dumps(_llama3_genie(**{key: value})))
    _refused(_cli("audit", str(LLAMA3), "--served", str(path)), f"rope-scaling.{key} is {value:g}", valid)


@pytest.mark.parametrize("where", ["rope-theta", "factor"])
def test_a_non_finite_genie_value_is_a_mismatch_naming_it_and_json_stays_valid(tmp_path: Path, where: str) -> None:
    config = _llama3_genie()
    encoding = config["dialog"]["engine"]["model"]["positional-encoding"]
    (encoding if where == "rope-theta" else encoding["rope-scaling"])[where] = float("nan")
    path = tmp_path / "genie_config.json"
    path.write_text(json.dumps(config))
    result = _cli("audit", str(LLAMA3), "--served", str(path), "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} in --json"))
    assert document["verdict"] == "mismatch"
    name = where if where == "rope-theta" else f"rope-scaling.{where}"
    assert f"states {name} nan: not a finite number" in document["layers"]["full_attention"]["served_as"]
    text = _cli("audit", str(LLAMA3), "--served", str(path))
    assert text.returncode == 1 and f"{name} nan" in text.stdout


@pytest.mark.parametrize("body", ['{"dialog":' * 50000 + "1" + "}" * 50000,
                                  '{"dialog": {"engine": ' + "[" * 50000 + "]" * 50000 + "}}"])
def test_deeply_nested_json_is_refused_in_format_detection_and_the_genie_reader(tmp_path: Path, body: str) -> None:
    for target in (tmp_path / "deep.json", tmp_path / "bundle" / "genie_config.json"):
        target.parent.mkdir(exist_ok=True)
        target.write_text(body)
        served = target if target.name == "deep.json" else target.parent
        _refused(_cli("audit", str(LLAMA3), "--served", str(served)), "JSON nested", "at most 64")


# -- configs, scan ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "path"), [
    ({"architectures": [[]], "model_type": "baichuan"}, "architectures[0]"),
    ({"architectures": "LlamaForCausalLM", "model_type": "llama"}, "architectures"),
    ({"model_type": "llava", "text_config": {"architectures": [{}], "model_type": "llama"}},
     "text_config.architectures[0]"),
])
def test_a_config_whose_architectures_are_not_names_is_refused_by_path(tmp_path: Path, config: Any, path: str) -> None:
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config))
    result = _cli("inspect", str(file), "--json")
    _refused(result, f"{path}: expected a")
    assert json.loads(result.stdout)["key"] == path


def test_scan_over_a_folder_named_in_another_encoding_prints_it_escaped(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    for name in (b"\xffbad", b"ok", b"esc\x1b[2J"):
        os.makedirs(root + b"/" + name)
        shutil.copy(os.fsencode(SEED_CONFIG), root + b"/" + name + b"/config.json")
    for args in ((), ("--json",)):
        result = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(tmp_path), *args], capture_output=True,
                                timeout=120, check=False, env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr
        out = result.stdout.decode("utf-8")  # strict: what was printed is valid UTF-8
        assert "\\udcffbad" in out and "\x1b" not in out.replace("\\u001b", "")
        if args:
            rows = [json.loads(line) for line in out.splitlines()]
            assert len(rows) == 4 and rows[-1]["summary"]["models"] == 3


# -- ExecuTorch programs, safetensors and .npy files that lie about their counts and sizes ----------------------

@pytest.mark.parametrize(("suffix", "needle"), [
    (".pte", "its tables are referenced over and over"),
    (".safetensors", "more than 4096 inv_freq tensors"),
    (".npy", "FloatingPointError: overflow"),
])
def test_a_pte_safetensors_or_npy_that_lies_is_refused_by_name(tmp_path: Path, suffix: str, needle: str) -> None:
    """One lie of each table reader's class: a program aliasing one vector of tables thousands of times, more
    inv_freq tensors than a model has, an .npy shape whose size overflows (with warnings as errors: no warning
    escapes in its place)."""
    path = tmp_path / f"lie{suffix}"
    if suffix == ".pte":
        from ..artifacts.test_pte import hostile_program

        path.write_bytes(hostile_program(plans=3000, values=3000))
    elif suffix == ".safetensors":
        pytest.importorskip("safetensors", reason="the safetensors reader extra (ropekit[safetensors]) is not installed")
        header = json.dumps({f"l{i}.inv_freq": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
                             for i in range(5000)}).encode()
        path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0\x80\x3f" * 5000)
    else:
        text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }"
        text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
        path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + b"\0" * 64)
    _refused(_cli("audit", str(LLAMA3), "--served", str(path), env={"PYTHONWARNINGS": "error"}), str(path), needle)
