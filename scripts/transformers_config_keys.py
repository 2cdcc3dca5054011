"""List every top-level (and ``text_config``) key of every transformers configuration class.

Writes ``tests/data/configs/transformers_config_keys.json`` ({key: [up to two model_types that have it]}), which the
strictness tests use to prove that ropekit's look-alike rule refuses no real key that does not bear
on RoPE. Needs the ``reference`` extra (transformers); run ``python scripts/transformers_config_keys.py``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "configs" / "transformers_config_keys.json"


def main() -> None:
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    keys: dict[str, set[str]] = {}
    for model_type, class_name in CONFIG_MAPPING_NAMES.items():
        try:
            config: dict[str, Any] = getattr(transformers, class_name)().to_dict()
        except Exception:  # a class that cannot be built with defaults: nothing to list
            continue
        for layer in (config, config.get("text_config") or {}):
            if isinstance(layer, dict):
                for key in layer:
                    keys.setdefault(key, set()).add(model_type)
    document = {"transformers": transformers.__version__,
                "keys": {key: sorted(types)[:2] for key, types in sorted(keys.items())}}
    OUT.write_text(json.dumps(document, indent=0) + "\n")
    print(f"wrote {OUT} ({len(keys)} keys)")


if __name__ == "__main__":
    main()
