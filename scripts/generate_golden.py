"""Regenerate ``tests/data/golden/transformers.json`` from transformers (the reference implementation).

    pip install -e ".[reference]"   # torch + transformers; CPU is enough
    python scripts/generate_golden.py

For every case in ``golden_cases.py`` it builds the transformers config and the model's own
rotary-embedding module, runs it at each sequence length, and records ``inv_freq`` and the
attention scaling per layer type. The tests compare ropekit against this file and never import
torch or transformers.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig
from transformers.models.auto.configuration_auto import model_type_to_module_name

sys.path.insert(0, str(Path(__file__).parent))
from golden_cases import CASES

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden" / "transformers.json"


def rotary_module(config: Any) -> Any:
    """The text model's own rotary embedding module for ``config``."""
    text = config.get_text_config()
    module = importlib.import_module(
        f"transformers.models.{model_type_to_module_name(text.model_type)}.modeling_"
        f"{model_type_to_module_name(text.model_type)}"
    )
    names = [n for n in dir(module) if n.endswith("RotaryEmbedding") and "Vision" not in n]
    preferred = [n for n in names if "Text" in n] or names
    return getattr(module, preferred[0])(text)


def evaluate(config_dict: dict[str, Any], seq_len: int | None) -> dict[str, Any]:
    raw = copy.deepcopy(config_dict)
    model_type = raw.pop("model_type")
    config = AutoConfig.for_model(model_type, **raw)
    rotary = rotary_module(config)
    layer_types = sorted(rotary.rope_type) if isinstance(rotary.rope_type, dict) else [None]
    layers = {}
    for layer_type in layer_types:
        kwargs = {"layer_type": layer_type} if layer_type is not None else {}
        count = seq_len if seq_len is not None else 2  # 2 positions: the load-time regime
        # The forward updates seq-len-dependent tables; cos at position 0 is the factor it applies
        # (PhiMoE applies its mscale rather than the attention_scaling attribute).
        cos, _ = rotary(torch.zeros(1, count, 8), torch.arange(count)[None], **kwargs)
        prefix = f"{layer_type}_" if layer_type is not None else ""
        inv_freq = getattr(rotary, f"{prefix}inv_freq")
        layers[layer_type or "full_attention"] = {
            "inv_freq": inv_freq.double().tolist(),
            "attention_factor": float(cos[0, 0, 0]),
            "attention_scaling_attribute": float(getattr(rotary, f"{prefix}attention_scaling")),
        }
    return layers


def rotary_golden() -> dict[str, Any]:
    """cos/sin and rotated q/k from transformers' own functions, at small positions where its
    float32 angles are still accurate (the drift at large positions is what ropekit avoids)."""
    from golden_cases import LLAMA32_1B
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply
    from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as neox_apply

    seq = 16
    raw = copy.deepcopy(LLAMA32_1B)
    model_type = raw.pop("model_type")
    rotary = rotary_module(AutoConfig.for_model(model_type, **raw))
    positions = torch.arange(seq)[None]
    cos, sin = rotary(torch.zeros(1, seq, 8), positions)
    q = torch.linspace(-1.0, 1.0, 2 * seq * 64).reshape(1, 2, seq, 64)
    k = torch.cos(torch.arange(2 * seq * 64, dtype=torch.float32) * 0.37).reshape(1, 2, seq, 64)
    q_embed, k_embed = neox_apply(q, k, cos, sin)

    rotary_dim = 32  # GPT-J style partial rotary: the first 32 of 64 channels, interleaved pairs
    sincos = create_sinusoidal_positions(seq, rotary_dim)[positions]
    gsin, gcos = torch.split(sincos, rotary_dim // 2, dim=-1)
    q_bshd = q.permute(0, 2, 1, 3)  # GPT-J works in (batch, seq, heads, dim)
    rotated = gptj_apply(q_bshd[..., :rotary_dim], gsin, gcos)
    gptj_q = torch.cat((rotated, q_bshd[..., rotary_dim:]), dim=-1).permute(0, 2, 1, 3)
    return {
        "config": LLAMA32_1B,
        "positions": seq,
        "neox": {"cos": cos[0].double().tolist(), "sin": sin[0].double().tolist(),
                 "q": q.double().tolist(), "k": k.double().tolist(),
                 "q_embed": q_embed.double().tolist(), "k_embed": k_embed.double().tolist()},
        "gptj": {"rope_theta": 10000.0, "head_dim": 64, "rotary_dim": rotary_dim, "q_embed": gptj_q.double().tolist()},
    }


def main() -> None:
    torch.set_default_dtype(torch.float32)
    cases = []
    for name, config, seq_lens in CASES:
        results = [{"seq_len": seq_len, "layers": evaluate(config, seq_len)} for seq_len in seq_lens]
        cases.append({"name": name, "config": config, "results": results})
        print(f"{name}: {', '.join(str(r['seq_len']) for r in results)}")
    document = {
        "generator": "scripts/generate_golden.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tolerance": {"rtol": 2e-6},
        "cases": cases,
        "rotary": rotary_golden(),
    }
    OUT.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
