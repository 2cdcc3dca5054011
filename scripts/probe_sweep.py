"""Probe every RoPE class of the pinned transformers and record what ropekit serves against it.

For each model_type whose modeling code rotates (``core/config/transformers_classes.json``), these
configs are probed: ``default`` (the class built with its defaults, every value written out),
``saved`` (what ``save_pretrained`` writes for it: only values that differ from the class defaults,
so ropekit must know every class default itself) and, for a class with one plain rope block,
``legacy_<type>`` (a transformers v4 flat ``rope_scaling`` block of one of :data:`LEGACY_TYPES`) and
``partial`` (half the head rotating). Each is observed on both sides of every length at which
ropekit's table switches (longrope, dynamic). Each gets a verdict: ``match``, ``differs`` (with
the layers and reasons), ``refused`` (ropekit refused the config, with the reason) or
``not_measured`` (the probe could not build or run the class, with the reason). Nothing is left out
silently. Each measured variant keeps its config and what was observed (per distinct rotation, the
layers it applies to), so the no-torch suite re-checks ropekit's tables against the observations.

    python scripts/probe_sweep.py [--only TYPE,...] [--limit N] [--timeout 120] [--out PATH]
    python scripts/probe_sweep.py --published

Needs the ``reference`` extra. Writes ``tests/data/probe/sweep.json`` by default (resumable: model
types already recorded are kept unless ``--redo``). ``--published`` probes each published config
of ``tests/data/configs/published`` as it is, into ``tests/data/probe/published.json``.
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
CLASSES = ROOT / "core" / "config" / "transformers_classes.json"
PUBLISHED = ROOT / "tests" / "data" / "configs" / "published"
PUBLISHED_OUT = ROOT / "tests" / "data" / "probe" / "published.json"
NOT_TEXT = re.compile(r"vision|audio|video|speech|image|visual|encoder|mask|sam|tts|vit|dino|depth|detr|segment|"
                      r"whisper|wav|codec|vq|patch|transcribe|asr|vocoder|talker|token2wav|detector|mimi")
"""Components that are not text decoders (vision, audio, speech, video, detection towers, ...): their
positions are not 1-D text positions, so they are recorded as not measured, with this reason, and not run."""
NOT_TEXT_REASON = "not a text decoder (a vision, audio, speech or detection component): outside the probe's scope"


LEGACY_TYPES = ("linear", "dynamic", "yarn", "llama3", "longrope")
"""The flat ``rope_scaling`` types of transformers v4 configs; each class is probed with one of
them (chosen by its place in the sorted list of classes), so every type is probed on a fifth of
the classes."""


def _variants(model_type: str, legacy_kinds: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The configs probed for one class: ``default``, ``saved``, and, for a class with one rope
    block, ``legacy_<type>`` (the saved config with a transformers v4 flat ``rope_scaling`` block
    and a top-level ``rope_theta`` instead of ``rope_parameters``) and ``partial`` (half the head
    rotating, where the class rotates all of it by default)."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    transformers.logging.set_verbosity_error()
    built = CONFIG_MAPPING[model_type]()
    saved = {"model_type": model_type, **built.to_diff_dict()}
    found = {"default": built.to_dict(), "saved": saved}
    facts = json.loads(CLASSES.read_text())["classes"].get(model_type, {})
    if facts.get("kind") == "composite":  # a wrapper: also as little as a config can say, its language model left
        found["wrapper_only"] = {"model_type": model_type}  # to the wrapper's own defaults (--wrappers)
    found.update(_key_variants(model_type, built, saved))
    block = getattr(built, "rope_parameters", None)
    if not isinstance(block, dict) or not block:
        return found
    nested = all(isinstance(value, dict) for value in block.values())
    if nested:  # per layer type: a v4 flat rope_scaling and the class's bases (which layer types does it scale?)
        block = block.get("full_attention") or next(iter(block.values()))
    if not isinstance(block.get("rope_theta"), (int, float)) or block.get("rope_type", "default") != "default":
        return found  # a class whose default is already a scheme
    flat = {key: value for key, value in saved.items() if key != "rope_parameters"}
    try:
        head_dim = _attribute(built, "head_dim") or built.hidden_size // built.num_attention_heads
    except (AttributeError, TypeError, ZeroDivisionError):
        return found
    partial = float(block.get("partial_rotary_factor", 1.0))
    positions = int(getattr(built, "max_position_embeddings", 4096) or 4096)
    for kind in legacy_kinds or (LEGACY_TYPES[_class_index(model_type) % len(LEGACY_TYPES)],):
        found[f"legacy_{kind}"] = _legacy(kind, flat, block, nested, head_dim, partial, positions)
    if partial == 1.0 and not nested:
        found["partial"] = {**saved, "rope_parameters": {**block, "partial_rotary_factor": 0.5}}
    return found


def _legacy(kind: str, flat: dict[str, Any], block: dict[str, Any], nested: bool, head_dim: int, partial: float,
            positions: int) -> dict[str, Any]:
    """The saved config with a transformers v4 flat ``rope_scaling`` block of ``kind``."""
    # the legacy key is "type"; Gemma-3's own v4 configs (per layer type) spell it rope_type, the one
    # spelling such classes read (a "type" there is refused by ropekit: the class would drop the block)
    scaling: dict[str, Any] = {"rope_type" if nested else "type": kind, "factor": 4.0}
    if kind == "llama3":
        scaling.update(low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=positions // 4)
    elif kind == "longrope":
        pairs = int(head_dim * partial) // 2
        scaling.update(short_factor=[1.0 + i / pairs for i in range(pairs)],
                       long_factor=[1.0 + 3.0 * i / pairs for i in range(pairs)],
                       original_max_position_embeddings=positions // 4)
    legacy = {**flat, "rope_scaling": scaling} if nested else \
        {**flat, "rope_theta": block["rope_theta"], "rope_scaling": scaling}
    if partial != 1.0 and not nested:
        legacy["partial_rotary_factor"] = partial
    return legacy


def _attribute(built: Any, name: str) -> Any:
    """``built.name``, or ``None`` where it is absent or a per-layer attribute of a heterogeneous config
    (Gemma-4: transformers refuses a global read of those)."""
    try:
        return getattr(built, name, None)
    except Exception:
        return None


def _key_variants(model_type: str, built: Any, saved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The configs of a 4.x save and of a config that states little, chosen from the class's derived
    facts (``core/config/transformers_classes.json``), each without the saved rope block:

    - ``v4_keys``: every top-level spelling the class converts under a name other than its field
      (GPT-NeoX's ``rotary_pct``, ModernBERT's ``global_rope_theta``), set to another valid value;
    - ``v4_ignored``: each of ``partial_rotary_factor``, ``rope_theta`` and a flat ``rope_scaling``
      (keys most classes read) that this class neither converts nor reads, set to another value;
    - ``minimal``: for a class that builds its own layer plan, the saved config without
      ``layer_types``, so the class's default plan is what runs."""
    facts = json.loads(CLASSES.read_text())["classes"].get(model_type, {})
    if facts.get("kind") != "rope":
        return {}
    bare = {key: value for key, value in saved.items() if key not in ("rope_parameters", "rope_scaling")}
    theta = facts.get("theta")
    base = float(theta if isinstance(theta, (int, float)) else max((theta or {"": 10000.0}).values()))
    try:
        head_dim = int(_attribute(built, "head_dim") or built.hidden_size // built.num_attention_heads)
    except (AttributeError, TypeError, ZeroDivisionError):
        head_dim = 0

    def value_for(key: str, field: str) -> Any:
        if key == "rotary_dim":
            return head_dim // 2 if head_dim >= 8 and head_dim % 4 == 0 else None
        return 0.5 if field == "partial_rotary_factor" else 3.0 * base

    found: dict[str, dict[str, Any]] = {}
    spellings = facts.get("spellings")
    renamed = {key: field for field, per_type in (spellings or {}).items() for keys in per_type.values()
               for key in keys if key != field}
    stated = {key: value_for(key, field) for key, field in sorted(renamed.items())}
    stated = {key: value for key, value in stated.items() if value is not None}
    if stated:
        found["v4_keys"] = {**bare, **stated}
    reads = set(facts.get("reads", ()))
    read = {key for per_type in (spellings or {}).values() for keys in per_type.values() for key in keys} | reads
    ignored: dict[str, Any] = {}
    for key in ("partial_rotary_factor", "rope_theta"):
        # (a class that keeps no rope parameters, GPT-J, has its base in its code: a stated other one is refused)
        if key not in read and (spellings is not None or key == "partial_rotary_factor"):
            ignored[key] = value_for(key, key)
    if spellings is None and not reads & {"rope_parameters", "rope_scaling"}:
        ignored["rope_scaling"] = {"type": "linear", "factor": 4.0}
    if ignored:
        found["v4_ignored"] = {**bare, **ignored}
    if facts.get("layer_plan") and "layer_types" in saved:
        found["minimal"] = {key: value for key, value in saved.items() if key != "layer_types"}
    found.update(_sizes_only(model_type, built))
    changed = _keys_changed(saved)
    if changed is not None:
        found["keys_changed"] = changed
    found.update(_v4_written(model_type))
    return found


def _sizes_only(model_type: str, built: Any) -> dict[str, dict[str, Any]]:
    """``sizes_only``: the model_type and its sizes, everything else left to the class: the hidden size
    doubled (a head width derived from it follows; a fixed one does not) and six layers (the class's
    own layer plan at another count)."""
    hidden = _attribute(built, "hidden_size")
    heads = _attribute(built, "num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or isinstance(hidden, bool) or heads <= 0:
        return {}
    return {"sizes_only": {"model_type": model_type, "hidden_size": 2 * hidden, "num_attention_heads": heads,
                           "num_hidden_layers": 6}}


def _keys_changed(saved: dict[str, Any]) -> dict[str, Any] | None:
    """``keys_changed``: the saved config with every RoPE value it states set to another valid one: each
    base tripled, a partial rotary factor moved (0.5, or 0.25 from 0.5), ``rope_interleave`` flipped,
    a stated ``head_dim`` doubled. ``None``: it states none of them."""
    changed = json.loads(json.dumps(saved))
    touched = False

    def change(block: dict[str, Any]) -> None:
        nonlocal touched
        if isinstance(block.get("rope_theta"), (int, float)) and not isinstance(block["rope_theta"], bool):
            block["rope_theta"] = float(block["rope_theta"]) * 3
            touched = True
        factor = block.get("partial_rotary_factor")
        if isinstance(factor, (int, float)) and not isinstance(factor, bool):
            block["partial_rotary_factor"] = 0.25 if factor == 0.5 else 0.5
            touched = True

    block = changed.get("rope_parameters")
    if isinstance(block, dict):
        nested = [value for value in block.values() if isinstance(value, dict)]
        for each in nested or [block]:
            change(each)
    change(changed)
    if isinstance(changed.get("rope_interleave"), bool):
        changed["rope_interleave"] = not changed["rope_interleave"]
        touched = True
    widths_tied = changed.get("qk_rope_head_dim") is not None or "mrope_section" in json.dumps(changed)
    if isinstance(changed.get("head_dim"), int) and not isinstance(changed["head_dim"], bool) and not widths_tied:
        changed["head_dim"] = 2 * changed["head_dim"]  # (an MLA or 3-axis head's width is tied to other keys)
        touched = True
    return changed if touched else None


V4_CONFIGS = ROOT / "tests" / "data" / "probe" / "v4_configs.json"


def _v4_written(model_type: str) -> dict[str, dict[str, Any]]:
    """``v457_saved`` and ``v457_keys``: what transformers 4.57.1 writes for this class, as it is and
    with its RoPE keys changed (``scripts/v4_configs.py``)."""
    if not V4_CONFIGS.exists():
        return {}
    written: dict[str, dict[str, Any]] = json.loads(V4_CONFIGS.read_text())["configs"].get(model_type, {})
    return {name.replace("v4_", "v457_"): config for name, config in written.items()}


def _class_index(model_type: str) -> int:
    classes = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text())["classes"]
    return sorted(name for name, entry in classes.items() if entry["kind"] == "rope").index(model_type) \
        if model_type in classes else 0


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


OWN_PARAMETERS = 1_300_000_000
"""The most parameters a class's own default config is run with (fewer layers until it fits)."""


def _own_default_failure(model_type: str) -> str | None:
    """Why transformers itself cannot run the class's own default config (the whole reason to record),
    or ``None`` when it can (or when even one of its layers is too large to run here).

    The model is first built on the meta device with every layer (a constructor that fails on the
    default config fails there, at no memory cost); then the config is rebuilt with as many of its layers
    as fit in :data:`OWN_PARAMETERS`, down to one (``num_hidden_layers`` given to the class, which derives
    its layer lists itself), built for real and run forward with eager attention on token ids, else on input
    embeddings, positions its own. Nothing of the probe (no shrinking, no capture) takes part: a failure
    here is the class's own (or, at forward, its need of inputs a text decoder is not given)."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from ropekit.engines.probe import _class_for

    classes: Any = CONFIG_MAPPING
    autos: tuple[Any, ...] = (transformers.AutoModel, transformers.AutoModelForCausalLM)

    def build(config: Any) -> Any:
        for auto in autos:
            try:
                return auto.from_config(config)
            except ValueError:
                continue
        return _class_for(transformers, type(config))(config)

    def config_with(layers: int | None) -> Any:
        config = classes[model_type]() if layers is None else classes[model_type](num_hidden_layers=layers)
        config._attn_implementation = "eager"
        return config

    def size(config: Any) -> int:
        with torch.device("meta"):
            return sum(parameter.numel() for parameter in build(config).parameters())

    transformers.logging.set_verbosity_error()
    stage = f"{model_type}'s default config"
    built = False
    try:
        config = config_with(None)
        layers = int(getattr(config, "num_hidden_layers", 0) or 0)
        stage = f"the model of {model_type}'s default config"
        if size(config) > OWN_PARAMETERS:
            for count in (8, 4, 2, 1):
                if count < layers:
                    stage = f"{model_type}'s default config with {count} of its {layers} layers"
                    config = config_with(count)
                    if size(config) <= OWN_PARAMETERS:
                        break
            else:
                return None  # too large to run here even with one layer: not known to fail
        elif layers:
            stage = f"{model_type}'s default config ({layers} layers)"
        torch.manual_seed(0)
        model = build(config).float().eval()
        built = True
        ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
        with torch.no_grad():
            try:
                model(input_ids=ids, use_cache=False)
            except Exception:
                model(inputs_embeds=torch.randn(1, 6, int(config.hidden_size)), use_cache=False)
    except Exception as error:
        if not built:
            return f"the class's own default config does not build ({stage}): {type(error).__name__}: {error}"
        return (f"the class's own forward fails on its default config ({stage}, eager attention, token ids or "
                f"input embeddings, no other input): {type(error).__name__}: {error}")
    return None


def probe_one(model_type: str, skip: tuple[str, ...] = (), legacy_kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    """Both variants of one class, each with its verdict (run in a child process). ``legacy_kinds``: the flat
    ``rope_scaling`` types to probe (default: the class's place in the sorted classes picks one, a place that
    moves when classes are added; re-probing a recorded class passes the types its record has)."""
    warnings.filterwarnings("ignore")
    from ropekit.engines.probe import observe, probe_lengths

    results: dict[str, Any] = {}
    try:
        variants = _variants(model_type, legacy_kinds)
    except Exception as error:
        return {"default": {"verdict": "not_measured", "reason": f"cannot build the config: {error}"[:300]}}
    own: list[str | None] = []  # computed once, at the first variant the probe cannot run
    for name, config in variants.items():
        if name in skip:
            continue
        try:
            model_class, _version, observations = observe(config, seq_lens=probe_lengths(config))
        except Exception as error:
            if not own:
                own.append(_own_default_failure(model_type))
            reason = own[0] if own[0] is not None else f"cannot run the class: {type(error).__name__}: {error}"
            results[name] = {"verdict": "not_measured", "reason": reason[:300]}
            continue
        results[name] = {**_judged(model_class, observations, config), "config": config}
    return results


def _judged(model_class: str, observations: list[Any], config: dict[str, Any]) -> dict[str, Any]:
    """The verdict on what was observed, with the observations (per distinct rotation)."""
    from ropekit.engines.probe import compare

    rows, verdict = compare(observations, config)
    refused = next((row["reason"] for row in rows if row.get("ropekit") == "refused"), None)
    entry: dict[str, Any] = {"class": model_class, "verdict": "refused" if refused else verdict,
                             "observed": _observed(observations)}
    if refused:
        entry["reason"] = refused[:300]
    differing = [row for row in rows if row["verdict"] != "match"]
    if differing and not refused:
        entry["layers"] = _summary(differing)
    return entry


def probe_published(name: str) -> dict[str, Any]:
    """One published config of :data:`PUBLISHED` probed as it is (run in a child process): its
    ``model_type``, and its verdict as :func:`probe_one` gives one (a config of remote code, which
    has no transformers class, is not measured here: numpy ports of that code check it)."""
    warnings.filterwarnings("ignore")
    from ropekit.engines.probe import observe, probe_lengths

    config = json.loads((PUBLISHED / name).read_text(encoding="utf-8"))
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    model_type = text.get("model_type") or config.get("model_type")
    found: dict[str, Any] = {"model_type": model_type}
    if model_type not in json.loads(CLASSES.read_text())["classes"]:
        return {**found, "verdict": "not_measured",
                "reason": "remote code (no transformers class): checked against a numpy port of its code"}
    try:
        model_class, _version, observations = observe(config, seq_lens=probe_lengths(config))
    except Exception as error:
        return {**found, "verdict": "not_measured", "reason": f"cannot run the class: {type(error).__name__}: "
                f"{error}"[:300]}
    return {**found, **_judged(model_class, observations, config)}


def _probe_in_child(context: Any, model_type: str, timeout: float, job: Any = None,
                    skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """``job`` (:func:`probe_one`) in a fresh process: a crash or a hang stays there and is recorded."""
    with context.Pool(1) as pool:
        pending = pool.apply_async(job or probe_one, (model_type, skip) if job is None else (model_type,))
        try:
            result: dict[str, Any] = pending.get(timeout=timeout)
        except multiprocessing.TimeoutError:
            result = {"default": {"verdict": "not_measured", "reason": f"timed out after {timeout:g} s"}}
        except Exception as error:
            result = {"default": {"verdict": "not_measured", "reason": f"the probe process failed: {error}"}}
    return result


def observations(entry: dict[str, Any]) -> list[Any]:
    """The :class:`~ropekit.engines.probe.LayerObservation` list an entry's ``observed`` groups record."""
    from ropekit.engines.probe import LayerObservation

    found = []
    for group in entry["observed"]:
        fields = {key: value for key, value in group.items() if key != "layers"}
        if "inv_freq" in fields:
            fields["inv_freq"] = tuple(fields["inv_freq"])
        found += [LayerObservation(index=index, **fields) for index in group["layers"]]
    return sorted(found, key=lambda seen: (seen.seq_len, seen.index))


def _rejudge(out: Path) -> int:
    """Every recorded verdict recomputed from its observations (a fix in ropekit shows up in the
    committed verdicts without probing again)."""
    warnings.filterwarnings("ignore")
    document = json.loads(out.read_text())
    changed = 0
    for name, variants in document["classes"].items():
        for variant, entry in variants.items():
            if "observed" not in entry:
                continue
            fresh = _judged(entry["class"], observations(entry), entry["config"])
            if fresh["verdict"] != entry["verdict"]:
                changed += 1
                print(f"{name} {variant}: {entry['verdict']} -> {fresh['verdict']}")
            variants[variant] = {**fresh, "config": entry["config"]}
    out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"rejudged {out}: {changed} verdicts changed")
    return 0


