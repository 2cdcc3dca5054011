"""The catalogue of every architecture vLLM serves: its family, the model_types its configs carry,
what vLLM's model file passes to its rotary, what the family's own code applies, and what ropekit
does with it.

Joins three sources, none typed into the output by hand:

- ``tests/data/vllm/registry.json``: vLLM 0.32's registry and the ``get_rope(...)`` calls of each
  model file, read from vLLM's source by ``scripts/vllm_registry.py`` (in vLLM's virtualenv);
- the pinned transformers (the ``reference`` extra): which architectures have a class there, and
  the model_type of each such class;
- ``scripts/catalogue/vllm_families.json``: for architectures transformers has no class for, the
  family, kind and model_types of their published configs, each with its source, and per family the
  reading of its own remote code (repository, path, what it applies).

ropekit's status for each model_type is what ``ropekit.load`` does with the family's published
config (``tests/data/configs/families/``) or, without one, with a config naming only the
model_type: ``served``, ``refused`` (with the reason), ``no_rope`` (its code applies none) or
``unknown``.

Writes ``tests/data/vllm/catalogue.json`` and the generated table in ``docs/families.md``::

    python scripts/vllm_catalogue.py           # rewrite both
    python scripts/vllm_catalogue.py --check   # exit 1 if either differs
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "tests" / "data" / "vllm" / "registry.json"
HAND = ROOT / "scripts" / "catalogue" / "vllm_families.json"
CONFIGS = ROOT / "tests" / "data" / "configs" / "families"
OUT = ROOT / "tests" / "data" / "vllm" / "catalogue.json"
DOC = ROOT / "docs" / "families.md"
START, END = "<!-- catalogue:start (scripts/vllm_catalogue.py) -->", "<!-- catalogue:end -->"

KIND_OF_TABLE = {
    "speculative_decoding": "draft", "embedding": "embedding", "late_interaction": "embedding",
    "sequence_classification": "classifier", "token_classification": "classifier", "reward": "reward",
    "multimodal": "vlm", "text_generation": "decoder", "transformers_supported": "backend",
    "transformers_backend": "backend",
}


def published_configs() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """``model_type -> [(file name, config)]`` of the published configs under ``CONFIGS``."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path in sorted(CONFIGS.glob("*.json")):
        config = json.loads(path.read_text(encoding="utf-8"))
        model_type = config.get("model_type") if isinstance(config, dict) else None
        if isinstance(model_type, str):
            found.setdefault(model_type, []).append((path.name, config))
    return found


def _outcome(config: Mapping[str, Any], published: bool) -> dict[str, Any]:
    import ropekit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = ropekit.load(config, registry=ropekit.Registry(read_env=False))
        except ropekit.UnknownModelTypeError:
            return {"status": "unknown"}
        except ropekit.NoRopeError as error:
            return {"status": "no_rope", "reason": error.problem}
        except ropekit.RopeConfigError as error:
            if published or error.path == "model_type":
                return {"status": "refused", "reason": str(error)}
            return {"status": "served"}  # a bare config lacks what a real one states; its code is known
    return {"status": "served", "tables": sorted({table.rope_type for table in model.tables.values()})} \
        if published else {"status": "served"}


def status(model_type: str, configs: Mapping[str, list[tuple[str, dict[str, Any]]]]) -> dict[str, Any]:
    """What ropekit does with ``model_type``: on each published config of it, else on a config naming
    only the model_type (refused there only when the model_type itself is: unknown, no RoPE, unserved)."""
    published = configs.get(model_type, [])
    if not published:
        return _outcome({"model_type": model_type}, published=False)
    results = {name: _outcome(config, published=True) for name, config in published}
    worst = next((r for r in results.values() if r["status"] != "served"), {"status": "served"})
    return {**worst, "configs": results}


def transformers_classes() -> tuple[str, dict[str, list[str]]]:
    """The pinned transformers' version and ``architecture class -> [model_type]`` from its auto mappings."""
    import transformers
    from transformers.models.auto import modeling_auto

    classes: dict[str, set[str]] = {}
    for name in dir(modeling_auto):
        mapping = getattr(modeling_auto, name)
        if not name.endswith("_MAPPING_NAMES") or not isinstance(mapping, Mapping):
            continue
        for model_type, cls in mapping.items():
            for one in (cls if isinstance(cls, (list, tuple)) else (cls,)):
                classes.setdefault(one, set()).add(model_type)
    return transformers.__version__, {name: sorted(types) for name, types in classes.items()}


def _kind(tables: Iterable[str]) -> str:
    kinds = [KIND_OF_TABLE.get(table, table) for table in tables]
    for preferred in ("draft", "backend", "reward", "classifier", "embedding", "vlm", "decoder"):
        if preferred in kinds:
            return preferred
    return kinds[0] if kinds else "decoder"


