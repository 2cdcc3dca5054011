"""Write ``tests/data/audit_json/``: the exact ``ropekit audit --json`` text for every committed
engine artifact (against its own config, and a few against another model's config), so a test can
pin the JSON users parse byte for byte (``tests/cli/test_audit_json.py``).

Run from the repository root: ``python scripts/audit_json_golden.py [CASE-OR-PREFIX ...]`` (only those
cases rewritten; the others kept). Paths in the documents are
relative to the root, as the test gives them.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path("tests/data/artifacts")
OUT = REPO / "tests" / "data" / "audit_json"

CROSSED = {
    # config of one model, artifact of another: mismatches through every flow (tables, per-layer GGUF, wiring)
    "gguf_llama3__with_gguf_llama_linear_config": ("gguf_llama_linear", "gguf_llama3"),
    "gguf_gemma3__with_gguf_smollm3_config": ("gguf_smollm3", "gguf_gemma3"),
    "gguf_smollm3__with_gguf_smollm3_all_rope_config": ("gguf_smollm3_all_rope", "gguf_smollm3"),
    "onnx_llama_yarn__with_onnx_qwen2_yarn_config": ("onnx_qwen2_yarn", "onnx_llama_yarn"),
    "onnx_llama3_fp32__with_onnx_llama_default_config": ("onnx_llama_default", "onnx_llama3_fp32"),
    "pte_llama32_xnnpack__with_pte_llama32_as_llama31_config": ("pte_llama32_as_llama31", "pte_llama32_xnnpack"),
}


def served(name: str) -> Path:
    folder = ARTIFACTS / name
    return next((folder / file for file in ("model.gguf", "model.pte") if (folder / file).exists()), folder)


STACKS = {
    # a producer's folder of cases (its own MANIFEST.json): the config each case is audited against, by default
    "openvino": "checkpoint_config.json",  # the checkpoint's; optimum-intel's saved config.json is crossed below
    "genie": "config.json",
}
STACK_CROSSED = {
    "openvino_phi3_longrope__with_its_saved_config": ("openvino/phi3_longrope/config.json", "openvino/phi3_longrope"),
    "openvino_llama_linear__with_openvino_llama3_config": ("openvino/llama3/checkpoint_config.json",
                                                           "openvino/llama_linear/openvino_model.xml"),
    "genie_llama3_no_block__file": ("genie/llama3_no_block/config.json", "genie/llama3_no_block/genie_config.json"),
}


def cases() -> dict[str, list[str]]:
    """Case name -> the ``ropekit`` arguments."""
    found: dict[str, list[str]] = {}
    for stack, config in STACKS.items():
        for folder in sorted((REPO / ARTIFACTS / stack).iterdir()):
            if folder.is_dir():
                found[f"{stack}_{folder.name}"] = ["audit", str(ARTIFACTS / stack / folder.name / config), "--served",
                                                   str(ARTIFACTS / stack / folder.name), "--json"]
    for case, (config, artifact) in STACK_CROSSED.items():
        found[case] = ["audit", str(ARTIFACTS / config), "--served", str(ARTIFACTS / artifact), "--json"]
    for folder in sorted((REPO / ARTIFACTS).iterdir()):
        if folder.is_dir() and folder.name not in STACKS:
            found[folder.name] = ["audit", str(ARTIFACTS / folder.name / "config.json"), "--served",
                                  str(served(folder.name)), "--json"]
    for case, (config, artifact) in CROSSED.items():
        found[case] = ["audit", str(ARTIFACTS / config / "config.json"), "--served", str(served(artifact)), "--json"]
    return found


def run(arguments: list[str]) -> tuple[int, str]:
    """``ropekit ARGUMENTS`` in this process: its exit status and its stdout."""
    from ropekit.cli.main import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(arguments)
    return status, buffer.getvalue()


def main(only: list[str]) -> int:
    """Write every case's document (or only the cases named, keeping the others')."""
    OUT.mkdir(parents=True, exist_ok=True)
    index = json.loads((OUT / "INDEX.json").read_text()) if only else {}
    for case, arguments in cases().items():
        if only and case not in only and not any(case.startswith(prefix) for prefix in only):
            continue
        status, text = run(arguments)
        (OUT / f"{case}.json").write_text(text, encoding="utf-8")
        index[case] = {"arguments": arguments, "status": status}
    (OUT / "INDEX.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    import os

    os.chdir(REPO)
    sys.exit(main(sys.argv[1:]))
