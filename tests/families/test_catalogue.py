"""The catalogue of vLLM's architectures (``docs/families.md``, ``tests/data/vllm/catalogue.json``)
is generated, never typed: it regenerates from vLLM's registry (read in vLLM's virtualenv into
``tests/data/vllm/registry.json``), the pinned transformers and the researched model_types, and
every status in it is what ropekit does today."""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType

import pytest

from ropekit.config.classes import transformers_version

from ..support import CONFIGS, ROOT, load_script

SCRIPT = ROOT / "scripts" / "vllm_catalogue.py"
CATALOGUE = json.loads((ROOT / "tests" / "data" / "vllm" / "catalogue.json").read_text(encoding="utf-8"))


def _script() -> ModuleType:
    return load_script("vllm_catalogue")


def test_every_status_in_the_catalogue_is_what_ropekit_does_today() -> None:
    script = _script()
    configs = script.published_configs()
    stale = {model_type: (entry["status"], script.status(model_type, configs)["status"])
             for model_type, entry in CATALOGUE["model_types"].items()
             if script.status(model_type, configs) != entry}
    assert stale == {}, "rerun python scripts/vllm_catalogue.py (reference extra installed)"


def test_the_catalogue_regenerates_from_its_sources() -> None:
    transformers = pytest.importorskip("transformers", reason="the reference extra (pip install -e '.[reference]')")
    if transformers.__version__ != transformers_version():
        pytest.skip(f"transformers {transformers.__version__} is installed; the catalogue is for "
                    f"{transformers_version()} (the reference extra pins it)")
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_every_architecture_of_vllms_registry_is_listed_with_its_family() -> None:
    registry = json.loads((ROOT / "tests" / "data" / "vllm" / "registry.json").read_text(encoding="utf-8"))
    listed = {row["architecture"]: row for row in CATALOGUE["architectures"]}
    assert set(listed) == set(registry["architectures"]) and len(listed) == 391
    drafts = [row for row in listed.values() if row["kind"] == "draft"]
    assert drafts and all(row["family"] for row in drafts)  # drafts and MTP heads are listed with their family
    assert listed["DeepSeekMTPModel"]["family"] == "deepseek_v3"


@pytest.mark.parametrize("model_type", ["internlm2", "minicpm", "minicpmv", "orion", "mimo", "deepseek",
                                        "nemotron-nas", "phi3_v", "internvl_chat", "kimi_vl"])
def test_the_families_vllm_serves_natively_are_served(model_type: str) -> None:
    assert CATALOGUE["model_types"][model_type]["status"] == "served"


def test_scan_over_the_families_configs_finds_no_unknown_model() -> None:
    files = sorted(str(path) for path in (CONFIGS / "families").glob("*.json") if path.name != "reference.json")
    result = subprocess.run([sys.executable, "-m", "ropekit", "scan", *files, "--json"],
                            capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"path"')]
    assert rows and {row["status"] for row in rows} <= {"ok", "refused"}, [
        (row["path"], row["status"]) for row in rows if row["status"] not in ("ok", "refused")]
    assert not [row for row in rows if row["status"] == "unknown_model"]