def build() -> dict[str, Any]:
    """The catalogue document."""
    registry = json.loads(REGISTRY.read_text(encoding="utf-8"))
    hand = json.loads(HAND.read_text(encoding="utf-8"))
    version, classes = transformers_classes()
    configs = published_configs()
    statuses: dict[str, dict[str, Any]] = {}
    rows = []
    for architecture, entry in registry["architectures"].items():
        module = registry["modules"].get(entry["module"], {})
        known = classes.get(architecture)
        researched = hand["architectures"].get(architecture, {})
        model_types = known or researched.get("model_types", [])
        row: dict[str, Any] = {
            "architecture": architecture,
            "module": entry["module"],
            "kind": researched.get("kind") or _kind(entry["tables"]),
            "family": researched.get("family") or (model_types[0] if model_types else entry["module"]),
            "transformers_class": bool(known),
            "model_types": model_types,
        }
        if not known:
            row["model_types_source"] = researched.get("source", "not researched")
        if module.get("get_rope"):
            row["vllm_rope"] = [f"{entry['module']}.py:{call['line']}: {call['call']}" for call in module["get_rope"]]
        if module.get("language_model_from"):
            row["vllm_language_model"] = module["language_model_from"]
        for model_type in model_types:
            if model_type not in statuses:
                statuses[model_type] = status(model_type, configs)
        row["ropekit"] = {model_type: statuses[model_type]["status"] for model_type in model_types}
        rows.append(row)
    return {
        "generated_by": "python scripts/vllm_catalogue.py",
        "vllm": registry["vllm"],
        "transformers": version,
        "architectures": rows,
        "families": hand.get("families", {}),
        "model_types": dict(sorted(statuses.items())),
    }


def _cell(values: Iterable[str]) -> str:
    return ", ".join(f"`{value}`" for value in values) or "-"


def table(document: Mapping[str, Any]) -> str:
    """The generated Markdown: one row per family of architectures transformers has no class for."""
    families: dict[str, list[Mapping[str, Any]]] = {}
    for row in document["architectures"]:
        if not row["transformers_class"]:
            families.setdefault(row["family"], []).append(row)
    counts: dict[str, int] = {}
    lines = [
        f"vLLM {document['vllm']} serves {len(document['architectures'])} architectures; "
        f"{sum(not row['transformers_class'] for row in document['architectures'])} have no class in transformers "
        f"{document['transformers']}. Their families, with what ropekit does for each model_type their configs "
        "carry (`served`, `no_rope`: refused, its code applies none; `refused`: with the reason; `unknown`):",
        "",
        "| family | kinds | architectures | model_types | vLLM's rotary | remote code | ropekit |",
        "|---|---|---|---|---|---|---|",
    ]
    for family, rows in sorted(families.items()):
        model_types = sorted({t for row in rows for t in row["model_types"]})
        verdicts = []
        for model_type in model_types:
            entry = document["model_types"][model_type]
            counts[entry["status"]] = counts.get(entry["status"], 0) + 1
            reason = f": {entry['reason']}" if entry["status"] in ("refused", "no_rope") and entry.get("reason") else ""
            verdicts.append(f"`{model_type}` {entry['status']}{reason}".replace("|", "\\|"))
        rope = sorted({call for row in rows for call in row.get("vllm_rope", [])},
                      key=lambda call: (call.split(":")[0], int(call.split(":")[1])))
        wrapped = sorted({key for row in rows for key in row.get("vllm_language_model", [])})
        shown = "; ".join(f"`{call}`" for call in rope[:3]) + (f"; {len(rope) - 3} more" if len(rope) > 3 else "")
        vllm = shown or (f"language model from {_cell(wrapped)}" if wrapped else "-")
        code = document["families"].get(family, {}).get("remote_code", "-")
        lines.append(
            f"| {family} | {', '.join(sorted({row['kind'] for row in rows}))} | "
            f"{', '.join(row['architecture'] for row in rows)} | {_cell(model_types)} | {vllm} | {code} | "
            f"{'; '.join(verdicts) or 'no model_type found'} |"
        )
    summary = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
    lines += ["", f"model_types: {summary}."]
    return "\n".join(lines)


def _doc_with(text: str, current: str) -> str:
    head, _, rest = current.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{text}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files; exit 1 on a difference")
    args = parser.parse_args(argv)
    document = build()
    text = json.dumps(document, indent=1) + "\n"
    doc = DOC.read_text(encoding="utf-8")
    if START not in doc:
        raise SystemExit(f"{DOC}: add the markers {START} and {END} where the table goes")
    new_doc = _doc_with(table(document), doc)
    if args.check:
        stale = [str(path.relative_to(ROOT)) for path, new in ((OUT, text), (DOC, new_doc))
                 if not path.is_file() or path.read_text(encoding="utf-8") != new]
        if stale:
            print(f"stale: {', '.join(stale)}; rerun python scripts/vllm_catalogue.py", file=sys.stderr)
            return 1
        print("the catalogue is up to date")
        return 0
    OUT.write_text(text, encoding="utf-8")
    DOC.write_text(new_doc, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(document['architectures'])} architectures) and {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
