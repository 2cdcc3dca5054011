"""``ropekit scan`` over generated catalogues laid out as people have them on disk."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ropekit.tools.scan import find_models, scan, summarize

from ..support import ARTIFACTS, ROOT

SEED = json.loads((ROOT / "core" / "sample_configs" / "llama-3.2-1b-instruct.json").read_text())
PHI3 = {"model_type": "phi3", "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 16384,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su", "short_factor": [1.0] * 32, "long_factor": [2.0] * 32}}
PLAIN = {"model_type": "llama", "head_dim": 64, "rope_theta": 10000.0}
UNKNOWN = {"model_type": "llama", "head_dim": 64, "rope_scaling": {"rope_type": "warp_drive", "factor": 2.0}}
NOPE = {"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 8, "no_rope_layer_interval": 4}
MISSPELT = {"model_type": "llama", "head_dim": 64, "rope_scalling": {"rope_type": "llama3", "factor": 8.0}}
STRANGER = {"model_type": "stranger_lm", "head_dim": 64, "rope_theta": 10000.0}
GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 1}


def _hub_model(cache: Path, org: str, name: str, revisions: dict[str, dict[str, Any]]) -> None:
    """A Hugging Face hub-cache entry: blobs by hash, snapshots/<rev>/config.json symlinked to them."""
    base = cache / f"models--{org}--{name}"
    (base / "blobs").mkdir(parents=True)
    (base / "refs").mkdir()
    for revision, config in revisions.items():
        blob = base / "blobs" / f"blob{abs(hash(revision)) % 10**8}"
        blob.write_text(json.dumps(config))
        snapshot = base / "snapshots" / revision
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").symlink_to(os.path.relpath(blob, snapshot))
    (base / "refs" / "main").write_text(next(iter(revisions)))


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    cache = tmp_path / "hub"
    _hub_model(cache, "meta-llama", "Llama-3.2-1B", {"abc123": SEED, "def456": PLAIN})
    _hub_model(cache, "microsoft", "Phi-3", {"111": PHI3})
    folders = tmp_path / "models"
    for name, config in (("plain", PLAIN), ("unknown", UNKNOWN), ("nope", NOPE), ("misspelt", MISSPELT)):
        (folders / name).mkdir(parents=True)
        (folders / name / "config.json").write_text(json.dumps(config))
    (folders / "broken").mkdir()
    (folders / "broken" / "config.json").write_text("{not json")
    (folders / "loop").mkdir()
    (folders / "loop" / "again").symlink_to(folders)  # a directory symlink loop: never followed
    (folders / "empty").mkdir()
    return tmp_path


def test_unknown_code_is_its_own_status_and_a_model_without_rope_is_refused(tmp_path: Path) -> None:
    for name, config in (("stranger", STRANGER), ("gpt2", GPT2), ("plain", PLAIN)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    rows = {os.path.basename(row.path): row for row in scan([str(tmp_path)])}
    assert {name: row.status for name, row in rows.items()} == {
        "stranger": "unknown_model", "gpt2": "refused", "plain": "ok"}
    assert rows["stranger"].model_type == "stranger_lm"
    assert "model_type 'stranger_lm' is not a class of transformers" in rows["stranger"].reason
    assert "'gpt2' applies no RoPE: learned absolute position embeddings" in rows["gpt2"].reason
    assert summarize(rows.values())["status"] == {"ok": 1, "refused": 1, "unknown_model": 1}
    lenient = {os.path.basename(row.path): row for row in scan([str(tmp_path)], strict=False)}  # nothing emitted
    assert lenient["stranger"].status == "ok" and lenient["plain"].warnings == ()
    (warning,) = lenient["stranger"].warnings  # the row's own, said once
    assert "model_type 'stranger_lm' is unknown to ropekit" in warning
    command = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(tmp_path), "--json"],
                             capture_output=True, text=True, check=False)
    lines = [json.loads(line) for line in command.stdout.splitlines()]
    assert command.returncode == 1
    assert {line["status"] for line in lines if "status" in line} == {"unknown_model", "refused", "ok"}


def _by_path(rows: list[Any], root: Path) -> dict[str, str]:
    return {os.path.relpath(row.path, root): row.status for row in rows}


def test_every_model_gets_its_own_status(catalogue: Path) -> None:
    rows = list(scan([str(catalogue)]))
    statuses = _by_path(rows, catalogue)
    assert statuses == {
        "hub/models--meta-llama--Llama-3.2-1B/snapshots/abc123": "ok",
        "hub/models--meta-llama--Llama-3.2-1B/snapshots/def456": "ok",
        "hub/models--microsoft--Phi-3/snapshots/111": "ok",
        "models/broken": "refused",
        "models/misspelt": "refused",
        "models/nope": "ok",
        "models/plain": "ok",
        "models/unknown": "unregistered",
    }
    by_name = {os.path.basename(row.path): row for row in rows}
    assert "install it" in by_name["unknown"].reason and "warp_drive" in by_name["unknown"].reason
    assert "did you mean 'rope_scaling'" in by_name["misspelt"].reason
    assert by_name["nope"].layers["no_rope_layers"] == [3, 7]
    assert by_name["abc123"].layers["full_attention"] == {"rope_type": "llama3", "distribution": "ropekit"}


def test_supports_lists_exactly_what_the_forward_would_mis_serve(catalogue: Path) -> None:
    rows = list(scan([str(catalogue)], supports=["default", "su"]))  # the seed's forward: plain and LongRoPE
    unsupported = {os.path.relpath(row.path, catalogue) for row in rows if row.status == "unsupported"}
    assert unsupported == {"hub/models--meta-llama--Llama-3.2-1B/snapshots/abc123"}
    phi = next(row for row in rows if "Phi-3" in row.path)
    assert phi.status == "ok"  # 'su' is longrope's alias


def test_the_seeds_question_in_one_command(catalogue: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(catalogue), "--supports", "default,longrope",
                             "--json"], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    rows, summary = lines[:-1], lines[-1]["summary"]
    assert {row["status"] for row in rows} == {"ok", "unsupported", "refused", "unregistered"}
    assert all({"path", "status", "model_type", "layers", "reason"} <= set(row) for row in rows)
    assert summary["models"] == 8 and summary["status"]["unsupported"] == 1
    assert summary["rope_types"]["llama3"] == 1


def test_scan_summary_counts(catalogue: Path) -> None:
    summary = summarize(scan([str(catalogue)]))
    assert summary["status"] == {"ok": 5, "refused": 2, "unregistered": 1}


def test_audit_finds_the_artifacts_mismatch(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="the onnx reader extra is not installed")
    pytest.importorskip("gguf", reason="the gguf reader extra is not installed")
    for name in ("onnx_llama_linear", "onnx_llama3_fp32", "gguf_seed_llama32_no_rope_freqs"):
        shutil.copytree(ARTIFACTS / name, tmp_path / name)
    rows = {os.path.basename(row.path): row for row in scan([str(tmp_path)], audit=True, jobs=2)}
    assert rows["onnx_llama3_fp32"].status == "ok"
    assert rows["onnx_llama_linear"].status == "mismatch" and "plain RoPE" in rows["onnx_llama_linear"].reason
    assert rows["gguf_seed_llama32_no_rope_freqs"].status == "mismatch"
    assert all(row.audit is None for row in scan([str(tmp_path)]))  # artifacts are opened only with --audit


def test_a_lone_gguf_is_a_row(tmp_path: Path) -> None:
    pytest.importorskip("gguf", reason="the gguf reader extra is not installed")
    shutil.copy(ARTIFACTS / "gguf_seed_llama32_no_rope_freqs" / "model.gguf", tmp_path / "seed.gguf")
    (rows,) = list(scan([str(tmp_path)], audit=True))
    assert rows.status == "mismatch" and "without rope_freqs" in rows.reason
    assert rows.model_type == "llama"


def test_nothing_is_written_and_bad_arguments_exit_2(catalogue: Path) -> None:
    before = sorted(str(p) for p in catalogue.rglob("*"))
    result = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(catalogue)], capture_output=True, text=True,
                            check=False, timeout=120)
    assert result.returncode == 1 and "8 models: 5 ok, 2 refused, 1 unregistered" in result.stdout
    assert sorted(str(p) for p in catalogue.rglob("*")) == before
    missing = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(catalogue / "nowhere")],
                             capture_output=True, text=True, check=False, timeout=60)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    bad = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(catalogue), "--supports", "warp"],
                         capture_output=True, text=True, check=False, timeout=60)
    assert bad.returncode == 2 and "warp" in bad.stderr


def test_find_models_does_not_follow_directory_symlinks(catalogue: Path) -> None:
    found = [candidate.path for candidate in find_models([str(catalogue / "models")])]
    assert len(found) == len(set(found)) == 5


def _genai_layout(root: Path, name: str, source: str) -> Path:
    """``root/name/config.json`` with the pack from ``source`` in ``root/name/onnx/`` (onnxruntime-genai's layout)."""
    model = root / name
    shutil.copytree(ARTIFACTS / source, model / "onnx", ignore=shutil.ignore_patterns("config.json", "checkpoint"))
    shutil.copy(ARTIFACTS / source / "config.json", model / "config.json")
    return model


def test_the_documented_scan_then_repair_flow_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnx", reason="the onnx reader extra is not installed")
    from ropekit.cli.main import main

    model = _genai_layout(tmp_path / "models", "llama-linear", "onnx_llama_linear")
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "models/", "--audit", "--json"]) == 1
    (row, summary) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["path"], row["status"], summary["summary"]["models"]) == ("models/llama-linear", "mismatch", 1)
    assert row["artifacts"] == ["models/llama-linear/onnx/model.onnx"]
    assert row["audit"]["models/llama-linear/onnx/model.onnx"]["repairable"] is True
    assert row["reason"] == "onnx/model.onnx: [full_attention] serves plain RoPE, rope_theta 10000 (the linear " \
                            "scaling dropped)"
    (tmp_path / "fixed").mkdir()
    assert main(["repair", "models/llama-linear/config.json", "--served", "models/llama-linear/onnx", "--out",
                 "fixed/llama-linear"]) == 0
    assert "repaired: wrote fixed/llama-linear" in capsys.readouterr().out
    assert main(["audit", str(model / "config.json"), "--served", "fixed/llama-linear", "--json"]) == 0


