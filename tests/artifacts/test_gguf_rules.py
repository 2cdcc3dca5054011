"""llama.cpp's per-architecture, per-layer RoPE rules in ``ropekit audit`` (issue #24).

The ``gguf_*`` artifacts named below were made by llama.cpp's own ``convert_hf_to_gguf.py``
(llama-cpp-python 0.3.36) from tiny random checkpoints (``scripts/artifacts/gguf_convert.py``); each is
audited against the config it was converted from, kept beside it. The edge cases below them are
GGUFs written with ``gguf.GGUFWriter``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ropekit
from ropekit.artifacts.audit import audit_artifact
from ropekit.artifacts.formats.gguf.llama_cpp import modelled, rules_for
from ropekit.artifacts.read import read_artifact

from ..support import ARTIFACTS

gguf = pytest.importorskip("gguf", reason="the gguf reader extra (ropekit[gguf]) is not installed")

# artifact: (verdict, {layer index: (rotates, cache, verdict)}, words the mismatching layers' reasons hold)
PRODUCED: dict[str, tuple[str, dict[int, tuple[bool, str | None, str]], str]] = {
    "gguf_gemma3": ("match", {0: (True, "swa", "match"), 4: (True, "swa", "match"), 5: (True, "global", "match")},
                    ""),
    "gguf_smollm3": ("match", {2: (True, "global", "match"), 3: (False, None, "match")}, ""),
    "gguf_smollm3_all_rope": ("mismatch", {2: (True, "global", "match"), 3: (False, None, "mismatch")},
                              "layer 3 (full_attention) applies no RoPE in llama.cpp (smollm3: RoPE dropped where "
                              "(il + 1) % 4 == 0"),
    "gguf_llama4_all_rope": ("mismatch", {0: (True, "global", "match"), 1: (False, None, "mismatch")},
                             "drops RoPE on the last layer"),
    "gguf_gpt_oss_yarn": ("mismatch", {0: (True, "swa", "mismatch"), 1: (True, "global", "mismatch")},
                          "yarn with truncation"),
    "gguf_stablelm_base": ("mismatch", {0: (True, "global", "mismatch")},
                           "plain RoPE at the file's freq_base 10000 (rope.freq_base absent: llama.cpp's default), "
                           "not the declared rope_theta 50000"),
    "gguf_gptneox_keys": ("mismatch", {1: (True, "global", "mismatch")}, "plain RoPE at the file's freq_base 10000"),
}
LAYER_KEYS = {"index", "layer_type", "rotates", "cache", "rotary_dim", "interleaved", "verdict", "reason"}


def _audit(name: str, **kwargs: Any) -> dict[str, Any]:
    folder = ARTIFACTS / name
    return audit_artifact(ropekit.load(folder / "config.json"), read_artifact(folder / "model.gguf", **kwargs)).to_json()


@pytest.mark.parametrize("name", sorted(PRODUCED))
def test_each_converted_checkpoint_is_audited_per_layer(name: str) -> None:
    verdict, layers, words = PRODUCED[name]
    report = _audit(name)
    assert report["verdict"] == verdict
    entries = report["artifact"]["layers"]
    assert [entry["index"] for entry in entries] == list(range(len(entries)))
    assert all(set(entry) == LAYER_KEYS for entry in entries)
    for index, (rotates, cache, layer_verdict) in layers.items():
        entry = entries[index]
        assert (entry["rotates"], entry["cache"], entry["verdict"]) == (rotates, cache, layer_verdict), entry
        if layer_verdict == "mismatch":
            assert words in entry["reason"] and f"layer {index}" in entry["reason"]
    if verdict == "mismatch":
        assert any(words in layer.get("served_as", "") for layer in report["layers"].values())
    json.dumps(report, allow_nan=False)


def test_the_declared_plan_is_transformers_plan() -> None:
    """What the configs declare per layer (``ropekit.load``) is what transformers' code does (measured by the
    generator from transformers' own config classes): the audit's reference is right."""
    manifest = json.loads((ARTIFACTS / "MANIFEST.json").read_text())["artifacts"]
    for name in PRODUCED:
        model = ropekit.load(ARTIFACTS / name / "config.json")
        for layer in manifest[name]["measured"]["transformers_layers"]:
            declared = model.for_layer(layer["index"])
            assert (declared is not None) == layer["rotates"], (name, layer)
            if declared is not None:
                table = manifest[name]["measured"]["transformers_tables"][layer["layer_type"]]
                assert declared.inv_freq == pytest.approx(table["inv_freq"], rel=1e-6), (name, layer)


def test_gemma3_sliding_layers_use_the_swa_base_and_scale_1() -> None:
    artifact = read_artifact(ARTIFACTS / "gguf_gemma3" / "model.gguf")
    assert artifact.engine["caches"] == {"global": {"freq_base": 1e6, "freq_scale": 0.125},
                                         "swa": {"freq_base": 1e4, "freq_scale": 1.0}}
    assert artifact.engine["rope_mode"] == "neox"
    assert [layer["swa"] for layer in artifact.engine["layers"]] == [True] * 5 + [False]
    report = _audit("gguf_gemma3")
    assert set(report["layers"]) == {"sliding_attention", "full_attention"}
    assert report["artifact"]["layers"][5]["interleaved"] is False


def test_interleaved_follows_llama_cpp_rope_mode() -> None:
    entry = _audit("gguf_smollm3")["artifact"]["layers"][0]
    assert entry["interleaved"] is True and entry["rotary_dim"] == 32


# --- edge cases written with GGUFWriter ---------------------------------------------------------------------------


def _write(path: Path, arch: str, keys: dict[str, Any]) -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in keys.items():
        name = f"{arch}.{key}"
        if isinstance(value, bool):
            writer.add_bool(name, value)
        elif isinstance(value, int):
            writer.add_uint32(name, value)
        elif isinstance(value, float):
            writer.add_float32(name, value)
        elif isinstance(value, str):
            writer.add_string(name, value)
        else:
            writer.add_array(name, value)
    import numpy as np

    writer.add_tensor("output_norm.weight", np.ones(4, dtype=np.float32))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    return path


GEOMETRY = {"embedding_length": 64, "attention.head_count": 2, "attention.key_length": 32, "context_length": 256}
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 2, "head_dim": 32,
          "num_hidden_layers": 6, "max_position_embeddings": 256, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
          "sliding_window": 16, "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}


def _gemma3_file(tmp_path: Path, **keys: Any) -> Path:
    return _write(tmp_path / "gemma3.gguf", "gemma3", {**GEOMETRY, "block_count": 6, "rope.freq_base": 1e6,
                                                       "attention.sliding_window": 16, **keys})


def test_gemma3_without_freq_base_swa_serves_10000(tmp_path: Path) -> None:
    path = _gemma3_file(tmp_path)
    assert audit_artifact(ropekit.load(GEMMA3), read_artifact(path)).to_json()["verdict"] == "match"
    report = audit_artifact(ropekit.load({**GEMMA3, "rope_local_base_freq": 20000.0}), read_artifact(path)).to_json()
    assert report["verdict"] == "mismatch"
    assert [entry["verdict"] for entry in report["artifact"]["layers"]] == ["mismatch"] * 5 + ["match"]
    assert "plain RoPE at the file's freq_base 10000" in report["artifact"]["layers"][0]["reason"]


def test_a_sliding_layer_with_the_global_base_is_named(tmp_path: Path) -> None:
    report = audit_artifact(ropekit.load(GEMMA3), read_artifact(_gemma3_file(tmp_path, **{"rope.freq_base_swa": 1e6}))).to_json()
    first = report["artifact"]["layers"][0]
    assert report["verdict"] == "mismatch" and first["verdict"] == "mismatch"
    assert first["reason"].startswith("layer 0 (sliding_attention) rotates with llama.cpp's swa set (freq_base 1e+06")
    assert "the full_attention table (default)" in first["reason"]


def test_a_global_layer_with_the_sliding_base_is_named(tmp_path: Path) -> None:
    path = _gemma3_file(tmp_path, **{"attention.sliding_window_pattern": [True] * 6})
    report = audit_artifact(ropekit.load(GEMMA3), read_artifact(path)).to_json()
    last = report["artifact"]["layers"][5]
    assert (last["cache"], last["verdict"]) == ("swa", "mismatch")
    assert "layer 5 (full_attention)" in last["reason"] and "the sliding_attention table" in last["reason"]
    assert report["layers"]["full_attention"]["verdict"] == "mismatch"


def test_gemma3_without_a_window_has_no_sliding_layers(tmp_path: Path) -> None:
    path = _write(tmp_path / "g.gguf", "gemma3", {**GEOMETRY, "block_count": 6, "rope.freq_base": 1e6})
    report = audit_artifact(ropekit.load(GEMMA3), read_artifact(path)).to_json()
    assert {entry["cache"] for entry in report["artifact"]["layers"]} == {"global"}
    assert report["layers"]["sliding_attention"]["verdict"] == "mismatch"


def test_llama4_nope_step_and_its_last_layer_edge_case(tmp_path: Path) -> None:
    config = {"model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 2, "head_dim": 32,
              "num_hidden_layers": 8, "rope_theta": 10000.0, "max_position_embeddings": 256}
    chunked = _write(tmp_path / "a.gguf", "llama4", {**GEOMETRY, "block_count": 8, "rope.dimension_count": 32})
    report = audit_artifact(ropekit.load(config), read_artifact(chunked)).to_json()
    assert report["verdict"] == "match"
    assert [e["rotates"] for e in report["artifact"]["layers"]] == [True, True, True, False] * 2
    every = _write(tmp_path / "b.gguf", "llama4", {**GEOMETRY, "block_count": 8, "attention.sliding_window": 0})
    all_rope = ropekit.load({**config, "no_rope_layers": [1] * 8})
    report = audit_artifact(all_rope, read_artifact(every)).to_json()
    assert [e["verdict"] for e in report["artifact"]["layers"]] == ["match"] * 7 + ["mismatch"]
    assert "n_no_rope_layer_step = n_layer (8)" in report["layers"]["full_attention"]["served_as"]


def test_cohere2_rotates_only_its_sliding_layers(tmp_path: Path) -> None:
    config = {"model_type": "cohere2", "hidden_size": 64, "num_attention_heads": 2, "head_dim": 32,
              "num_hidden_layers": 4, "rope_theta": 10000.0, "max_position_embeddings": 256}
    keys = {**GEOMETRY, "block_count": 4, "attention.sliding_window": 16, "rope.scaling.type": "none"}
    report = audit_artifact(ropekit.load(config), read_artifact(_write(tmp_path / "c.gguf", "cohere2", keys))).to_json()
    assert report["verdict"] == "match"
    assert [e["rotates"] for e in report["artifact"]["layers"]] == [True, True, True, False]
    keys["attention.sliding_window_pattern"] = [True] * 4
    report = audit_artifact(ropekit.load(config), read_artifact(_write(tmp_path / "d.gguf", "cohere2", keys))).to_json()
    assert report["layers"]["full_attention"] == {
        "verdict": "mismatch", "tables": [], "no_rope": True,
        "served_as": "layer 3 (full_attention) rotates in llama.cpp (its global set) but the config declares no RoPE "
                     "on it"}


def test_an_architecture_llama_cpp_does_not_know_is_refused_by_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.gguf", "gemma9", {**GEOMETRY, "block_count": 2, "rope.freq_base": 1e6})
    assert rules_for("gemma9") is None and "gemma3" in modelled()
    report = audit_artifact(ropekit.load(GEMMA3), read_artifact(path)).to_json()
    assert report["verdict"] == "no_table"
    assert report["reason"].startswith("audit does not know llama.cpp's rules for architecture 'gemma9': llama.cpp as "
                                       "vendored in llama-cpp-python 0.3.36 has no such architecture")
    cli = subprocess.run([sys.executable, "-m", "ropekit", "audit", "--served", str(path), "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert cli.returncode == 1 and "architecture 'gemma9'" in json.loads(cli.stdout)["flags"][0]


def test_an_architecture_whose_rule_ropekit_cannot_model_is_refused_naming_it(tmp_path: Path) -> None:
    """gemma4 passes its own frequency factors (proportional RoPE) and lays out SWA without load_swa_pattern:
    the derived entry is a refusal citing those lines, never Gemma-3's rules."""
    path = _write(tmp_path / "g4.gguf", "gemma4", {**GEOMETRY, "block_count": 2, "rope.freq_base": 1e6})
    assert rules_for("gemma4") is None
    report = audit_artifact(ropekit.load(GEMMA3), read_artifact(path)).to_json()
    assert report["verdict"] == "no_table"
    assert report["reason"].startswith("audit cannot model llama.cpp's gemma4 (src/models/gemma4.cpp): ")
    assert "ggml_rope_ext with frequency factors 'freq_factors' (src/models/gemma4.cpp:" in report["reason"]


