"""The committed sweep of ``ropekit probe`` over every RoPE class of the pinned transformers
(``scripts/probe_sweep.py``): no class is left out silently, ropekit's tables are re-checked
against every recorded observation without torch, and a sample is re-probed live where torch is
installed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import warnings
from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from ropekit.config.classes import transformers_version
from ropekit.engines.probe import LayerObservation, compare

from ..support import DATA, ROOT

SWEEP = json.loads((DATA / "probe" / "sweep.json").read_text(encoding="utf-8"))
CLASSES = json.loads((ROOT / "core" / "config" / "transformers_classes.json").read_text(encoding="utf-8"))["classes"]
VERDICTS = {"match", "differs", "refused", "not_measured"}


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe_sweep", ROOT / "scripts" / "probe_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()

KNOWN_GAPS: dict[str, str] = {}
"""model_type -> why ropekit does not serve what its class applies (or the probe cannot tell yet):
each one listed with its reason, none silent. Fixing one fails the test until it is removed here."""

REFUSED_BY_DESIGN: dict[str, str] = {
    **dict.fromkeys(["granite_swa", "granitemoe_swa", "muse_glimmer_text", "muse_spark_text"],
                    "a theta per layer (layer_rope_theta): one table per layer type cannot express it"),
    "molmo2_text": "scaling only some layers (rope_scaling_layers) is not served",
    "glm4_moe": "the class's default config rotates an odd number of channels (int(42 * 0.5) = 21)",
    "nanochat": "its code rotates every pair the other way (rotate_half with flipped signs): a direction the "
                "tables do not carry",
    "dots3_note_text": "MLA widths declared per layer (per_layer_config's qk_nope_head_dim): ropekit reads the "
                       "rope geometry per layer type and refuses a rope key nested per layer rather than guess",
    "deepseek_v4": "rope parameters keyed by attention kind (main, compress: compress_rope_theta), not by layer type",
    "cohere2_moe legacy_linear": "its config class drops a flat rope_scaling block (plain RoPE where the config "
                                 "declares a scheme): refused by name rather than served either way",
    "olmo_hybrid minimal": "its config class builds no repetition of one pattern when the config leaves "
                           "layer_types to it (2 layers: linear, full; 5: linear x3, full, linear): refused at load "
                           "naming layer_types rather than guessed",
    "olmo_hybrid sizes_only": "as its minimal config: no repeated pattern ropekit derived for six layers; refused "
                              "at load naming layer_types",
}
"""Classes (or ``"class variant"``) whose config ropekit refuses although the class rotates: the
reason is a feature ropekit's tables cannot express, or an input the class would silently drop."""


def _variants() -> list[tuple[str, str, dict[str, Any]]]:
    return [(name, variant, entry) for name, variants in sorted(SWEEP["classes"].items())
            for variant, entry in sorted(variants.items())]


def _observations(entry: dict[str, Any]) -> list[LayerObservation]:
    """What an entry records, as the probe's observations (the sweep script's own reader)."""
    observed: list[LayerObservation] = SCRIPT.observations(entry)
    return observed


def test_the_sweep_is_of_the_pinned_transformers_and_covers_every_rope_class() -> None:
    assert SWEEP["transformers"] == transformers_version()
    rope_classes = {name for name, entry in CLASSES.items() if entry["kind"] == "rope"}
    assert rope_classes <= set(SWEEP["classes"]), sorted(rope_classes - set(SWEEP["classes"]))[:10]
    extra = {name: CLASSES[name]["kind"] for name in set(SWEEP["classes"]) - rope_classes}
    assert set(extra.values()) <= {"composite"}, extra  # a wrapper probed whole (MusicFlamingo) is kept
    for name, variant, entry in _variants():
        assert entry["verdict"] in VERDICTS, (name, variant)
        if entry["verdict"] in ("refused", "not_measured"):
            assert entry.get("reason"), f"{name} {variant}: {entry['verdict']} without a reason"


