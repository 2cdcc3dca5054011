"""Fuzzing in the suite (issue #46): mutated copies of every committed artifact through each reader, audit and
repair, and structure-aware configs through load / cos_sin / at / for_layer, all held to the contract in
``tests/fuzzing.py``; the reproducers a campaign kept (``tests/data/fuzz/<target>/``) replayed; and the GGUF
reader's memory bound enforced under ``RLIMIT_AS`` on files that lie about every count.

Hypothesis profiles: ``ropekit-ci`` (the default: a small fixed budget, derandomized, so every suite run checks
the same inputs) and ``ropekit-fuzz`` (``HYPOTHESIS_PROFILE=ropekit-fuzz``: 2,000 random examples a test, for
longer local runs).
"""

from __future__ import annotations

import contextlib
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
    limit = now + 4 * size + (64 << 20)
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
                             str(path)], capture_output=True, text=True, timeout=300, check=False)
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
                             str(path)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "read", result.stderr[-2000:]
