"""Model-family plugins (entry-point group ``ropekit.families``): a third party declares the facts
of a model_type ropekit does not know, with the same discovery, conflict, blocking and listing
rules as rope_type plugins, and the conformance suite checks the declaration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ropekit
from ropekit import Registry
from ropekit.testing import check_family

from ..support import MakeDist

FAMILY = '''
from ropekit import Example, ModelFamily, hookimpl

@hookimpl
def ropekit_family():
    return ModelFamily(
        model_type=MODEL_TYPE,
        doc="Acme-LM: half the head rotates, interleaved pairs",
        layout="gptj",
        partial_rotary_factor=0.5,
        defaults={"hidden_size": 512, "num_attention_heads": 4, "rope_theta": 50000.0},
        examples=(Example("acme-small", {"model_type": MODEL_TYPE, "hidden_size": 16, "num_attention_heads": 2},
                          [1.0, 50000.0 ** -0.5]),),
    )
'''


def _family_source(model_type: str, body: str = FAMILY) -> str:
    return f"MODEL_TYPE = {model_type!r}\n{body}"


def _install(make_dist: MakeDist, model_type: str = "acme_lm", dist: str = "ropekit-acme", body: str = FAMILY,
             module: str = "acme_family") -> None:
    make_dist(dist, {model_type: module}, {module: _family_source(model_type, body)}, group="ropekit.families")


def test_a_declared_family_is_served_with_its_facts_and_class_defaults(make_dist: MakeDist, registry: Registry) -> None:
    config = {"model_type": "acme_lm"}
    with pytest.raises(ropekit.UnknownModelTypeError):
        ropekit.load(config, registry=registry)
    _install(make_dist)
    served = Registry(read_env=False)
    with pytest.warns(UserWarning, match=r"^head_dim: the config states no width .* acme_lm's class defaults"):
        table = ropekit.load(config, registry=served).table  # the declared widths, said
    assert (table.head_dim, table.rotary_dim, table.layout, table.geometry.theta) == (128, 64, "gptj", 5e4)
    np.testing.assert_allclose(table.inv_freq, 5e4 ** -(np.arange(0, 64, 2) / 64), rtol=1e-15)
    stated = ropekit.load({**config, "hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e4},
                          registry=served).table
    assert stated.rotary_dim == 16 and stated.geometry.theta == 1e4  # stated values win over declared defaults
    assert check_family("acme_lm", registry=served) == ["entry_point", "declaration", "example:acme-small"]


def test_family_plugins_follow_the_scheme_rules(make_dist: MakeDist) -> None:
    _install(make_dist)
    _install(make_dist, dist="ropekit-acme-fork", module="acme_fork")
    conflict = Registry(read_env=False)
    with pytest.raises(ropekit.DuplicateSchemeError, match="claimed by 2 distributions") as caught:
        ropekit.load({"model_type": "acme_lm"}, registry=conflict)
    assert caught.value.kind == "model_type" and str(caught.value).startswith("model_type 'acme_lm'")
    chosen = Registry(read_env=False, block=["ropekit-acme-fork"])
    with pytest.warns(UserWarning, match="states no width"):
        assert ropekit.load({"model_type": "acme_lm"}, registry=chosen).table.layout == "gptj"
    blocked = Registry(read_env=False, block=["acme_lm"])
    with pytest.raises(ropekit.PluginBlockedError, match="model_type 'acme_lm' is blocked"):
        ropekit.load({"model_type": "acme_lm"}, registry=blocked)
    pinned = Registry(read_env=False, allow=["ropekit"], block=["ropekit-acme-fork"])
    with pytest.raises(ropekit.PluginBlockedError, match="not in the allow-list"):
        ropekit.load({"model_type": "acme_lm"}, registry=pinned)
    assert ropekit.load({"head_dim": 8}, registry=pinned).table.rotary_dim == 8  # other configs unaffected


@pytest.mark.parametrize(("body", "error", "match"), [
    (FAMILY.replace("model_type=MODEL_TYPE", "model_type='other_lm'"), ropekit.SchemeMismatchError,
     "returned a family declared for model_type 'other_lm'"),
    (FAMILY.replace("layout=\"gptj\"", "layout=\"sideways\""), ropekit.SchemeDeclarationError, "layout must be"),
    (FAMILY.replace('"rope_theta": 50000.0', '"rope_thetta": 50000.0'), ropekit.SchemeDeclarationError,
     r"defaults name keys ropekit does not read: \['rope_thetta'\]"),
    ("from ropekit import hookimpl\n@hookimpl\ndef ropekit_famly():\n    return None\n", ropekit.PluginLoadError,
     "did you mean 'ropekit_family'"),
    ("raise ImportError('no torch here')\n", ropekit.PluginLoadError, "importing 'acme_family' failed"),
])
def test_a_broken_family_plugin_is_blamed_by_distribution_and_breaks_only_its_model_type(
    make_dist: MakeDist, body: str, error: type[Exception], match: str
) -> None:
    _install(make_dist, body=body)
    registry = Registry(read_env=False)
    with pytest.raises(error, match=match) as caught:
        ropekit.load({"model_type": "acme_lm"}, registry=registry)
    assert caught.value.distribution == "ropekit-acme"  # type: ignore[attr-defined]
    assert ropekit.load({"model_type": "llama", "head_dim": 8}, registry=registry).table.rotary_dim == 8
    with pytest.raises(AssertionError, match=r"\[family acme_lm\]"):
        check_family("acme_lm", registry=registry)


def test_a_family_declaring_no_rope_is_refused_by_name(make_dist: MakeDist) -> None:
    body = FAMILY.replace('layout="gptj",', 'layout="gptj", no_rope="Acme-LM uses ALiBi",').replace(
        "examples=(Example(", "examples=() and (Example(")
    _install(make_dist, body=body)
    registry = Registry(read_env=False)
    with pytest.raises(ropekit.NoRopeError, match="'acme_lm' applies no RoPE: Acme-LM uses ALiBi"):
        ropekit.load({"model_type": "acme_lm", "head_dim": 8}, registry=registry)
    assert check_family("acme_lm", registry=registry) == ["entry_point", "declaration", "no_rope"]


def test_a_family_for_a_model_type_ropekit_knows_is_flagged(make_dist: MakeDist) -> None:
    _install(make_dist, model_type="llama")
    registry = Registry(read_env=False)
    with pytest.raises(AssertionError, match="already knows this model_type's code"):
        check_family("llama", registry=registry)


def test_declarations_are_checked_where_they_are_written() -> None:
    with pytest.raises(ropekit.DeclarationError, match="partial_rotary_factor must be in"):
        ropekit.ModelFamily("x", "doc", partial_rotary_factor=1.5)
    with pytest.raises(ropekit.DeclarationError, match="non-empty name"):
        ropekit.ModelFamily("has space", "doc")
    with pytest.raises(ropekit.DeclarationError, match="JSON value"):
        ropekit.ModelFamily("x", "doc", defaults={"rope_theta": float("nan")})


def test_list_and_check_plugin_show_families(make_dist: MakeDist, tmp_path: Path) -> None:
    _install(make_dist)
    site = tmp_path / "site"  # where make_dist installs (the same tmp_path as this test's)
    assert (site / "acme_family.py").exists()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ropekit", *args], capture_output=True, text=True, check=False,
                              env={"PYTHONPATH": str(site), "PATH": ""})

    listed = json.loads(run("list", "--json").stdout)
    third_party = [row for row in listed["families"] if row["distribution"] != "ropekit"]  # beside the built-ins
    assert [row["model_type"] for row in third_party] == ["acme_lm"]
    assert third_party[0]["doc"].startswith("Acme-LM") and third_party[0]["status"] == "loaded"
    builtin = {row["model_type"] for row in listed["families"] if row["distribution"] == "ropekit"}
    assert {"internlm2", "mimo"} <= builtin
    assert "model families" in run("list").stdout
    passed = run("check-plugin", "--family", "acme_lm", "--json")
    assert passed.returncode == 0 and json.loads(passed.stdout)["passed"] is True
    missing = run("check-plugin", "--family", "nobody_lm")
    assert missing.returncode == 2
    assert missing.stderr.startswith("ropekit: error: NAME: no installed distribution registers model_type")
