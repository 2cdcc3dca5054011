"""Fuzzing in the suite (issue #46): mutated copies of every committed artifact through each reader, audit and
repair, and structure-aware configs through load / cos_sin / at / for_layer, all held to the contract in
``tests/fuzzing.py``; the reproducers a campaign kept (``tests/data/fuzz/<target>/``) replayed; and the memory
bounds of docs/audit.md enforced under ``RLIMIT_AS`` (the GGUF reader's, the ``.pte``, safetensors and ``.npy``
readers') on files that lie about their counts and sizes.

Hypothesis profiles: ``ropekit-ci`` (the default: a small fixed budget, derandomized, so every suite run checks
the same inputs) and ``ropekit-fuzz`` (``HYPOTHESIS_PROFILE=ropekit-fuzz``: 2,000 random examples a test, for
longer local runs).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ropekit

from .. import fuzzing

pytest.importorskip("onnx", reason="the onnx reader extra (ropekit[onnx]) is not installed")
pytest.importorskip("gguf", reason="the gguf reader extra (ropekit[gguf]) is not installed")

settings.register_profile("ropekit-ci", max_examples=25, derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ropekit-fuzz", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ropekit-ci")
                               if os.environ.get("HYPOTHESIS_PROFILE", "").startswith("ropekit-") else "ropekit-ci")
ARTIFACT_TARGETS = [name for name in fuzzing.TARGETS if name != "load"]


@pytest.mark.parametrize("name", ARTIFACT_TARGETS)
def test_every_committed_seed_keeps_the_contract(name: str) -> None:
    for data in fuzzing.seeds(name)[:3]:
        assert fuzzing.check(name, data) is None


@pytest.mark.parametrize("name", ARTIFACT_TARGETS)
@settings(parent=PROFILE)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), edits=st.integers(min_value=1, max_value=6))
def test_mutated_artifacts_keep_the_contract(name: str, seed: int, edits: int) -> None:
    """A committed artifact with 1 to 6 edits (bit flips, edge bytes, integers replaced by lies, runs cut or
    repeated, the tail dropped): read, audited and (where ropekit rewrites the format) repaired."""
    rng = np.random.default_rng(seed)
    corpus = fuzzing.seeds(name)
    data = fuzzing.mutate(corpus[int(rng.integers(len(corpus)))], rng, edits)
    assert fuzzing.check(name, data) is None


@pytest.mark.parametrize("path", [pytest.param(path, id=f"{name}/{path.name}") for name in fuzzing.TARGETS
                                  for path in fuzzing.reproducers(name)])
def test_every_reproducer_a_campaign_kept_now_holds(path: Path) -> None:
    assert fuzzing.check(path.parent.name, path.read_bytes()) is None


# -- structure-aware configs ----------------------------------------------------------------------------------

_JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**40), st.floats(allow_nan=True),
                         st.text(max_size=6))
_JSON = st.recursive(_JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                     max_leaves=8)
_IDENTITY_KEYS = ["architectures", "model_type", "text_config", "rope_scaling", "rope_parameters", "layer_types",
                  "auto_map", "num_hidden_layers", "head_dim", "no_rope_layers", "sliding_window_pattern",
                  "rope_theta", "partial_rotary_factor", "max_position_embeddings", "hidden_size",
                  "num_attention_heads", "kv_channels", "rotary_dim", "use_dynamic_ntk", "seq_length"]


@st.composite
def structured_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A committed config (every family the artifacts hold) with keys replaced by JSON of any shape: the
    structure the readers of ``model_type``, ``architectures``, nested configs and layer plans meet."""
    paths = sorted(fuzzing.ARTIFACTS.rglob("config.json"))
    config: dict[str, Any] = json.loads(draw(st.sampled_from(paths)).read_text())
    for _ in range(draw(st.integers(1, 3))):
        holder = config
        if isinstance(config.get("text_config"), dict) and draw(st.booleans()):
            holder = config["text_config"]
        holder[draw(st.sampled_from(_IDENTITY_KEYS))] = draw(_JSON)
    return config


@settings(parent=PROFILE, max_examples=PROFILE.max_examples * 4)
@given(structured_configs(), st.one_of(st.integers(-2, 70), st.text(max_size=2), st.none(), st.floats()))
def test_structured_configs_through_load_cos_sin_at_and_for_layer(config: dict[str, Any], index: Any) -> None:
    data = json.dumps(config, allow_nan=True).encode()
    assert fuzzing.check("load", data) is None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a look-alike key read anyway is a warning
            model = ropekit.load(config)
    except ropekit.RopeConfigError:
        return  # its message's one line is checked by fuzzing.check above
    if isinstance(index, int) and not isinstance(index, bool):
        with contextlib.suppress(ropekit.LayerIndexError, ropekit.LayerLookupError):
            model.for_layer(index)
    else:
        with pytest.raises(ropekit.ArgumentTypeError):
            model.for_layer(index)


