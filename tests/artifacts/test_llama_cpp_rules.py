"""llama.cpp's RoPE rules are derived from its source (``scripts/llama_cpp_rules.py``), committed as
``core/artifacts/formats/gguf/llama_cpp_rules.json``: regenerating them from the vendored llama.cpp must give the
committed file exactly, and the file is read only when a GGUF is audited.

The source is the llama-cpp-python 0.3.36 sdist's ``vendor/llama.cpp``; name it with
``ROPEKIT_LLAMA_CPP_SRC`` (``.ci/run`` downloads it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ropekit.artifacts.formats.gguf.llama_cpp import RULES_FILE, entry, modelled, rules_for

from ..support import ROOT, load_script

SCRIPT = ROOT / "scripts" / "llama_cpp_rules.py"


def _script() -> ModuleType:
    return load_script("llama_cpp_rules")


def _source() -> Path:
    named = os.environ.get("ROPEKIT_LLAMA_CPP_SRC")
    if not named:
        pytest.skip("llama.cpp's source is not here: set ROPEKIT_LLAMA_CPP_SRC to the vendor/llama.cpp folder of the "
                    "llama-cpp-python 0.3.36 sdist (pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36)")
    path = Path(named)
    if not (path / "src" / "llama-model.cpp").is_file():
        pytest.fail(f"ROPEKIT_LLAMA_CPP_SRC={named} holds no src/llama-model.cpp")
    return path


def test_the_committed_rules_are_what_the_source_gives() -> None:
    module = _script()
    fresh = module.render(module.build(_source()))
    committed = RULES_FILE.read_text(encoding="utf-8")
    if fresh != committed:
        new, old = json.loads(fresh)["architectures"], json.loads(committed)["architectures"]
        differing = sorted(name for name in new.keys() | old.keys() if new.get(name) != old.get(name))
        pytest.fail(f"stale: regenerate with {module.COMMAND} ({differing[:20]})")


def test_every_cited_line_holds_what_it_is_cited_for() -> None:
    """Each rope call cited for an architecture is a ggml_rope call at that line of the source."""
    root = _source()
    data = json.loads(RULES_FILE.read_text(encoding="utf-8"))["architectures"]
    for name, found in data.items():
        for cite in found["cites"].get("graph", []):
            rel, line = cite.rsplit(":", 1)
            text = (root / rel).read_text(encoding="utf-8").splitlines()[int(line) - 1]
            assert "ggml_rope_ext" in text or "ggml_rope_multi" in text, (name, cite, text)


def test_a_stale_override_fails_the_run(tmp_path: Path) -> None:
    module = _script()
    source = module.Source(_source())
    module.OVERRIDES["__missing__"] = {}
    try:
        assert module.check_overrides(source) == ["OVERRIDES names '__missing__', not an architecture of this source"]
    finally:
        del module.OVERRIDES["__missing__"]
    assert module.check_overrides(source) == []


def test_the_audit_page_carries_the_generated_table() -> None:
    module = _script()
    data = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    doc = module.DOC.read_text(encoding="utf-8")
    assert doc == module.page_with(doc, data), f"regenerate with {module.COMMAND}"
    assert "| glm4 | norm, or mrope (src/llama-model.cpp:" in doc


def test_every_architecture_has_rules_or_a_refusal_naming_the_rule() -> None:
    data = json.loads(RULES_FILE.read_text(encoding="utf-8"))["architectures"]
    assert len(data) > 140
    for name, found in data.items():
        assert ("rules" in found) != ("refusal" in found), name
        assert found["rope_type"] in {"none", "norm", "neox", "mrope", "imrope", "norm|mrope", "neox|mrope"} or \
            found["rope_type"].startswith("unparsed"), name
        assert found["cites"]["rope_type"][0].startswith("src/llama-model.cpp:"), name
        if found["rope_type"] == "none":
            assert "refusal" in found and "applies no RoPE" in found["refusal"], name
        if "rules" in found:
            assert found["cites"]["graph"], name
    # the 43 architectures the audit knew before the rules were derived are all still modelled
    before = {"llama", "deepseek", "exaone", "phi3", "arcee", "mistral3", "granite", "qwen2", "qwen2moe", "qwen3",
              "qwen3moe", "gemma", "starcoder2", "stablelm", "gptneox", "olmo", "olmoe", "internlm2", "phi2",
              "command-r", "falcon", "baichuan", "orion", "xverse", "bitnet", "codeshell", "nemotron", "seed_oss",
              "dots1", "ernie4_5", "grok", "deepseek2", "smollm3", "llama4", "gemma2", "gemma3", "gpt-oss", "cohere2",
              "olmo2", "exaone4", "qwen2vl", "qwen3vl", "qwen3vlmoe"}
    assert before <= set(modelled())


def test_the_glm4_family_rules() -> None:
    glm4, glm4moe = rules_for("glm4"), rules_for("glm4moe")
    assert glm4 is not None and glm4moe is not None
    assert (glm4.neox, glm4.mrope, glm4.mrope_optional) == (False, None, True)  # NORM, or MROPE with sections
    assert (glm4moe.neox, glm4moe.mrope, glm4moe.mrope_optional) == (True, None, True)  # NEOX, or MROPE
    found = entry("glm4")
    assert found is not None and found["rope_type"] == "norm|mrope" and found["source"] == "src/models/glm4.cpp"


def test_some_derived_rules() -> None:
    gemma3, olmo2, grok, deepseek2 = (rules_for(name) for name in ("gemma3", "olmo2", "grok", "deepseek2"))
    assert gemma3 is not None and gemma3.swa is not None
    assert (gemma3.swa.pattern, gemma3.swa.when, gemma3.swa.base, gemma3.swa.scale) == (6, "window", "default", "one")
    assert olmo2 is not None and olmo2.swa is not None and olmo2.swa.plain and not olmo2.swa.per_layer
    assert grok is not None and grok.betas == (8.0, 1.0) and grok.ext_attn
    assert deepseek2 is not None and deepseek2.log_mul == 0.1
    hybrid = entry("qwen3next")
    assert hybrid is not None and "hybrid of attention and recurrent layers" in hybrid["refusal"]


def test_ropekit_table_does_not_read_the_rules() -> None:
    """Cold start: the llama.cpp rules are read by the GGUF reader only."""
    config = ROOT / "core" / "sample_configs" / "llama-3.2-1b-instruct.json"
    code = ("import sys, io, contextlib\nfrom ropekit.cli.main import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['table', {str(config)!r}, '--json']) == 0\n"
            "print('ropekit.artifacts.formats.gguf.llama_cpp' in sys.modules, 'ropekit.artifacts.formats.gguf.file' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "False"]