def test_an_architecture_without_rope_is_refused_as_such(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.gguf", "mamba2", {**GEOMETRY, "block_count": 2})
    report = audit_artifact(ropekit.load(GEMMA3), read_artifact(path)).to_json()
    assert report["reason"].startswith("llama.cpp applies no RoPE for mamba2 (llama_model_rope_type: "
                                       "LLAMA_ROPE_TYPE_NONE)")


def test_the_config_and_the_file_disagree_on_the_layer_count(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.gguf", "qwen2", {**GEOMETRY, "block_count": 3})
    config = {"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
              "rope_theta": 10000.0, "max_position_embeddings": 256}
    report = audit_artifact(ropekit.load(config), read_artifact(path)).to_json()
    assert report["verdict"] == "mismatch" and "block_count is 3" in report["flags"][-1]
    assert report["artifact"]["layers"][2]["reason"] == "layer 2: the config declares 2 layers, the GGUF 3"


@pytest.mark.parametrize(("arch", "keys", "magnitude"), [
    ("deepseek2", {"rope.scaling.yarn_log_multiplier": 0.1}, 1.0),  # the converter writes 0.1 * mscale_all_dim
    ("qwen2", {}, 1.0 + 0.1 * math.log(40.0)),
])
def test_yarn_magnitude_per_architecture(tmp_path: Path, arch: str, keys: dict[str, Any], magnitude: float) -> None:
    path = _write(tmp_path / "y.gguf", arch, {**GEOMETRY, "block_count": 1, "rope.dimension_count": 32,
                                             "rope.scaling.type": "yarn", "rope.scaling.factor": 40.0,
                                             "rope.scaling.original_context_length": 4096, **keys})
    assert read_artifact(path).tables[0].magnitude == pytest.approx(magnitude, rel=1e-12)


def test_grok_reads_its_betas_with_a_default_of_8(tmp_path: Path) -> None:
    path = _write(tmp_path / "g.gguf", "grok", {**GEOMETRY, "block_count": 1, "rope.scaling.type": "yarn",
                                                "rope.scaling.factor": 4.0, "rope.scaling.original_context_length": 256})
    assert "betas 8/1" in read_artifact(path).rules[0]


def test_rope_freqs_is_ignored_where_the_graph_passes_no_factors(tmp_path: Path) -> None:
    import numpy as np

    writer = gguf.GGUFWriter(str(tmp_path / "r.gguf"), "qwen2")
    writer.add_uint32("qwen2.block_count", 1)
    writer.add_uint32("qwen2.attention.head_count", 2)
    writer.add_uint32("qwen2.embedding_length", 64)
    writer.add_tensor("rope_freqs.weight", np.full(16, 4.0, dtype=np.float32))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    artifact = read_artifact(tmp_path / "r.gguf")
    assert artifact.tables[0].values == pytest.approx(ropekit.plain_inv_freq(10000.0, 32))
    assert "passes no frequency factors: ignored" in artifact.flags[0]


def test_invalid_per_layer_keys_are_refused_by_name(tmp_path: Path) -> None:
    bad: dict[str, tuple[str, dict[str, Any]]] = {
           "block_count": ("llama.block_count", {**GEOMETRY}),
           "scaling": ("llama.rope.scaling.type", {**GEOMETRY, "block_count": 1, "rope.scaling.type": "ntk"}),
           "rot": ("llama.rope.dimension_count", {**GEOMETRY, "block_count": 1, "rope.dimension_count": 16})}
    for name, (key, keys) in bad.items():
        with pytest.raises(ropekit.ArgumentError, match=key.replace(".", r"\.")):
            read_artifact(_write(tmp_path / f"{name}.gguf", "llama", keys))


# --- multimodal architectures: ggml_rope_multi over rope.dimension_sections ---------------------------------------

# artifact: (llama.cpp mode, the file's sections, each pair's position stream)
MROPE_FILES: dict[str, tuple[str, list[int], list[int]]] = {
    "gguf_qwen2vl_sections": ("mrope", [4, 6, 6, 0], [0] * 4 + [1] * 6 + [2] * 6),
    "gguf_qwen2vl_qwen25": ("mrope", [2, 7, 7, 0], [0] * 2 + [1] * 7 + [2] * 7),
    "gguf_qwen2vl_qwen3vl": ("imrope", [6, 5, 5, 0], [0, 1, 2] * 5 + [0]),
}


@pytest.mark.parametrize("name", sorted(MROPE_FILES))
def test_a_converted_multimodal_checkpoint_audits_as_match(name: str) -> None:
    mode, sections, streams = MROPE_FILES[name]
    artifact = read_artifact(ARTIFACTS / name / "model.gguf")
    assert artifact.engine["mrope"] == {"mode": mode, "composition": "interleaved" if mode == "imrope" else "sections",
                                        "sections": sections, "streams": 4, "pair_streams": streams,
                                        "fourth_stream_pairs": []}
    assert artifact.tables[0].axes == tuple(streams)
    report = _audit(name)
    assert report["verdict"] == "match"
    (table,) = report["layers"]["full_attention"]["tables"]
    assert table["composition"] == "match" and table["comparisons"][0]["max_rel_diff"] < 1e-6
    assert report["artifact"]["layers"][0]["interleaved"] is False  # NEOX pairs
    json.dumps(report, allow_nan=False)


def test_qwen3vl_sections_that_leave_pairs_to_the_fourth_stream_are_a_mismatch() -> None:
    """llama.cpp's imrope sends a sector that no T/H/W cycle covers to its 4th stream (0 for text tokens);
    transformers' interleaved composition gives it the temporal axis."""
    artifact = read_artifact(ARTIFACTS / "gguf_qwen2vl_qwen3vl_fourth" / "model.gguf")
    assert artifact.engine["mrope"]["fourth_stream_pairs"] == [13, 14]
    report = _audit("gguf_qwen2vl_qwen3vl_fourth")
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == (
        "pairs [13, 14] follow llama.cpp's fourth position stream (0 for text tokens) where the model's code gives "
        "them the temporal axis (declared: interleaved sections [8, 4, 4])")
    assert report["artifact"]["layers"][0]["verdict"] == "mismatch"


def test_llama_cpp_pair_streams_for_the_shipped_sections() -> None:
    from ropekit.artifacts.formats.gguf.llama_cpp import mrope_streams

    qwen2vl = mrope_streams("sections", (16, 24, 24, 0), 64)
    assert qwen2vl == [0] * 16 + [1] * 24 + [2] * 24
    qwen3vl = mrope_streams("interleaved", (24, 20, 20, 0), 64)  # Qwen3-VL's default sections
    assert [pair for pair, stream in enumerate(qwen3vl) if stream == 3] == [61, 62]
    assert qwen3vl[:6] == [0, 1, 2, 0, 1, 2] and qwen3vl[60] == 0 and qwen3vl[63] == 0
    assert mrope_streams("sections", (2, 1, 1, 0), 8) == [0, 0, 1, 2] * 2  # ggml repeats the pattern
    assert mrope_streams("sections", (2, 1, 1, 2), 6) == [0, 0, 1, 2, 3, 3]


def _set_sections(path: Path, arch: str, sections: list[int]) -> None:
    """Rewrite the four ``rope.dimension_sections`` values of ``path`` in place (gguf's memory-mapped reader)."""
    field = gguf.GGUFReader(str(path), "r+").fields[f"{arch}.rope.dimension_sections"]
    for index, value in zip(field.data, sections, strict=True):
        field.parts[index][0] = value


def test_swapped_sections_are_a_mismatch_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "swapped.gguf"
    path.write_bytes((ARTIFACTS / "gguf_qwen2vl_sections" / "model.gguf").read_bytes())
    _set_sections(path, "qwen2vl", [6, 4, 6, 0])
    model = ropekit.load(ARTIFACTS / "gguf_qwen2vl_sections" / "config.json")
    report = audit_artifact(model, read_artifact(path)).to_json()
    assert report["verdict"] == "mismatch"
    served_as = "sections [6, 4, 6] where the declaration has [4, 6, 6] (sections)"
    assert report["layers"]["full_attention"]["served_as"] == served_as
    assert report["layers"]["full_attention"]["tables"][0]["composition"] == "mismatch"
    assert report["artifact"]["layers"][0]["reason"].endswith(served_as)


def test_consecutive_sections_served_for_an_interleaved_model_are_named(tmp_path: Path) -> None:
    config = json.loads((ARTIFACTS / "gguf_qwen2vl_qwen3vl" / "config.json").read_text())
    config["text_config"]["rope_theta"] = 1000000.0
    config["text_config"]["rope_scaling"]["mrope_section"] = [4, 6, 6]
    (tmp_path / "config.json").write_text(json.dumps(config))
    report = audit_artifact(ropekit.load(tmp_path / "config.json"),
                            read_artifact(ARTIFACTS / "gguf_qwen2vl_sections" / "model.gguf")).to_json()
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == (
        "sections [4, 6, 6] where the model's code composes interleaved sections [4, 6, 6]")


def test_invalid_or_missing_sections_are_refused_by_name(tmp_path: Path) -> None:
    keys = {**GEOMETRY, "block_count": 1}
    with pytest.raises(ropekit.ArgumentError, match=r"no qwen2vl\.rope\.dimension_sections; llama\.cpp's qwen2vl "
                                                    "loader requires it"):
        read_artifact(_write(tmp_path / "none.gguf", "qwen2vl", keys))
    for name, sections in {"three": [4, 6, 6], "wide": [10, 12, 12, 0], "empty": [0, 0, 0, 4]}.items():
        with pytest.raises(ropekit.ArgumentError, match=r"qwen3vl\.rope\.dimension_sections"):
            read_artifact(_write(tmp_path / f"{name}.gguf", "qwen3vl", {**keys, "rope.dimension_sections": sections}))
    scalar = read_artifact(_write(tmp_path / "scalar.gguf", "qwen2vl", {**keys, "rope.dimension_sections": 4}))
    assert scalar.engine["mrope"]["sections"] == [4, 4, 4, 4]  # get_key_or_arr copies a scalar to all four
    assert scalar.tables[0].axes == tuple([0] * 4 + [1] * 4 + [2] * 4 + [3] * 4)


# --- the GLM-4 family: llama.cpp's glm4, NORM pairs, or MROPE once rope.dimension_sections turn use_mrope() on -----


def _copy(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.gguf"
    path.write_bytes((ARTIFACTS / name / "model.gguf").read_bytes())
    return path


def test_a_converted_glm4_checkpoint_audits_as_match() -> None:
    """GLM-4 (Glm4ForCausalLM) through llama.cpp's converter: partial rotary 0.5 (dimension_count 16 of head 32),
    adjacent (NORM) pairs, every layer with the global set."""
    artifact = read_artifact(ARTIFACTS / "gguf_glm4" / "model.gguf")
    assert (artifact.engine["arch"], artifact.engine["rope_mode"], artifact.engine["dimension_count"]) == (
        "glm4", "norm", 16)
    assert "mrope" not in artifact.engine and artifact.tables[0].axes is None
    assert artifact.tables[0].values == pytest.approx(ropekit.plain_inv_freq(500000.0, 16), rel=1e-12)
    report = _audit("gguf_glm4")
    assert report["verdict"] == "match"
    assert [(e["rotates"], e["rotary_dim"], e["interleaved"], e["verdict"]) for e in report["artifact"]["layers"]] == [
        (True, 16, True, "match")] * 2
    assert artifact.engine["rules_source"].startswith("src/models/glm4.cpp")


def test_a_glm4_file_with_the_wrong_base_is_a_mismatch(tmp_path: Path) -> None:
    path = _copy(tmp_path, "gguf_glm4")
    field = gguf.GGUFReader(str(path), "r+").fields["glm4.rope.freq_base"]
    field.parts[field.data[0]][0] = 10000.0
    report = audit_artifact(ropekit.load(ARTIFACTS / "gguf_glm4" / "config.json"), read_artifact(path)).to_json()
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == (
        "plain RoPE at the file's freq_base 10000, not the declared rope_theta 500000")
    assert [e["verdict"] for e in report["artifact"]["layers"]] == ["mismatch"] * 2


def test_a_converted_glm4v_checkpoint_with_sections_audits_as_match() -> None:
    """GLM-4.1V's text model: the converter writes rope.dimension_sections [2, 3, 3, 0], so llama.cpp's glm4 turns
    use_mrope() on and rotates with ggml_rope_multi (MROPE: consecutive sections, NEOX pairs)."""
    artifact = read_artifact(ARTIFACTS / "gguf_glm4v_sections" / "model.gguf")
    assert artifact.engine["rope_mode"] == "neox"
    assert artifact.engine["mrope"]["sections"] == [2, 3, 3, 0]
    assert artifact.tables[0].axes == (0, 0, 1, 1, 1, 2, 2, 2)
    assert any("use_mrope() is on" in rule for rule in artifact.rules)
    report = _audit("gguf_glm4v_sections")
    assert report["verdict"] == "match"
    (table,) = report["layers"]["full_attention"]["tables"]
    assert table["composition"] == "match"


def test_glm4v_without_sections_is_a_mismatch_naming_the_lost_streams(tmp_path: Path) -> None:
    path = _copy(tmp_path, "gguf_glm4v_sections")
    _set_sections(path, "glm4", [0, 0, 0, 0])
    artifact = read_artifact(path)
    assert artifact.engine["rope_mode"] == "norm" and artifact.tables[0].axes is None
    report = audit_artifact(ropekit.load(ARTIFACTS / "gguf_glm4v_sections" / "config.json"), artifact).to_json()
    assert report["verdict"] == "mismatch"
    assert report["layers"]["full_attention"]["served_as"] == (
        "llama.cpp rotates every pair by the token's one position (ggml_rope_ext: no rope.dimension_sections "
        "turning ggml_rope_multi on) where the model's code composes sections [2, 3, 3]")
