"""Real published configs (``tests/data/configs/published``, sources in its ``SOURCES.md``) probed
on their transformers classes by ``python scripts/probe_sweep.py --published``: the observations
are committed (``tests/data/probe/published.json``) and ropekit's tables are re-checked against
them here without torch."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from ropekit.config.classes import transformers_version
from ropekit.engines.probe import compare

from ..support import CONFIGS, DATA
from .test_probe_sweep import _observations

PUBLISHED = CONFIGS / "published"
PROBED = json.loads((DATA / "probe" / "published.json").read_text(encoding="utf-8"))


def test_every_published_config_was_probed_with_the_pinned_transformers() -> None:
    assert PROBED["transformers"] == transformers_version()
    assert set(PROBED["configs"]) == {path.name for path in PUBLISHED.glob("*.json")}
    for name, entry in PROBED["configs"].items():
        assert entry["verdict"] in ("match", "refused", "not_measured"), (name, entry["verdict"], entry.get("layers"))
        if entry["verdict"] != "match":
            assert entry.get("reason"), name
        if "observed" not in entry:  # remote code (numpy ports check it) or a class the probe cannot run
            assert entry["verdict"] == "not_measured", name


@pytest.mark.parametrize("name", sorted(name for name, entry in PROBED["configs"].items() if "observed" in entry))
def test_ropekit_serves_what_the_class_applies_to_each_published_config(name: str) -> None:
    config: dict[str, Any] = json.loads((PUBLISHED / name).read_text(encoding="utf-8"))
    entry = PROBED["configs"][name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows, _verdict = compare(_observations(entry), config)
    refused = next((row["reason"] for row in rows if row.get("ropekit") == "refused"), None)
    if refused is not None:  # only code that rotates nothing may be refused
        assert not any(group["kind"] == "rotates" for group in entry["observed"]), (name, refused)
        return
    differing = [f"layer {row['index']} (seq_len {row['seq_len']}): {row['reason']}" for row in rows
                 if row["verdict"] != "match"]
    assert differing == [], (name, differing[:3])


def test_the_counts_are_what_the_docs_say() -> None:
    from collections import Counter

    from ..support import ROOT

    counts = Counter(entry["verdict"] for entry in PROBED["configs"].values())
    docs = (ROOT / "docs" / "probe.md").read_text(encoding="utf-8")
    assert f"Published configs: {len(PROBED['configs'])} probed: {counts['match']} match, {counts['refused']} " \
        f"refused" in docs
    assert f"{counts['not_measured']} not measured" in docs
