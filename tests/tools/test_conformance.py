"""The conformance suite: every installed scheme passes it, and broken plugins fail the named check."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ropekit import Registry
from ropekit.testing import CHECKS, conformance_suite, installed_rope_types, run_checks

from ..support import MakeDist

pytest_plugins = ["pytester"]

# Every installed scheme: the built-ins, and any third-party plugin CI installed (examples/).
test_installed_scheme_conforms = conformance_suite()


def test_every_builtin_is_covered() -> None:
    assert set(installed_rope_types()) >= {
        "default", "mrope", "linear", "dynamic", "yarn", "llama3", "longrope", "su", "proportional"}


SEQ_PLUGIN = '''
import numpy as np
from ropekit import Example, Frequencies, Key, Scheme, hookimpl, plain_inv_freq

def build(params, geometry, seq_len):
    plain = plain_inv_freq(geometry.theta, geometry.rotary_dim)
    long = seq_len is not None and seq_len {cmp} params["original"]
    return Frequencies(plain / (2.0 if long else 1.0))

@hookimpl
def ropekit_scheme():
    return Scheme(
        name="{name}", doc="halves past the original length", build=build, seq_len_dependent=True,
        seq_len_rule="halved when seq_len > original", switch_at=lambda p, g: p["original"],
        keys=(Key("original", "int", "switch length", required=True, gt=0),),
        examples=(Example("ex", {{"head_dim": 4, "rope_scaling": {{"rope_type": "{name}", "original": 64}}}},
                          ({first}, 0.01)),),
    )
'''


def _seq_plugin(name: str, cmp: str = ">", first: str = "1.0") -> str:
    return textwrap.dedent(SEQ_PLUGIN.format(name=name, cmp=cmp, first=first))


def _failed(name: str, registry: Registry) -> dict[str, str]:
    return {r.check: r.message for r in run_checks(name, registry=registry) if not r.passed}


def test_a_correct_third_party_plugin_passes(make_dist: MakeDist) -> None:
    make_dist("ropekit-good", {"good": "good_plugin"}, {"good_plugin": _seq_plugin("good")})
    assert _failed("good", Registry(read_env=False)) == {}


def test_off_by_one_switch_fails_seq_len_thresholds(make_dist: MakeDist) -> None:
    make_dist("ropekit-off", {"off": "off_plugin"}, {"off_plugin": _seq_plugin("off", cmp=">=")})
    failed = _failed("off", Registry(read_env=False))
    assert set(failed) == {"seq_len_thresholds"}
    assert "[off] seq_len_thresholds: the table at seq_len 64 <= switch_at 64" in failed["seq_len_thresholds"]


def test_wrong_example_values_fail_examples(make_dist: MakeDist) -> None:
    make_dist("ropekit-liar", {"liar": "liar_plugin"}, {"liar_plugin": _seq_plugin("liar", first="0.5")})
    failed = _failed("liar", Registry(read_env=False))
    assert set(failed) == {"examples"}
    assert "inv_freq[0] = 1.0, declared 0.5" in failed["examples"]


def test_broken_import_fails_the_first_check_once_naming_the_distribution(make_dist: MakeDist) -> None:
    make_dist("ropekit-boom", {"boom": "boom_plugin"}, {"boom_plugin": "raise ImportError('no numpy for you')"})
    results = run_checks("boom", registry=Registry(read_env=False))
    assert [result.status for result in results] == ["fail"] + ["not_run"] * (len(CHECKS) - 1)
    first = results[0]
    assert first.check == "entry_point" and "ropekit-boom" in first.message and "no numpy for you" in first.message
    assert {result.message for result in results[1:]} == {"not run: the plugin does not load (entry_point says why)"}
    assert sum("no numpy for you" in result.message for result in results) == 1
    later = run_checks("boom", registry=Registry(read_env=False), checks=("examples", "declaration"))
    assert [(result.check, result.status) for result in later] == [("examples", "fail"), ("declaration", "not_run")]
    assert "no numpy for you" in later[0].message


def test_check_plugin_prints_a_load_failure_once(make_dist: MakeDist, tmp_path: Path) -> None:
    make_dist("ropekit-boom", {"boom": "boom_plugin"}, {"boom_plugin": "raise ImportError('no numpy for you')"})
    env = {"PYTHONPATH": str(tmp_path / "site"), "PATH": ""}
    text = subprocess.run([sys.executable, "-m", "ropekit", "check-plugin", "boom"], capture_output=True, text=True,
                          check=False, env=env)
    assert text.returncode == 1 and text.stdout.count("no numpy for you") == 1
    assert text.stdout.count("NOT RUN") == len(CHECKS) - 1 and text.stdout.count("the plugin does not load (") == 1
    assert text.stdout.splitlines()[-1] == f"0 passed, 1 failed, {len(CHECKS) - 1} not run"
    done = subprocess.run([sys.executable, "-m", "ropekit", "check-plugin", "boom", "--json"], capture_output=True,
                          text=True, check=False, env=env)
    document = json.loads(done.stdout)
    assert done.returncode == 1 and document["passed"] is False
    assert [check["status"] for check in document["checks"]] == ["fail"] + ["not_run"] * (len(CHECKS) - 1)
    assert done.stdout.count("no numpy for you") == 1


BARE_PLUGIN = """
from ropekit import Frequencies, Scheme, hookimpl, plain_inv_freq

