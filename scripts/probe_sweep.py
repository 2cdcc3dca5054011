"""Probe every RoPE class of the pinned transformers and record what ropekit serves against it.

For each model_type whose modeling code rotates (``core/config/transformers_classes.json``), two
configs are probed: ``default`` (the class built with its defaults, every value written out) and
``saved`` (what ``save_pretrained`` writes for it: only values that differ from the class defaults,
so ropekit must know every class default itself). Each gets a verdict: ``match``, ``differs`` (with
the layers and reasons), ``refused`` (ropekit refused the config, with the reason) or
``not_measured`` (the probe could not build or run the class, with the reason). Nothing is left out
silently. Each measured variant keeps its config and what was observed (per distinct rotation, the
layers it applies to), so the no-torch suite re-checks ropekit's tables against the observations.

    python scripts/probe_sweep.py [--only TYPE,...] [--limit N] [--timeout 120] [--out PATH]

Needs the ``reference`` extra. Writes ``tests/data/probe/sweep.json`` by default (resumable: model
types already recorded are kept unless ``--redo``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "probe" / "sweep.json"
NOT_TEXT = re.compile(r"vision|audio|video|speech|image|visual|encoder|mask|sam|tts|vit|dino|depth|detr|segment|"
                      r"whisper|wav|codec|vq|patch|transcribe|asr|vocoder|talker|token2wav|detector|mimi")
"""Components that are not text decoders (vision, audio, speech, video, detection towers, ...): their
positions are not 1-D text positions, so they are recorded as not measured, with this reason, and not run."""
NOT_TEXT_REASON = "not a text decoder (a vision, audio, speech or detection component): outside the probe's scope"


def _variants(model_type: str) -> dict[str, dict[str, Any]]:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    transformers.logging.set_verbosity_error()
    built = CONFIG_MAPPING[model_type]()
    return {"default": built.to_dict(), "saved": {"model_type": model_type, **built.to_diff_dict()}}


def _summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("index", "kind", "seq_len", "layout", "first_channel", "rotary_dim", "head_dim", "attention_factor",
            "verdict", "reason")
    return [{key: row[key] for key in keep if key in row} for row in rows]


def _observed(observations: list[Any]) -> list[dict[str, Any]]:
    """What was observed, once per distinct (regime, rotation) with the layers it applies to."""
    grouped: dict[str, dict[str, Any]] = {}
    for seen in observations:
        entry = seen.to_json()
        index = entry.pop("index")
        entry.pop("residual", None)
        if "inv_freq" in entry:
            entry["inv_freq"] = [float(f"{value:.10g}") for value in entry["inv_freq"]]
        if entry.get("attention_factor") is not None:
            entry["attention_factor"] = float(f"{entry['attention_factor']:.10g}")
        coarse = {name: ([float(f"{v:.5g}") for v in value] if name == "inv_freq" else
                         float(f"{value:.5g}") if isinstance(value, float) else value)
                  for name, value in entry.items()}  # layers equal up to the probe's noise share one entry
        key = json.dumps(coarse, sort_keys=True)
        grouped.setdefault(key, {"layers": [], **entry})["layers"].append(index)
    return list(grouped.values())


def probe_one(model_type: str) -> dict[str, Any]:
    """Both variants of one class, each with its verdict (run in a child process)."""
    warnings.filterwarnings("ignore")
    from ropekit.engines.probe import compare, observe

    results: dict[str, Any] = {}
    try:
        variants = _variants(model_type)
    except Exception as error:
        return {"default": {"verdict": "not_measured", "reason": f"cannot build the config: {error}"[:300]}}
    for name, config in variants.items():
        try:
            model_class, _version, observations = observe(config)
        except Exception as error:
            results[name] = {"verdict": "not_measured",
                             "reason": f"cannot run the class: {type(error).__name__}: {error}"[:300]}
            continue
        rows, verdict = compare(observations, config)
        refused = next((row["reason"] for row in rows if row.get("ropekit") == "refused"), None)
        entry: dict[str, Any] = {"class": model_class, "verdict": "refused" if refused else verdict,
                                 "config": config, "observed": _observed(observations)}
        if refused:
            entry["reason"] = refused[:300]
        differing = [row for row in rows if row["verdict"] != "match"]
        if differing and not refused:
            entry["layers"] = _summary(differing)
        results[name] = entry
    return results


def _probe_in_child(context: Any, model_type: str, timeout: float) -> dict[str, Any]:
    """:func:`probe_one` in a fresh process: a crash or a hang stays there and is recorded."""
    with context.Pool(1) as pool:
        pending = pool.apply_async(probe_one, (model_type,))
        try:
            result: dict[str, Any] = pending.get(timeout=timeout)
        except multiprocessing.TimeoutError:
            result = {"default": {"verdict": "not_measured", "reason": f"timed out after {timeout:g} s"}}
        except Exception as error:
            result = {"default": {"verdict": "not_measured", "reason": f"the probe process failed: {error}"}}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", help="comma-separated model_types")
    parser.add_argument("--limit", type=int, help="probe at most N classes not yet recorded")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per class")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--redo", action="store_true", help="probe recorded classes again")
    parser.add_argument("--shard", metavar="K/N", help="probe only every N-th class from the K-th (run N at once, "
                        "each with its own --out, then --merge them)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="PART", help="merge shard files into --out and stop")
    args = parser.parse_args()
    import transformers

    if args.merge:
        merged: dict[str, Any] = {"transformers": transformers.__version__,
                                  "command": "python scripts/probe_sweep.py", "classes": {}}
        for part in args.merge:
            merged["classes"].update(json.loads(part.read_text())["classes"])
        args.out.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
        print(f"merged {len(merged['classes'])} classes into {args.out}")
        return 0
    classes = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text())["classes"]
    wanted = sorted(name for name, entry in classes.items() if entry["kind"] == "rope")
    if args.only:
        wanted = [name for name in args.only.split(",") if name]
    document: dict[str, Any] = {"transformers": transformers.__version__,
                                "command": "python scripts/probe_sweep.py", "classes": {}}
    if args.out.exists():  # resumable: recorded classes are kept (re-probed only with --redo)
        document["classes"] = json.loads(args.out.read_text())["classes"]
    todo = [name for name in wanted if args.redo or name not in document["classes"]]
    if args.shard:
        first, count = (int(part) for part in args.shard.split("/"))
        todo = todo[first::count]
    if args.limit is not None:
        todo = todo[: args.limit]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")  # one clean process per class: a crash or hang stays there
    for number, model_type in enumerate(todo, 1):
        started = time.perf_counter()
        if NOT_TEXT.search(model_type.lower()):
            result: dict[str, Any] = {"default": {"verdict": "not_measured", "reason": NOT_TEXT_REASON}}
        else:
            result = _probe_in_child(context, model_type, args.timeout)
        document["classes"][model_type] = result
        args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        verdicts = {name: entry["verdict"] for name, entry in result.items()}
        print(f"[{number}/{len(todo)}] {model_type}: {verdicts} ({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