def _sweep_published(timeout: float, only: str | None = None) -> int:
    """Probe the published configs (``only``: these file names, keeping the other recorded ones)."""
    import transformers

    context = multiprocessing.get_context("spawn")
    document: dict[str, Any] = {"transformers": transformers.__version__,
                                "command": "python scripts/probe_sweep.py --published", "configs": {}}
    names = {name for name in only.split(",") if name} if only else None
    if names is not None and PUBLISHED_OUT.exists():
        document["configs"] = json.loads(PUBLISHED_OUT.read_text())["configs"]
    for path in sorted(PUBLISHED.glob("*.json")):
        if names is not None and path.name not in names:
            continue
        started = time.perf_counter()
        result = _probe_in_child(context, path.name, timeout, probe_published)
        result = {"verdict": "not_measured", **result.get("default", {}), **result} if "default" in result else result
        result.pop("default", None)
        document["configs"][path.name] = result
        PUBLISHED_OUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        print(f"{path.name}: {result.get('model_type')} {result['verdict']} {result.get('reason', '')[:100]} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", help="comma-separated model_types (with --published: config file names)")
    parser.add_argument("--limit", type=int, help="probe at most N classes not yet recorded")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per class")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--redo", action="store_true", help="probe recorded classes again")
    parser.add_argument("--new-variants", action="store_true", help="probe only the variants a recorded class "
                        "lacks (after a variant is added to the sweep), keeping the recorded ones")
    parser.add_argument("--shard", metavar="K/N", help="probe only every N-th class from the K-th (run N at once, "
                        "each with its own --out, then --merge them)")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="PART", help="merge shard files into --out and stop")
    parser.add_argument("--rejudge", action="store_true", help="recompute every recorded verdict from its recorded "
                        "observations with today's ropekit (no torch needed) and stop")
    parser.add_argument("--wrappers", action="store_true", help="probe the wrappers whose language model the "
                        "derived facts say is built by the wrapper's own code (text defaults, renamed types, a key "
                        "other than text_config) instead of the rope classes")
    parser.add_argument("--published", action="store_true", help=f"probe the published configs of "
                        f"{PUBLISHED.relative_to(ROOT)} instead, into {PUBLISHED_OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    if args.rejudge:
        return _rejudge(args.out)
    import transformers

    if args.published:
        return _sweep_published(args.timeout, args.only)

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
    if args.wrappers:
        wanted = sorted(name for name, entry in classes.items() if entry["kind"] == "composite" and (
            entry.get("text_defaults") or entry.get("renames") or entry.get("text") not in ("text_config", None)))
    if args.only:
        wanted = [name for name in args.only.split(",") if name]
    document: dict[str, Any] = {"transformers": transformers.__version__,
                                "command": "python scripts/probe_sweep.py", "classes": {}}
    if args.out.exists():  # resumable: recorded classes are kept (re-probed only with --redo)
        document["classes"] = json.loads(args.out.read_text())["classes"]
    recorded = document["classes"]
    todo = [name for name in wanted if args.redo or args.new_variants or name not in recorded]
    if args.new_variants:  # measured classes only: one not measured at all stays so, with its reason
        todo = [name for name in todo if any("observed" in entry for entry in recorded.get(name, {}).values())]
    if args.shard:
        first, count = (int(part) for part in args.shard.split("/"))
        todo = todo[first::count]
    if args.limit is not None:
        todo = todo[: args.limit]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")  # one clean process per class: a crash or hang stays there
    for number, model_type in enumerate(todo, 1):
        started = time.perf_counter()
        if NOT_TEXT.search(model_type.lower()) and not args.wrappers:  # (a wrapper is probed on its text model)
            result: dict[str, Any] = {"default": {"verdict": "not_measured", "reason": NOT_TEXT_REASON}}
        else:
            kept = recorded.get(model_type, {}) if args.new_variants else {}
            fresh = _probe_in_child(context, model_type, args.timeout, skip=tuple(kept))
            if "default" in kept:  # a timeout or crash of the new variants does not replace the recorded default
                fresh.pop("default", None)
            result = {**kept, **fresh}
        document["classes"][model_type] = result
        args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        verdicts = {name: entry["verdict"] for name, entry in result.items()}
        print(f"[{number}/{len(todo)}] {model_type}: {verdicts} ({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
