"""Regenerate ``tests/data/golden/mrope.json``: what transformers' own multimodal rotary modules
feed attention at 3-axis (or 2- / 4-axis) positions, for every class whose rotary module composes
multimodal positions (the ``mrope`` facts of ``core/config/transformers_classes.json``).

    pip install -e ".[reference]"
    python scripts/mrope_golden.py

Per class: its default text config (made consistent where the default cannot run: sections that
fit its head), positions with different values on every axis (a batch of two, drawn from a
generator seeded by the model_type, so a new class leaves the others' cases as they are), and the
module's cos/sin (float32, as transformers computes them). The no-torch tests compare ropekit's
``RopeTable.cos_sin`` with this file.
"""

from __future__ import annotations

import json
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "golden" / "mrope.json"
sys.path.insert(0, str(ROOT / "scripts"))

from transformers_classes import _built, _rotary_modules  # noqa: E402

SEED = 20261201
CONSISTENT = {
    # default configs that cannot run as they are, made into ones a real checkpoint would carry
    "glm4v_text": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                                       "mrope_section": [8, 12, 12]}},
    "glm4v_moe_text": {"head_dim": 128, "rope_parameters": {
        "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": [8, 12, 12]}},
    # GLM-Image's text model is GLM-4V's (modular_glm_image.py): its module's own section [8, 12, 12] is 32 pairs,
    # half of a 128 head
    "glm_image_text": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                                           "mrope_section": [8, 12, 12]}},
    "qwen3_omni_moe_text": {"head_dim": 128},
}


def _fitted(config: dict[str, Any], pairs: int, axes: int) -> dict[str, Any]:
    """``config`` with sections that fit ``pairs`` (a default config may carry ones that do not)."""
    section = [pairs // axes] * axes
    section[0] += pairs - sum(section)
    blocks = config["rope_parameters"]
    for block in [blocks] if "rope_type" in blocks else blocks.values():
        block["mrope_section"] = section
    return config


def case(model_type: str, fact: dict[str, Any]) -> dict[str, Any] | None:
    config_class = CONFIG_MAPPING[model_type]
    rng = np.random.default_rng([SEED, zlib.crc32(model_type.encode())])
    for rotary in _rotary_modules(config_class):
        built = _built(rotary, config_class)
        if built is None:
            continue
        module, layer_type = built
        if model_type in CONSISTENT:
            values = {**module.config.to_dict(), **CONSISTENT[model_type]}
            values.pop("model_type")
            module = rotary(config=config_class(**values))
        config = module.config.to_dict()
        axes = 2 if fact["composition"] == "row_col" else len(fact["section"] or [0, 0, 0, 0])
        pairs = getattr(module, "inv_freq" if layer_type is None else f"{layer_type}_inv_freq").shape[-1]
        positions = torch.as_tensor(rng.integers(0, 1000, size=(axes, 2, 2)))
        try:
            cos, sin = _run(module, positions, layer_type)
        except Exception:
            config = _fitted(config, pairs, axes)
            module = rotary(config=config_class(**{k: v for k, v in config.items() if k != "model_type"}))
            cos, sin = _run(module, positions, layer_type)
        return {"model_type": model_type, "layer_type": layer_type or "full_attention", "config": config,
                "positions": positions.tolist(), "cos": _rounded(cos), "sin": _rounded(sin)}
    return None


def _run(module: Any, positions: torch.Tensor, layer_type: str | None) -> tuple[Any, Any]:
    x = torch.zeros(1, dtype=torch.float32)
    with torch.no_grad():
        return module(x, positions) if layer_type is None else module(x, positions, layer_type)


def _rounded(tensor: torch.Tensor) -> list[Any]:
    return np.round(tensor.double().numpy(), 7).tolist()  # type: ignore[no-any-return]


def main() -> int:
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    facts = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text())["classes"]
    cases = []
    for model_type, entry in sorted(facts.items()):
        fact = entry.get("mrope")
        if fact is None or fact["composition"] == "unknown":
            continue
        found = case(model_type, fact)
        if found is not None:
            cases.append(found)
    OUT.write_text(json.dumps({"transformers": transformers.__version__, "command": "python scripts/mrope_golden.py",
                               "cases": cases}, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(cases)} classes of transformers {transformers.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