@pytest.mark.parametrize(("name", "variant", "entry"),
                         [case for case in _variants() if "observed" in case[2]],
                         ids=lambda value: value if isinstance(value, str) else "")
def test_ropekit_serves_what_each_class_was_observed_to_apply(name: str, variant: str, entry: dict[str, Any]) -> None:
    with warnings.catch_warnings():  # a key the class ignores is warned about; the table is what is judged
        warnings.simplefilter("ignore")
        rows, verdict = compare(_observations(entry), entry["config"])
    refused = next((row["reason"] for row in rows if row.get("ropekit") == "refused"), None)
    if refused is not None:
        rotating = any(group["kind"] == "rotates" for group in entry["observed"])
        allowed = name in REFUSED_BY_DESIGN or f"{name} {variant}" in REFUSED_BY_DESIGN or name in KNOWN_GAPS
        assert not rotating or allowed, f"{name} {variant}: refused, yet its class rotates: {refused}"
        return
    if name in KNOWN_GAPS:
        assert verdict != "match", f"{name} {variant} now matches: drop it from KNOWN_GAPS"
        return
    differing = [f"layer {row['index']} (seq_len {row['seq_len']}): {row['reason']}" for row in rows
                 if row["verdict"] != "match"]
    assert differing == [], f"{name} {variant}: {differing[:3]}"


def test_every_listed_class_was_observed() -> None:
    """A class listed as a gap or refused by design has an observation the suite re-checks."""
    for listed in {**KNOWN_GAPS, **REFUSED_BY_DESIGN}:
        name, _, variant = listed.partition(" ")
        entries = [SWEEP["classes"][name][variant]] if variant else SWEEP["classes"][name].values()
        assert any("observed" in entry for entry in entries), f"{listed}: not observed"


def test_the_counts_are_what_the_docs_say() -> None:
    counts = Counter(entry["verdict"] for _, _, entry in _variants())
    docs = (ROOT / "docs" / "probe.md").read_text(encoding="utf-8")
    assert f"{len(SWEEP['classes'])} classes" in docs
    for verdict, count in counts.items():
        assert f"{count} {verdict}" in docs, (verdict, count)


def test_a_sample_re_probed_live_gives_the_committed_verdicts() -> None:
    """CI re-probes three measured classes chosen from the commit (ROPEKIT_SAMPLE_SEED), else from the data."""
    pytest.importorskip("torch", reason="re-probing needs the reference extra (pip install -e '.[reference]')")
    transformers = pytest.importorskip("transformers", reason="re-probing needs the reference extra")
    if transformers.__version__ != transformers_version():
        pytest.skip(f"transformers {transformers.__version__} is installed; the sweep is of {transformers_version()}")
    measured = sorted(name for name, variants in SWEEP["classes"].items()
                      if all(entry["verdict"] != "not_measured" for entry in variants.values()))
    seed = os.environ.get("ROPEKIT_SAMPLE_SEED") or hashlib.sha256(json.dumps(SWEEP).encode()).hexdigest()
    ranked = sorted(measured, key=lambda name: hashlib.sha256(f"{seed}:{name}".encode()).hexdigest())
    script = SCRIPT
    for name in ranked[:3]:
        recorded = SWEEP["classes"][name]
        legacy = tuple(variant.removeprefix("legacy_") for variant in recorded if variant.startswith("legacy_"))
        fresh = script.probe_one(name, legacy_kinds=legacy)  # the types recorded: a class's place moves as classes come
        assert set(recorded) <= set(fresh), (name, sorted(set(recorded) - set(fresh)))  # no recorded variant is lost
        # (a variant the committed run timed out on is absent from the record; it is probed here, not judged)
        assert {variant: fresh[variant]["verdict"] for variant in recorded} == \
            {variant: entry["verdict"] for variant, entry in recorded.items()}, name