@hookimpl
def ropekit_scheme():
    return Scheme(name="bare", doc="no examples, an alias nobody registered", aliases=("bare_v0",),
                  build=lambda p, g, s: Frequencies(plain_inv_freq(g.theta, g.rotary_dim)))
"""


def test_missing_examples_and_unregistered_alias(make_dist: MakeDist) -> None:
    source = BARE_PLUGIN
    make_dist("ropekit-bare", {"bare": "bare_plugin"}, {"bare_plugin": source})
    results = {r.check: r for r in run_checks("bare", registry=Registry(read_env=False))}
    failed = {name: r.message for name, r in results.items() if r.failed}
    assert set(failed) == {"entry_point"}  # the other checks run on a config synthesized from the keys
    assert results["examples"].status == "not_run" and "no examples declared" in results["examples"].message
    assert "aliases ['bare_v0'] are declared but not registered" in failed["entry_point"]


def test_duplicate_claim_fails_entry_point(make_dist: MakeDist) -> None:
    make_dist("ropekit-one", {"twin": "twin_one"}, {"twin_one": _seq_plugin("twin")})
    make_dist("ropekit-two", {"twin": "twin_two"}, {"twin_two": _seq_plugin("twin")})
    failed = _failed("twin", Registry(read_env=False))
    assert "claimed by 2 distributions: ropekit-one, ropekit-two" in failed["entry_point"]


def test_pytest_helper_ids_and_expected_failures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_suite='''
        from ropekit.testing import conformance_suite
        test_default = conformance_suite("default", expected_failures={"default-examples": "demo"})
        '''
    )
    result = pytester.runpytest_inprocess("-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*test_default?default-entry_point? PASSED*",
                                 "*test_default?default-examples? FAILED*"])
    result.assert_outcomes(passed=len(CHECKS) - 1, failed=1)  # a strict xfail that passes is a failure


def test_expected_failures_must_name_real_checks() -> None:
    with pytest.raises(ValueError, match="unknown checks"):
        conformance_suite("default", expected_failures={"exmaples": "typo"})


OVERFLOW_PLUGIN = """
import math
from ropekit import Example, Frequencies, Key, Scheme, hookimpl, plain_inv_freq

@hookimpl
def ropekit_scheme():
    return Scheme(
        name="fragile", doc="takes an exponential of a key it never bounded",
        build=lambda p, g, s: Frequencies(plain_inv_freq(g.theta, g.rotary_dim) / math.exp(p["divisor"] - 4)),
        keys=(Key("divisor", "float", "divisor", required=True, gt=0),),
        examples=(Example("d4", {"head_dim": 4, "rope_scaling": {"rope_type": "fragile", "divisor": 4.0}},
                          (1.0, 0.01)),),
    )
"""


def test_unbounded_key_that_overflows_fails_extreme_values(make_dist: MakeDist) -> None:
    make_dist("ropekit-fragile", {"fragile": "fragile_plugin"}, {"fragile_plugin": OVERFLOW_PLUGIN})
    failed = _failed("fragile", Registry(read_env=False))
    assert set(failed) == {"extreme_values"}
    assert "divisor=1000000000000.0 is declared valid but" in failed["extreme_values"]


def test_a_plugin_that_needs_max_positions_but_does_not_say_so_fails(make_dist: MakeDist) -> None:
    """Its switch_at reads max_position_embeddings, which real configs may omit: a traceback for the
    user unless the suite catches it (its examples all carry max_position_embeddings)."""
    source = _seq_plugin("greedy").replace('switch_at=lambda p, g: p["original"]',
                                           'switch_at=lambda p, g: g.max_position_embeddings // 2')
    source = source.replace('{"head_dim": 4, ', '{"head_dim": 4, "max_position_embeddings": 128, ')
    make_dist("ropekit-greedy", {"greedy": "greedy_plugin"}, {"greedy_plugin": source})
    failed = _failed("greedy", Registry(read_env=False))
    assert "minimal_configs" in failed and "no max_position_embeddings" in failed["minimal_configs"]
    assert "switch_at() raised TypeError" in failed["minimal_configs"]
