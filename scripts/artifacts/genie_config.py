"""Producer: Qualcomm's Genie bundle config, ``genie_config.json``, as qai-hub-models writes it
(``qai_hub_models/models/templates/llm/llm_helpers.py::create_genie_config``), for configs declaring each RoPE
scheme a Snapdragon NPU bundle meets. On device Genie builds cos/sin from these keys alone (the QNN graphs take
cos/sin as inputs), so the file is what the NPU serves.

qai-hub-models is not installed (it pulls qai_hub and a pinned torch); its wheel is unpacked and ``llm_helpers.py``
is imported by path with its two unused imports stubbed (``qai_hub``, ``filelock``); ``create_genie_config`` itself
runs unchanged::

    pip download --no-deps "qai-hub-models==0.65.0" -d /tmp/qhm && (cd /tmp/qhm && unzip -q -o *.whl)
    python scripts/artifacts/genie_config.py --qai-hub-models /tmp/qhm      # in ropekit's dev venv

The transformers configs come from ``AutoConfig.from_dict`` with the pinned reference (transformers 5.24). Each case
writes ``tests/data/artifacts/genie/<case>/genie_config.json`` and the ``config.json`` it was made from. One case,
``llama3_no_block``, is the llama3 file with its ``positional-encoding`` block replaced by the ``QnnHtp`` keys, as
create_genie_config writes it for a config whose scaling lacks one of llama3's four keys: it is derived, not written
by create_genie_config, and the manifest says so.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "data" / "artifacts" / "genie"
HELPERS = "qai_hub_models/models/templates/llm/llm_helpers.py"
CONTEXT = 4096
BINARY = "weight_sharing_model_1_of_1.serialized.bin"

TINY: dict[str, Any] = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                        "num_hidden_layers": 2, "intermediate_size": 256, "vocab_size": 128, "bos_token_id": 1,
                        "eos_token_id": 2}
LLAMA: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 500000.0,
                         "max_position_embeddings": 131072, **TINY}

CASES: dict[str, dict[str, Any]] = {
    "llama_default": {**LLAMA, "rope_theta": 10000.0, "max_position_embeddings": 4096},
    "llama3": {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
    "llama_linear": {**LLAMA, "rope_theta": 10000.0, "max_position_embeddings": 8192,
                     "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "llama_yarn": {**LLAMA, "rope_theta": 10000.0, "max_position_embeddings": 16384,
                   "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}},
    "llama_dynamic": {**LLAMA, "rope_theta": 10000.0, "max_position_embeddings": 4096,
                      "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "phi35_longrope": {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "rope_theta": 10000.0,
        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "pad_token_id": 0, **TINY,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.01 * i for i in range(32)],
                         "long_factor": [1.0 + 1.5 * i for i in range(32)]},
    },
    "gemma3": {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "max_position_embeddings": 131072, "sliding_window": 512,
        "layer_types": ["sliding_attention", "full_attention"], "query_pre_attn_scalar": 64,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "pad_token_id": 0, **TINY,
    },
    "phi4mini_partial": {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "rope_theta": 10000.0,
        "max_position_embeddings": 4096, "partial_rotary_factor": 0.75, "pad_token_id": 0, **TINY,
    },
}


def load_helpers(root: Path) -> types.ModuleType:
    """``llm_helpers.py`` imported by path, its unused imports (the hub client, a file lock) stubbed."""
    for name in ("qai_hub", "filelock"):
        stub = types.ModuleType(name)
        stub.FileLock = object  # type: ignore[attr-defined]
        sys.modules.setdefault(name, stub)
    spec = importlib.util.spec_from_file_location("llm_helpers", root / HELPERS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qai-hub-models", type=Path, required=True, help="the unpacked qai-hub-models wheel")
    args = parser.parse_args()
    from transformers import AutoConfig

    helpers = load_helpers(args.qai_hub_models)
    wheel = next(args.qai_hub_models.glob("qai_hub_models-*.dist-info")).name.split("-")[1]
    manifest: dict[str, Any] = {"producer": f"qai-hub-models {wheel} llm_helpers.create_genie_config",
                                "transformers": importlib.metadata.version("transformers"), "cases": {}}
    for name, config in CASES.items():
        llm_config = AutoConfig.for_model(**config)
        written = helpers.create_genie_config(CONTEXT, llm_config, "rope", [BINARY])
        dest = OUT / name
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (dest / "genie_config.json").write_text(json.dumps(written, indent=4) + "\n")
        manifest["cases"][name] = {"written_by": "create_genie_config(4096, config, 'rope', [...])"}
        if name == "llama3":
            derived = json.loads(json.dumps(written))
            block = derived["dialog"]["engine"]["model"].pop("positional-encoding")
            qnn = derived["dialog"]["engine"]["backend"]["QnnHtp"]
            qnn["pos-id-dim"], qnn["rope-theta"] = block["rope-dim"], block["rope-theta"]
            (OUT / "llama3_no_block").mkdir(exist_ok=True)
            (OUT / "llama3_no_block" / "config.json").write_text(json.dumps(config, indent=2) + "\n")
            (OUT / "llama3_no_block" / "genie_config.json").write_text(json.dumps(derived, indent=4) + "\n")
            manifest["cases"]["llama3_no_block"] = {
                "written_by": "derived: the llama3 case's file in the QnnHtp form create_genie_config writes when the "
                              "scaling lacks one of llama3's four keys (rope-scaling block dropped)"}
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
