"""Write configs the way transformers 4.x saved them: the last 4.x release (4.57.1) writes, for every
model_type it shares with the pinned transformers and that ropekit's class facts call rotating (or a
wrapper of a rotating model), its default config as ``save_pretrained`` writes it (``v457_saved`` in the sweep), and
the same config with every RoPE-bearing key its 4.x class carries set to another valid value
(``v457_keys`` in the sweep: bases tripled, a partial rotary factor or ``rotary_pct`` of 0.5, half the ``rotary_dim``,
a linear ``rope_scaling`` of factor 4 where the class has a ``rope_scaling``).

4.57.1 needs no torch to write configs; it runs in a virtualenv of its own, beside the pinned reference::

    python3 -m venv /tmp/v457 && /tmp/v457/bin/pip install transformers==4.57.1
    /tmp/v457/bin/python scripts/v4_configs.py          # writes tests/data/probe/v4_configs.json

The pinned classes then measure each config (``python scripts/probe_sweep.py --v4``), and the suite
re-checks ropekit against those observations without torch.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "probe" / "v4_configs.json"
CLASSES = ROOT / "core" / "config" / "transformers_classes.json"
THETA_KEYS = ("rope_theta", "rotary_emb_base", "rope_local_base_freq", "global_rope_theta", "local_rope_theta",
              "rotary_embedding_base", "swa_rope_theta")
FRACTION_KEYS = ("partial_rotary_factor", "rotary_pct")


def _saved(config: Any) -> dict[str, Any]:
    """What ``save_pretrained`` writes for ``config`` (its config.json, read back)."""
    with tempfile.TemporaryDirectory() as folder:
        config.save_pretrained(folder)
        found: dict[str, Any] = json.loads((Path(folder) / "config.json").read_text())
    return found


def _changed(config: Any) -> dict[str, Any]:
    """Every RoPE-bearing key ``config``'s 4.x class carries, set to another valid value."""
    changes: dict[str, Any] = {}
    for key in THETA_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1:
            changes[key] = float(value) * 3
    for key in FRACTION_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            changes[key] = 0.5 if value != 0.5 else 0.25
    rotary_dim = getattr(config, "rotary_dim", None)
    if isinstance(rotary_dim, int) and not isinstance(rotary_dim, bool) and rotary_dim >= 8 and rotary_dim % 4 == 0:
        changes["rotary_dim"] = rotary_dim // 2
    if hasattr(config, "rope_scaling") and not isinstance(config.rope_scaling, dict):
        changes["rope_scaling"] = {"type": "linear", "rope_type": "linear", "factor": 4.0}  # both, as 4.x wrote
    return changes


def _spellings(changes: dict[str, Any]) -> list[dict[str, Any]]:
    """``changes`` with its linear ``rope_scaling`` spelt as each 4.x class accepted it (both keys;
    ``type`` alone), then without it (a class whose block must be another scheme: Phi-3's longrope)."""
    if not changes:
        return []
    if "rope_scaling" not in changes:
        return [changes]
    rest = {key: value for key, value in changes.items() if key != "rope_scaling"}
    found = [changes, {**rest, "rope_scaling": {"type": "linear", "factor": 4.0}}]
    return found + ([rest] if rest else [])


def main() -> int:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if not transformers.__version__.startswith("4."):
        print(f"run this with transformers 4.x (4.57.1), not {transformers.__version__}", file=sys.stderr)
        return 2
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore")
    classes = json.loads(CLASSES.read_text())["classes"]
    wanted = sorted(name for name, entry in classes.items()
                    if entry["kind"] == "rope" or (entry["kind"] == "composite" and entry.get("text_type")))
    configs: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for model_type in wanted:
        if model_type not in CONFIG_MAPPING:
            continue  # no 4.x class: nothing of it was saved by 4.x
        try:
            built = CONFIG_MAPPING[model_type]()
            variants = {"v4_saved": _saved(built)}
            changes = _changed(built)
            for attempt in _spellings(changes):  # 4.x classes validated a rope_scaling block differently
                try:
                    variants["v4_keys"] = _saved(CONFIG_MAPPING[model_type](**attempt))
                    break
                except Exception:
                    continue
        except Exception as error:  # a 4.x class that cannot be built or saved with its defaults
            skipped[model_type] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            continue
        for variant in variants.values():
            variant.setdefault("model_type", model_type)
        configs[model_type] = variants
    document = {"transformers": transformers.__version__, "command": "python scripts/v4_configs.py (transformers "
                "4.57.1)", "configs": configs, "skipped": skipped}
    OUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}: {len(configs)} model_types ({sum(len(v) for v in configs.values())} configs), "
          f"{len(skipped)} skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
