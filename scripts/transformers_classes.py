"""Derive, from transformers' own config classes and modeling code, what ropekit must know of every
``model_type`` transformers has: whether its code applies RoPE, and the class defaults a saved
config leaves out.

Writes ``core/config/transformers_classes.json``, which the loader reads lazily. Needs the
``reference`` extra at its pinned version (``pip install -e ".[reference]"``); run
``python scripts/transformers_classes.py`` (``--check`` compares with the committed file instead of
writing it, exit 1 on a difference).

Per model_type:

- ``kind``: ``rope`` (its config class declares RoPE parameters, or its modeling code rotates
  queries and keys), ``no_rope`` (neither: learned, ALiBi or relative positions, or no attention),
  or ``composite`` (a wrapper whose language model is a sub-config: ``text`` names the key and
  ``text_type`` the model_type its class builds there by default).
- ``reason`` (``no_rope``): what the modeling code uses instead, read from the code.
- ``defaults``: the class's dataclass defaults for every key ropekit reads (``null`` defaults are
  derived by the class from other keys and are left out). The base and the rope block a class
  fills in when a config states none are not here yet: ``CLASS_THETA`` in
  ``core/config/families.py`` holds the bases.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "config" / "transformers_classes.json"

ROPE_FIELDS = frozenset({"rope_parameters", "rope_scaling", "rope_theta", "rotary_dim", "rotary_pct",
                         "rotary_emb_base", "qk_rope_head_dim", "partial_rotary_factor"})
"""A config class declaring any of these fields carries RoPE parameters."""
ROTATES = re.compile(
    r"\b(apply_rotary_pos_emb\w*|rotate_half|rotate_every_two|\w*RotaryEmbedding|apply_rotary_emb\w*)\b"
)
TEXT_KEYS = ("text_config", "language_config", "llm_config", "thinker_config", "decoder_config", "text_encoder")
"""Sub-config keys that hold a wrapper's language model, in the order they are looked for."""
NO_ROPE_REASONS = (
    (re.compile(r"\balibi\b", re.I), "ALiBi attention biases"),
    (re.compile(r"relative_attention_bias|relative_attention_num_buckets"), "relative position buckets"),
    (re.compile(r"nn\.Embedding\(\s*config\.(max_position_embeddings|n_positions|max_source_positions|"
                r"max_target_positions|max_length)|LearnedPositionalEmbedding|self\.wpe\b"),
     "learned absolute position embeddings"),
    (re.compile(r"SinusoidalPositionalEmbedding|sinusoidal", re.I), "sinusoidal position embeddings"),
    (re.compile(r"selective_scan|ssm_state|MambaMixer|\bRwkv", re.I), "state-space or recurrent layers"),
)


def _modeling_sources(config_class: type) -> str:
    module = sys.modules[config_class.__module__]
    folder = Path(module.__file__ or "").parent
    texts = [path.read_text(encoding="utf-8") for path in sorted(folder.glob("modeling_*.py"))
             if not path.name.startswith(("modeling_tf_", "modeling_flax_"))]
    return "\n".join(texts)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _defaults(config_class: type, read_keys: frozenset[str], aliases: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    wanted = set(read_keys) | {alias for names in aliases.values() for alias in names}
    found: dict[str, Any] = {}
    if dataclasses.is_dataclass(config_class):
        for field in dataclasses.fields(config_class):
            if field.name in wanted and field.name not in ("model_type", "text_config", "layer_types"):
                default = field.default
                if default is not dataclasses.MISSING and default is not None and _jsonable(default):
                    found[field.name] = default
    return dict(sorted(found.items()))


def _describe(model_type: str, config_class: type, read_keys: frozenset[str],
              aliases: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    fields = {field.name for field in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) \
        else set()
    sub_configs = getattr(config_class, "sub_configs", None) or {}
    text_key = next((key for key in TEXT_KEYS if key in sub_configs), None)
    source = _modeling_sources(config_class)
    if text_key is not None and not (fields & ROPE_FIELDS):
        entry: dict[str, Any] = {"kind": "composite", "text": text_key}
        try:
            built = config_class()
            inner = getattr(built, text_key, None)
            if inner is not None and getattr(inner, "model_type", None):
                entry["text_type"] = inner.model_type
        except Exception:  # a wrapper that cannot be built with defaults names no default text model
            pass
        return entry
    if ROTATES.search(source) or (fields & ROPE_FIELDS and not source):
        return {"kind": "rope", "defaults": _defaults(config_class, read_keys, aliases)}
    reason = next((why for pattern, why in NO_ROPE_REASONS if pattern.search(source)), None)
    if reason is None:
        reason = "its modeling code applies no rotary embedding"
        if fields & ROPE_FIELDS:
            reason += " (its config class declares RoPE parameters that no layer applies)"
    return {"kind": "no_rope", "reason": reason}


def build() -> dict[str, Any]:
    """The document :data:`OUT` holds, from the installed transformers."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    from ropekit.config.families import READ_KEYS
    from ropekit.config.view import ALIASES

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    classes: dict[str, Any] = {}
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        try:
            config_class = CONFIG_MAPPING[model_type]
        except Exception as error:
            classes[model_type] = {"kind": "unreadable", "reason": f"transformers cannot import its config: {error}"}
            continue
        classes[model_type] = _describe(model_type, config_class, READ_KEYS, dict(ALIASES))
    return {"transformers": transformers.__version__,
            "command": "python scripts/transformers_classes.py",
            "classes": classes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare with the committed file; exit 1 if they differ")
    args = parser.parse_args()
    document = build()
    text = json.dumps(document, separators=(",", ":"), sort_keys=False) + "\n"
    if args.check:
        same = OUT.read_text(encoding="utf-8") == text
        print("the committed file matches" if same else f"{OUT} differs from transformers {document['transformers']}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    kinds: dict[str, int] = {}
    for entry in document["classes"].values():
        kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
    print(f"wrote {OUT}: {len(document['classes'])} model_types of transformers {document['transformers']}: {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
