"""The ``ropekit audit --json`` document users parse (docs/cli.md), pinned byte for byte on every
committed engine artifact: ``tests/data/audit_json/`` holds the text the CLI printed for each
(``scripts/audit_json_golden.py`` writes it), and any change to the JSON contract shows here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ropekit.cli.main import main
from tests.support import flat_artifacts, stack_artifacts

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "audit_json"
INDEX = json.loads((GOLDEN / "INDEX.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", sorted(INDEX))
def test_audit_json_is_byte_for_byte_what_users_parse(
    case: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the documents name the artifacts relative to the repository
    status = main(INDEX[case]["arguments"])
    printed = capsys.readouterr().out
    assert status == INDEX[case]["status"]
    assert printed == (GOLDEN / f"{case}.json").read_text(encoding="utf-8")


def test_every_committed_artifact_has_a_pinned_document() -> None:
    committed = set(flat_artifacts()) | set(stack_artifacts())
    assert committed <= set(INDEX)
    assert {name for name in os.listdir(GOLDEN) if name != "INDEX.json"} == {f"{case}.json" for case in INDEX}