def test_a_pack_scanned_alone_takes_the_config_above_it_and_nested_models_stay_apart(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="the onnx reader extra is not installed")
    model = _genai_layout(tmp_path, "llama3", "onnx_llama3_fp32")
    (row,) = list(scan([str(model / "onnx")], audit=True))
    assert (row.status, row.config, row.path) == ("ok", str(model / "config.json"), str(model / "onnx"))
    assert row.to_json()["config"] == str(model / "config.json")
    assert row.audit == {str(model / "onnx" / "model.onnx"): {"verdict": "match"}}
    other = model / "draft"  # a model of its own below this one: its pack is its own
    _genai_layout(other, "tiny", "onnx_llama_linear")
    rows = {row.path: row for row in scan([str(tmp_path)])}
    assert sorted(rows) == [str(model), str(other / "tiny")]
    assert rows[str(model)].artifacts == (str(model / "onnx" / "model.onnx"),)
    assert rows[str(other / "tiny")].artifacts == (str(other / "tiny" / "onnx" / "model.onnx"),)
    lone = tmp_path / "lone"
    shutil.copytree(model / "onnx", lone)
    (refused,) = list(scan([str(lone)]))
    assert refused.status == "refused" and "config.json beside it or in the folder above it" in refused.reason


def test_scan_audit_prints_a_repairable_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnx", reason="the onnx reader extra is not installed")
    from ropekit.cli.main import main

    _genai_layout(tmp_path, "linear", "onnx_llama_linear")
    _genai_layout(tmp_path, "llama3", "onnx_llama3_fp32")
    assert main(["scan", str(tmp_path), "--audit"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["STATUS", "MODEL_TYPE", "LAYERS", "REPAIRABLE", "PATH"]
    assert lines[1].split() == ["mismatch", "llama", "full_attention=linear", "yes", str(tmp_path / "linear")]
    assert lines[3].split() == ["ok", "llama", "full_attention=llama3", "-", str(tmp_path / "llama3")]
    assert main(["scan", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["STATUS", "MODEL_TYPE", "LAYERS", "PATH"]


def test_executorch_programs_are_audited_beside_their_config_or_given_alone(tmp_path: Path) -> None:
    for name in ("pte_llama32_as_llama31", "pte_llama32_export_llm"):
        shutil.copytree(ARTIFACTS / name, tmp_path / name)
    rows = {os.path.basename(row.path): row for row in scan([str(tmp_path)], audit=True, jobs=2)}
    assert rows["pte_llama32_export_llm"].status == "ok"
    wrong = rows["pte_llama32_as_llama31"]
    assert wrong.status == "mismatch" and "llama3 with factor 8 (declared 32.0)" in wrong.reason
    (alone,) = scan([str(tmp_path / "pte_llama32_as_llama31" / "model.pte")], audit=True)
    assert alone.status == "mismatch" and alone.reason == wrong.reason


NOT_MODELS = {
    "tokenizer_config.json": {"model_type": "llama", "tokenizer_class": "LlamaTokenizer", "model_max_length": 4096},
    "generation_config.json": {"_from_model_config": True, "bos_token_id": 1, "model_type": "llama"},
    "preprocessor_config.json": {"image_processor_type": "Qwen2VLImageProcessor", "model_type": "qwen2_vl"},
    "genai_config.json": {"model": {"type": "llama", "context_length": 4096}, "search": {"max_length": 4096}},
    "mlc-chat-config.json": {"model_type": "llama", "model_config": {"hidden_size": 64}, "conv_template": "llama-3"},
    "trtllm-checkpoint.json": {"architecture": "LlamaForCausalLM", "rotary_base": 500000.0, "model_type": "llama",
                               "hidden_size": 2048, "num_attention_heads": 32},
    "genie.json": {"dialog": {"engine": {"model": {"positional-encoding": {}}}}, "model_type": "llama"},
    "model.safetensors.index.json": {"metadata": {"model_type": "llama"}, "weight_map": {}},
    "notes.json": {"title": "not a model at all"},
    "list.json": [{"model_type": "llama"}],
}


def test_a_folder_of_named_configs_is_a_folder_of_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``NAME.json`` model configs count as models; tokenizer, generation, processor and engine configs do not,
    whatever keys they share with one."""
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "llama-3.2-1b.json").write_text(json.dumps(SEED))
    (folder / "phi-3.json").write_text(json.dumps({**PHI3, "architectures": ["Phi3ForCausalLM"]}))
    (folder / "by-class.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "head_dim": 64}))
    for name, document in NOT_MODELS.items():
        (folder / name).write_text(json.dumps(document))
    rows = {os.path.basename(row.path): row for row in scan([str(folder)])}
    assert {name: row.status for name, row in rows.items()} == {
        "by-class.json": "ok", "llama-3.2-1b.json": "ok", "phi-3.json": "ok"}
    assert rows["llama-3.2-1b.json"].layers["full_attention"]["rope_type"] == "llama3"
    assert rows["phi-3.json"].model_type == "phi3"
    from ropekit.cli import main

    assert main(["scan", str(folder)]) == 0
    assert "3 models: 3 ok; rope_types: default 1, llama3 1, longrope 1" in capsys.readouterr().out


def test_a_model_folders_other_json_files_are_its_own(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(PLAIN))
    (model / "tokenizer_config.json").write_text(json.dumps(NOT_MODELS["tokenizer_config.json"]))
    (model / "draft.json").write_text(json.dumps(PHI3))  # beside a config.json: the folder is the one model
    assert [(row.path, row.status) for row in scan([str(tmp_path)])] == [(str(model), "ok")]


def test_a_path_holding_no_model_is_refused_by_name(tmp_path: Path) -> None:
    from ropekit import ArgumentError

    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.json").write_text(json.dumps(NOT_MODELS["notes.json"]))
    (empty / "tokenizer_config.json").write_text(json.dumps(NOT_MODELS["tokenizer_config.json"]))
    with pytest.raises(ArgumentError, match=f"^paths: {empty}: holds no model ") as caught:
        list(scan([str(empty)]))
    assert caught.value.argument == "paths"
    named = empty / "tokenizer_config.json"
    with pytest.raises(ArgumentError, match=f"^paths: {named}: a tokenizer config, not a model's config; give"):
        list(scan([str(named)]))
    engine = tmp_path / "my-genie.json"  # known by its keys, whatever its name
    engine.write_text(json.dumps(NOT_MODELS["genie.json"]))
    with pytest.raises(ArgumentError, match="a Qualcomm Genie engine config, not a model's config"):
        list(scan([str(engine)]))
    command = subprocess.run([sys.executable, "-m", "ropekit", "scan", str(empty)], capture_output=True, text=True,
                             check=False, timeout=60)
    assert command.returncode == 2 and command.stdout == ""
    assert command.stderr == (f"ropekit: error: PATH: {empty}: holds no model (a folder with config.json, a model's "
                              "NAME.json config, an ONNX pack, a .gguf); give a folder of models or a model's file\n")


def test_every_warning_names_its_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, config in (("stranger", STRANGER), ("plain", PLAIN)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    extra = {"model_type": "llama", "head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "extra": 1}}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    from ropekit.cli import main

    assert main(["scan", str(tmp_path), "--lenient", "--json"]) == 0
    out, err = capsys.readouterr()
    records = {os.path.basename(record["path"]): record for record in map(json.loads, out.splitlines()[:-1])}
    assert records["plain"]["warnings"] == []
    assert records["extra.json"]["warnings"] == [
        "rope_scaling.extra: unknown key for rope_type 'linear'; its keys are: factor (ignored)"]
    (stranger,) = records["stranger"]["warnings"]
    assert "'stranger_lm' is unknown to ropekit" in stranger
    assert err.splitlines() == [
        f"ropekit: warning: {tmp_path / 'extra.json'}: {records['extra.json']['warnings'][0]}",
        f"ropekit: warning: {tmp_path / 'stranger'}: {stranger}",
    ]
    assert main(["scan", str(tmp_path), "--lenient"]) == 0  # the table for people: the same lines on stderr
    assert capsys.readouterr().err.splitlines()[0].startswith(f"ropekit: warning: {tmp_path / 'extra.json'}: ")
    threaded = {os.path.basename(row.path): row.warnings  # rows built on worker threads keep their own
                for row in scan([str(tmp_path)], strict=False, audit=True, jobs=3)}
    assert threaded == {"extra.json": tuple(records["extra.json"]["warnings"]), "plain": (), "stranger": (stranger,)}
