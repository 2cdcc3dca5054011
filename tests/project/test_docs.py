"""Every link in the README and docs/ leads somewhere: relative markdown links (and their
``#anchors``) point at files and headings that exist, and every backticked repo path (one with a
``/`` and a file extension) names a file in the checkout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..support import ROOT

DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(r"^\.{0,2}/?[\w.-]+(?:/[\w.-]+)+\.[A-Za-z0-9]+$")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks (their paths are examples, not references)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a markdown file."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(path.read_text(encoding="utf-8")), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def test_the_documents_are_found() -> None:
    names = {path.name for path in DOCUMENTS}
    assert {"README.md", "architecture.md", "configs.md", "cli.md", "audit.md", "plugin-guide.md"} <= names


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_relative_links_and_their_anchors_exist(document: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(document.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto
        name, _, anchor = target.partition("#")
        linked = (document.parent / name).resolve() if name else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert broken == [], f"{document.name}: {broken}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_backticked_repo_paths_exist(document: Path) -> None:
    missing = [code for code in INLINE_CODE.findall(_prose(document.read_text(encoding="utf-8")))
               if REPO_PATH.match(code) and not (ROOT / code).exists() and not (document.parent / code).exists()]
    assert missing == [], f"{document.name}: {missing}"


def test_the_checks_catch_a_broken_link_and_a_missing_path(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](page.md#title) [gone](nowhere.md) [bad](page.md#nope) `core/nowhere.py`\n"
                    "```\n[fenced](ignored.md)\n```\n")
    prose = _prose(page.read_text())
    assert LINK.findall(prose) == ["page.md#title", "nowhere.md", "page.md#nope"]
    assert _anchors(page) == {"title"}
    assert [code for code in INLINE_CODE.findall(prose) if REPO_PATH.match(code)] == ["core/nowhere.py"]


def test_the_families_page_says_what_the_derived_facts_and_rules_say() -> None:
    """docs/families.md's generated section is the facts ropekit applies (scripts/families_table.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("families_table", ROOT / "scripts" / "families_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "families.md").read_text(encoding="utf-8") == module.page_with(module.section()), (
        "regenerate with: python scripts/families_table.py")


TORCH_INSTRUCTION = "pip install torch==2.13.0"
"""The one way README, docs/ and pyproject.toml tell to get torch: the CPU build, installed before an extra."""


def test_one_instruction_for_cpu_torch() -> None:
    """Every ``pip install torch...`` is the one instruction, nothing says to get torch another way (an index
    URL, "CPU torch is enough"), and each page that installs an extra with torch gives the instruction."""
    texts = {path.name: path.read_text(encoding="utf-8") for path in [*DOCUMENTS, ROOT / "pyproject.toml"]}
    installs = {match for text in texts.values() for match in re.findall(r"pip install torch[^\s`'\")]*", text)}
    assert installs == {TORCH_INSTRUCTION}
    for name, text in texts.items():
        assert not re.search(r"download\.pytorch\.org|CPU torch is enough|torch.*\+cpu\b.*pip", text), name
    for name in ("README.md", "frameworks.md", "probe.md", "development.md", "pyproject.toml"):
        assert f"{TORCH_INSTRUCTION}" in texts[name], name
    assert texts["pyproject.toml"].count(f"Install the CPU build of torch first: {TORCH_INSTRUCTION}") == 2
