"""Record every model_type ropekit serves, so that none is ever lost by a side effect.

Writes ``tests/data/families/served.json``: each model_type ropekit identifies today, with what it
does for it (``rope``: serves its table; ``composite``: serves the language model a wrapper builds;
``no_rope``: refuses it by name, its code applies no RoPE) and where that knowledge comes from
(``transformers``, ``remote``: a family ropekit's core decides, ``builtin``: a built-in family
declaration). The file only grows: an entry already committed is kept even when ropekit no longer
serves it, so ``tests/config/test_served_families.py`` fails until the loss is either undone or
written under ``"dropped"`` with the reason (a decision, never a side effect).

Run: ``python scripts/served_families.py`` (no extra needed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ropekit import Registry
from ropekit.config.classes import class_facts, model_types
from ropekit.config.families import FAMILIES, REMOTE_FAMILIES

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "families" / "served.json"


def served_now() -> dict[str, dict[str, str]]:
    """``model_type -> {"kind", "origin"}`` for everything ropekit identifies in this checkout."""
    found: dict[str, dict[str, str]] = {}
    for model_type in model_types():
        facts = class_facts(model_type)
        assert facts is not None
        if facts.kind in ("rope", "composite", "no_rope"):
            found[model_type] = {"kind": facts.kind, "origin": "transformers"}
    for model_type in REMOTE_FAMILIES:
        kind = "no_rope" if FAMILIES.get(model_type) is not None and FAMILIES[model_type].no_rope else "rope"
        found[model_type] = {"kind": kind, "origin": "remote"}
    families = Registry(read_env=False).families
    for model_type in families.names():
        owner = families.owner(model_type)
        if owner is None or owner.distribution != "ropekit":
            continue  # a third party's plugin installed here is not ropekit's to keep
        family = families.family(model_type)
        assert family is not None
        kind = "no_rope" if family.no_rope else "composite" if family.language_model else "rope"
        found[model_type] = {"kind": kind, "origin": "builtin"}
    return dict(sorted(found.items()))


def main() -> None:
    previous: dict[str, Any] = json.loads(OUT.read_text(encoding="utf-8")) if OUT.is_file() else {}
    served = {**previous.get("served", {}), **served_now()}
    document = {
        "generated_by": "python scripts/served_families.py",
        "note": "Only grows. A model_type ropekit stops serving stays here until it is listed under 'dropped' with "
                "the reason.",
        "served": dict(sorted(served.items())),
        "dropped": previous.get("dropped", {}),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(served)} model_types")


if __name__ == "__main__":
    main()