# -- the GGUF reader's memory bound ---------------------------------------------------------------------------

_BOUNDED = textwrap.dedent('''
    import os, resource, sys
    from ropekit.artifacts.read import read_artifact
    import ropekit
    read_artifact(sys.argv[1])  # warm: every module the reader needs imported, numpy's pools made
    size = os.path.getsize(sys.argv[2])
    with open("/proc/self/status") as status:
        now = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    limit = now + int(sys.argv[3]) * size + (64 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        read_artifact(sys.argv[2])
    except ropekit.ArgumentError as error:
        print("refused", error.problem)
    else:
        print("read")
''')


def _gguf_lying_about_everything(path: Path, padding: int) -> None:
    """A GGUF whose every count lies: its key, tensor, array and string counts, tensor dims and offsets; bytes
    enough (``padding``) that no single lie is refused by the file's size before the reader meets it."""
    import struct

    from ..cli.test_hostile_inputs import _string, gguf_bytes

    records = [_string("general.architecture") + struct.pack("<I", 8) + _string("llama"),
               _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**63 - 1),
               _string("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 2**64 - 1)]
    path.write_bytes(gguf_bytes(kv=records, n_kv=2**40, n_tensors=2**60) + b"\xff" * padding)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status: Linux")
@pytest.mark.parametrize("padding", [0, 1 << 16, 1 << 24])
def test_the_gguf_reader_stays_within_its_memory_bound_on_a_file_that_lies(tmp_path: Path, padding: int) -> None:
    """docs/audit.md's bound: reading a GGUF adds at most 4 x its size + 64 MiB of address space."""
    path = tmp_path / "lie.gguf"
    _gguf_lying_about_everything(path, padding)
    result = subprocess.run([sys.executable, "-c", _BOUNDED, str(fuzzing.ARTIFACTS / "gguf_llama3" / "model.gguf"),
                             str(path), "4"], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and result.stdout.startswith("refused"), result.stderr[-2000:]
    assert "not a GGUF llama.cpp would load" in result.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status: Linux")
def test_a_large_honest_gguf_is_read_within_the_same_bound(tmp_path: Path) -> None:
    """A tokenizer of 200,000 strings and scores (skipped, one length at a time) costs no more than the bound."""
    import gguf

    path = tmp_path / "big.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("llama.block_count", 2)
    writer.add_uint32("llama.attention.head_count", 2)
    writer.add_uint32("llama.embedding_length", 64)
    writer.add_token_list([f"token{index}" for index in range(200_000)])
    writer.add_token_scores([float(index) for index in range(200_000)])
    writer.add_tensor("output_norm.weight", np.ones(4, dtype=np.float32))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    result = subprocess.run([sys.executable, "-c", _BOUNDED, str(fuzzing.ARTIFACTS / "gguf_llama3" / "model.gguf"),
                             str(path), "4"], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "read", result.stderr[-2000:]


# -- the .pte, safetensors and .npy readers' memory bound -----------------------------------------------------

TABLE_FACTOR = 8
"""docs/audit.md's bound for the readers that decode whole tables (.pte, safetensors, .npy): at most 8 x the file
+ 64 MiB of address space beyond the warmed process. The float64 tables alone are 4x a half-precision file; the
mapping and one table's raw bytes on the way are at most 2x more."""
_WARM = {"pte": fuzzing.ARTIFACTS / "pte_llama32_xnnpack" / "model.pte",
         "safetensors": fuzzing.ARTIFACTS / "onnx_llama_yarn" / "checkpoint" / "model.safetensors"}


def _within_the_bound(kind: str, path: Path, warm: Path | None = None) -> str:
    """What reading ``path`` under ``RLIMIT_AS`` (the table readers' bound) printed: ``read`` or ``refused ...``."""
    result = subprocess.run([sys.executable, "-c", _BOUNDED, str(warm or _WARM[kind]), str(path), str(TABLE_FACTOR)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def _npy(header: str, data: bytes, version: int = 1) -> bytes:
    """A ``.npy`` written by hand: magic, version, header length, the header dict, the data."""
    import struct

    text = header.encode("latin-1")
    width = 2 if version == 1 else 4
    text += b" " * (-(6 + 2 + width + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H" if version == 1 else "<I", len(text)) + text + data


_NPY_LIES = {
    "shape past the end": ("{'descr': '<f2', 'fortran_order': False, 'shape': (1073741824, 64), }", 1,
                           "mmap length is greater than file size"),
    "shape overflowing": ("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", 1,
                          "FloatingPointError: overflow"),
    "negative shape": ("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 8), }", 1, "negative dimensions"),
    "header of 2**32 - 1 bytes": ("{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }" + " " * 20_000, 2,
                                  "may not be safe to load securely"),
    "an item of 1 GiB": ("{'descr': '|V1073741824', 'fortran_order': False, 'shape': (1,), }", 1,
                         "mmap length is greater than file size"),
}


@pytest.mark.parametrize("lie", sorted(_NPY_LIES))
def test_an_npy_that_lies_about_its_size_is_refused_in_one_line(tmp_path: Path, lie: str) -> None:
    """numpy's own checks bound a .npy (a header of at most 10,000 bytes, a shape the file holds, sizes that do not
    overflow) after ropekit's (a file of at most 1 GiB): each lie is one line naming the file."""
    from ropekit.artifacts.read import read_artifact

    header, version, words = _NPY_LIES[lie]
    path = tmp_path / "lie.npy"
    path.write_bytes(_npy(header, b"\0" * 4096, version))
    with pytest.raises(ropekit.ArgumentError) as caught:
        read_artifact(path)
    assert "\n" not in str(caught.value) and f"{path}: cannot read as an array file" in str(caught.value)
    assert words in str(caught.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _within_the_bound("npy", path, warm=_warm_npy(tmp_path)).startswith("refused")


def _warm_npy(tmp_path: Path) -> Path:
    warm = tmp_path / "warm.npy"
    if not warm.exists():
        warm.write_bytes(fuzzing.seeds("npy")[0])
    return warm


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status: Linux")
@pytest.mark.parametrize("dtype", ["<f2", "<f4", "<f8"])
def test_a_large_honest_npy_is_read_within_the_table_bound(tmp_path: Path, dtype: str) -> None:
    """A [131072, 64] cos cache (16 MiB as float16, its float64 copy 64 MiB): read under the bound."""
    path = tmp_path / "cos.npy"
    np.save(path, np.cos(np.outer(np.arange(131072), np.ones(64))).astype(dtype))
    assert _within_the_bound("npy", path, warm=_warm_npy(tmp_path)) == "read"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status: Linux")
@pytest.mark.parametrize(("case", "words"), [
    ({"plans": 3000, "values": 3000}, "its tables are referenced over and over"),
    ({"plans": 3000, "delegates": 3000}, "its tables are referenced over and over"),
    ({"dims": 1_000_000}, "a tensor of 1000000 dims"),
    ({"constants": 400, "shift": 1, "rows": 20_000, "columns": 64}, "tensors overlapping in storage"),
])
def test_the_pte_reader_stays_within_its_memory_bound_on_a_program_that_lies(tmp_path: Path, case: dict[str, int],
                                                                             words: str) -> None:
    """Programs that alias one vector of tables thousands of times (millions of visits from kilobytes), claim a
    million dims, or hold 200 overlapping views of one 5 MB buffer (each decoded whole: 2 GB before #46)."""
    from .test_pte import hostile_program

    path = tmp_path / "lie.pte"
    path.write_bytes(hostile_program(**case))
    printed = _within_the_bound("pte", path)
    assert printed.startswith("refused") and words in printed, printed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status: Linux")
def test_a_large_honest_pte_is_read_within_the_table_bound(tmp_path: Path) -> None:
    """A [65536, 64] float32 cos/sin pair (32 MiB) referred to by 2,000 tensors: one table, read once."""
    from .test_pte import hostile_program

    path = tmp_path / "big.pte"
    path.write_bytes(hostile_program(rows=65536, columns=64, constants=2000))
    assert _within_the_bound("pte", path) == "read"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status: Linux")
@pytest.mark.skipif(importlib.util.find_spec("safetensors") is None,
                    reason="safetensors is not installed: pip install 'ropekit[safetensors]'")
@pytest.mark.parametrize(("count", "dtype", "printed"), [
    (5000, "BF16", "refused"),  # more inv_freq tensors than a model has
    (4096, "BF16", "read"),
    (4096, "F16", "read"),
])
def test_the_safetensors_reader_stays_within_its_memory_bound(tmp_path: Path, count: int, dtype: str,
                                                              printed: str) -> None:
    """Thousands of inv_freq tensors of 2,048 entries each (16 MiB): refused past 4,096, else read under the bound
    (each bfloat16 one parsed the whole header again before #46)."""
    import json

    entries = 2048
    header = json.dumps({f"model.layers.{i}.rotary_emb.inv_freq": {
        "dtype": dtype, "shape": [entries], "data_offsets": [2 * entries * i, 2 * entries * (i + 1)]}
        for i in range(count)}).encode()
    path = tmp_path / "many.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x80\x3f" * entries * count)
    assert _within_the_bound("safetensors", path).startswith(printed)
