"""Nothing ropekit ever served is lost by a side effect: every model_type in
``tests/data/families/served.json`` (written by ``scripts/served_families.py``, which only adds) is
still served as it was, unless it is listed under ``"dropped"`` with the reason."""

from __future__ import annotations

import json
import warnings

import pytest

import ropekit
from ropekit import Registry

from ..support import DATA

SERVED = json.loads((DATA / "families" / "served.json").read_text(encoding="utf-8"))
KEPT = {name: entry for name, entry in SERVED["served"].items() if name not in SERVED["dropped"]}


def _outcome(model_type: str) -> str:
    """What ``ropekit.load`` does with a config naming only ``model_type``: ``unknown``, ``no_rope``,
    or ``known`` (served, or refused for what the bare config lacks: not for its model_type)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ropekit.load({"model_type": model_type}, registry=Registry(read_env=False))
        except ropekit.UnknownModelTypeError:
            return "unknown"
        except ropekit.PluginError as error:  # a built-in family whose plugin no longer loads is lost too
            return f"plugin_error: {error}"
        except ropekit.NoRopeError:
            return "no_rope"
        except ropekit.RopekitError:
            return "known"
    return "known"


@pytest.mark.parametrize("model_type", sorted(KEPT))
def test_every_model_type_served_before_is_still_known(model_type: str) -> None:
    """Served, or refused for what a bare config lacks, or refused by name as code without RoPE (ESM
    with its default absolute positions): never unknown again."""
    outcome = _outcome(model_type)
    assert not outcome.startswith("plugin_error"), f"{model_type}: {outcome}"
    assert outcome != "unknown", (
        f"{model_type} was served ({KEPT[model_type]}) and is now unknown; restore it, or list it under 'dropped' in "
        "tests/data/families/served.json with the reason")


def test_the_record_lists_every_family_served_today() -> None:
    families = Registry(read_env=False).families
    builtin = {name for name in families.names() if (owner := families.owner(name)) and owner.distribution == "ropekit"}
    missing = sorted(builtin - set(SERVED["served"]))
    assert not missing, f"built-in families not recorded: {missing}; run python scripts/served_families.py"


def test_the_families_named_in_issue_32_are_kept() -> None:
    for model_type in ("internlm2", "chatglm", "baichuan", "qwen", "phi3small", "minimax_m1", "kimi_k2"):
        assert model_type in KEPT
