"""The host's failure modes, through real entry-point discovery of fake distributions."""

from __future__ import annotations

import re
import sys
import threading
from typing import Any

import numpy as np
import pytest

import ropekit
from ropekit import Registry

from ..support import MakeDist, plugin_source

CONFIG = {"head_dim": 64, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "halve", "alpha": 2.0}}


def test_third_party_plugin_is_discovered_and_served(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-halve", {"halve": "halve_plugin"}, {"halve_plugin": plugin_source("halve")}, version="2.3")
    table = ropekit.load(CONFIG, registry=registry).table
    np.testing.assert_allclose(table.inv_freq, ropekit.plain_inv_freq(10000.0, 64) / 2, rtol=1e-15)
    status = {s.rope_type: s for s in registry.status()}["halve"]
    assert (status.distribution, status.version, status.state) == ("ropekit-halve", "2.3", "loaded")


def test_discovery_does_not_import_plugins(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-lazy", {"lazy": "lazy_plugin"}, {"lazy_plugin": plugin_source("lazy")})
    assert "lazy" in registry.names()
    assert {s.rope_type: s.state for s in registry.status()}["lazy"] == "available"
    assert "lazy_plugin" not in sys.modules
    ropekit.load({"head_dim": 64}, registry=registry)
    assert "lazy_plugin" not in sys.modules


def test_only_the_requested_plugin_is_imported(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-halve", {"halve": "halve_plugin"}, {"halve_plugin": plugin_source("halve")})
    make_dist("ropekit-other", {"other": "other_plugin"}, {"other_plugin": plugin_source("other")})
    ropekit.load(CONFIG, registry=registry)
    assert "halve_plugin" in sys.modules and "other_plugin" not in sys.modules


def test_two_distributions_claiming_one_rope_type(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-a", {"halve": "halve_a"}, {"halve_a": plugin_source("halve")})
    make_dist("ropekit-b", {"halve": "halve_b"}, {"halve_b": plugin_source("halve")})
    with pytest.raises(ropekit.DuplicateSchemeError) as caught:
        ropekit.load(CONFIG, registry=registry)
    assert "ropekit-a" in str(caught.value) and "ropekit-b" in str(caught.value)
    assert ropekit.load({"head_dim": 64}, registry=registry).table.rope_type == "default"
    assert {s.rope_type: s.state for s in registry.status()}["halve"] == "conflict"


def test_plugin_failing_to_import_breaks_only_itself(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-broken", {"halve": "broken_plugin"}, {"broken_plugin": "raise RuntimeError('boom')\n"})
    with pytest.raises(ropekit.PluginLoadError, match=r"ropekit-broken.*RuntimeError: boom") as caught:
        ropekit.load(CONFIG, registry=registry)
    assert caught.value.distribution == "ropekit-broken"
    with pytest.raises(ropekit.PluginLoadError):  # the failure is cached, not retried
        registry.scheme("halve")
    assert ropekit.load({"head_dim": 64}, registry=registry).table.rope_type == "default"
    assert {s.rope_type: s.state for s in registry.status()}["halve"] == "broken"


def test_missing_module(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-ghost", {"halve": "no_such_module_anywhere"})
    with pytest.raises(ropekit.PluginLoadError, match="ModuleNotFoundError"):
        registry.scheme("halve")


def test_scheme_name_must_match_entry_point(make_dist: MakeDist, registry: Registry) -> None:
    make_dist("ropekit-liar", {"halve": "liar_plugin"}, {"liar_plugin": plugin_source("double")})
    with pytest.raises(ropekit.SchemeMismatchError, match="returned a scheme named 'double'") as caught:
        registry.scheme("halve")
    assert caught.value.distribution == "ropekit-liar"


def test_hook_name_typo_is_named(make_dist: MakeDist, registry: Registry) -> None:
    source = plugin_source("halve").replace("def ropekit_scheme()", "def ropekit_schem()")
    make_dist("ropekit-typo", {"halve": "typo_plugin"}, {"typo_plugin": source})
    with pytest.raises(ropekit.PluginLoadError, match="did you mean 'ropekit_scheme' instead of 'ropekit_schem'"):
        registry.scheme("halve")


def test_hookimpl_that_fails_pluggy_validation_leaves_nothing_behind(make_dist: MakeDist, registry: Registry) -> None:
    source = plugin_source("halve").replace("def ropekit_scheme():", "def ropekit_scheme(config):")
    make_dist("ropekit-args", {"halve": "args_plugin"}, {"args_plugin": source})
    with pytest.raises(ropekit.PluginLoadError, match=r"ropekit-args.*invalid hook"):
        registry.scheme("halve")
    # pluggy < 1.7 left such a plugin half-registered; the next plugin must still load cleanly
    assert ropekit.load({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
                        registry=registry).table.rope_type == "linear"


def test_hook_returning_wrong_type(make_dist: MakeDist, registry: Registry) -> None:
    source = "from ropekit import hookimpl\n@hookimpl\ndef ropekit_scheme():\n    return {'name': 'halve'}\n"
    make_dist("ropekit-dict", {"halve": "dict_plugin"}, {"dict_plugin": source})
    with pytest.raises(ropekit.PluginLoadError, match="returned dict, expected ropekit.Scheme"):
        registry.scheme("halve")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim)[:-1])", "shape"),
        ("return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim) * np.nan)", "non-finite"),
        ("return Frequencies(-plain_inv_freq(geometry.theta, geometry.rotary_dim))", "non-positive"),
        ("return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim).astype(np.float32))", "float64"),
        ("return plain_inv_freq(geometry.theta, geometry.rotary_dim)", "expected ropekit.Frequencies"),
        ("return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim), float('inf'))", "attention_factor"),
        ("raise ZeroDivisionError('oops')", "builder raised ZeroDivisionError: oops"),
    ],
)
def test_bad_builder_output_is_contained(make_dist: MakeDist, registry: Registry, body: str, problem: str) -> None:
    source = plugin_source("halve").replace(
        'return Frequencies(plain_inv_freq(geometry.theta, geometry.rotary_dim) / params["alpha"])', body
    )
    make_dist("ropekit-bad", {"halve": "bad_plugin"}, {"bad_plugin": source})
    with pytest.raises(ropekit.InvalidTableError, match="ropekit-bad") as caught:
        ropekit.load(CONFIG, registry=registry)
    assert problem in str(caught.value)
    assert ropekit.load({"head_dim": 64}, registry=registry).table.rope_type == "default"


def test_malformed_declaration(make_dist: MakeDist, registry: Registry) -> None:
    source = plugin_source("halve").replace('Key("alpha", "float", "divisor", required=True, gt=0)',
                                            'Key("rope_theta", "float", "clash")')
    make_dist("ropekit-decl", {"halve": "decl_plugin"}, {"decl_plugin": source})
    with pytest.raises(ropekit.SchemeDeclarationError, match="read by the loader"):
        registry.scheme("halve")


def test_blocking_by_rope_type_distribution_and_env(
    make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dist("ropekit-halve", {"halve": "halve_plugin"}, {"halve_plugin": plugin_source("halve")})
    for blocked in (Registry(block=["halve"], read_env=False), Registry(block=["ropekit-halve"], read_env=False)):
        with pytest.raises(ropekit.PluginBlockedError, match="blocked"):
            ropekit.load(CONFIG, registry=blocked)
        assert {s.rope_type: s.state for s in blocked.status()}["halve"] == "blocked"
    monkeypatch.setenv("ROPEKIT_BLOCK", "llama3, halve")
    from_env = Registry()
    with pytest.raises(ropekit.PluginBlockedError):
        from_env.scheme("halve")
    assert from_env.scheme("default").name == "default"


def test_in_process_registration(registry: Registry) -> None:
    class Plugin:
        @ropekit.hookimpl
        def ropekit_scheme(self) -> ropekit.Scheme:
            return ropekit.Scheme(
                name="quarter", doc="test", build=lambda p, g, s: ropekit.Frequencies(
                    ropekit.plain_inv_freq(g.theta, g.rotary_dim) / 4))

    registry.register(Plugin(), name="quarter")
    table = ropekit.load({"head_dim": 8, "rope_scaling": {"rope_type": "quarter"}}, registry=registry).table
    np.testing.assert_allclose(table.inv_freq, ropekit.plain_inv_freq(10000.0, 8) / 4, rtol=1e-15)


def test_concurrent_first_loads_agree(make_dist: MakeDist) -> None:
    # two third-party plugins never imported before, plus built-ins: first loads race in 32 threads
    make_dist("ropekit-race-a", {"race_a": "race_a_plugin"}, {"race_a_plugin": plugin_source("race_a")})
    make_dist("ropekit-race-b", {"race_b": "race_b_plugin"}, {"race_b_plugin": plugin_source("race_b")})
    registry = Registry(read_env=False)
    configs = [
        {"head_dim": 64, "rope_scaling": {"rope_type": "race_a", "alpha": 2.0}},
        {"head_dim": 64, "rope_scaling": {"rope_type": "race_b", "alpha": 3.0}},
    ] + [
        {"head_dim": 64, "max_position_embeddings": 65536, "rope_scaling": {"rope_type": name, **extra}}
        for name, extra in [
            ("llama3", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}),
            ("yarn", {"factor": 4.0, "original_max_position_embeddings": 16384}),
            ("linear", {"factor": 2.0}),
            ("dynamic", {"factor": 2.0}),
        ]
    ]
    results: dict[int, list[float]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(32)

    def work(index: int) -> None:
        try:
            barrier.wait()
            results[index] = ropekit.load(configs[index % 6], registry=registry).table.inv_freq.tolist()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 32
    for index, values in results.items():
        assert values == results[index % 6]
    np.testing.assert_allclose(results[0], ropekit.plain_inv_freq(10000.0, 64) / 2, rtol=1e-15)


def test_conflict_is_resolved_by_blocking_a_distribution(make_dist: MakeDist) -> None:
    make_dist("ropekit-a", {"halve": "halve_a"}, {"halve_a": plugin_source("halve")})
    make_dist("ropekit-b", {"halve": "halve_b"}, {"halve_b": plugin_source("halve")})
    with pytest.raises(ropekit.DuplicateSchemeError, match="ROPEKIT_BLOCK=ropekit-b"):
        Registry(read_env=False).scheme("halve")
    resolved = Registry(block=["ropekit-b"], read_env=False)  # exactly what the message says to do
    assert ropekit.load(CONFIG, registry=resolved).table.rope_type == "halve"
    assert resolved.owner("halve") is not None and resolved.owner("halve").distribution == "ropekit-a"  # type: ignore[union-attr]
    assert {s.rope_type: s.state for s in resolved.status()}["halve"] == "loaded"
    with pytest.raises(ropekit.PluginBlockedError):  # by rope_type: nobody serves it
        Registry(block=["halve"], read_env=False).scheme("halve")


def test_a_plugin_cannot_impersonate_a_builtin(make_dist: MakeDist, registry: Registry) -> None:
    """Registered as 'evil' with the scheme named 'llama3' and 'evil' among its aliases."""
    source = plugin_source("llama3").replace('doc="test scheme"', 'doc="test scheme", aliases=("evil",)')
    make_dist("ropekit-evil", {"evil": "evil_plugin"}, {"evil_plugin": source})
    with pytest.raises(ropekit.SchemeMismatchError, match="claims the name 'llama3', which ropekit serves") as caught:
        ropekit.load({"head_dim": 64, "rope_scaling": {"rope_type": "evil", "alpha": 2.0}}, registry=registry)
    assert caught.value.distribution == "ropekit-evil"
    assert registry.scheme("llama3").name == "llama3" and registry.owner("llama3").distribution == "ropekit"  # type: ignore[union-attr]


def test_a_scheme_named_unlike_every_entry_point_of_its_distribution_is_refused_everywhere(
    make_dist: MakeDist, registry: Registry
) -> None:
    """Found by attack: entry point 'foo' returning a scheme named 'bar' (aliases 'foo') was served by
    ``table`` but refused by ``inspect``, which looks the table's canonical name up again."""
    source = plugin_source("bar").replace('doc="test scheme"', 'doc="test scheme", aliases=("foo",)')
    make_dist("ropekit-foo", {"foo": "foo_plugin"}, {"foo_plugin": source})
    config = {"head_dim": 64, "rope_scaling": {"rope_type": "foo", "alpha": 2.0}}
    with pytest.raises(ropekit.SchemeMismatchError, match="'bar', which ropekit-foo does not register") as caught:
        ropekit.load(config, registry=registry)
    assert caught.value.distribution == "ropekit-foo"


def test_a_scheme_whose_names_are_all_registered_is_served_under_each(make_dist: MakeDist, registry: Registry) -> None:
    source = plugin_source("bar").replace('doc="test scheme"', 'doc="test scheme", aliases=("foo",)')
    make_dist("ropekit-foobar", {"foo": "foobar_plugin", "bar": "foobar_plugin"}, {"foobar_plugin": source})
    for name in ("foo", "bar"):
        table = ropekit.load({"head_dim": 8, "rope_scaling": {"rope_type": name, "alpha": 2.0}}, registry=registry).table
        assert table.rope_type == "bar" and registry.scheme(table.rope_type).name == "bar"


@pytest.mark.parametrize(
    ("replacement", "problem"),
    [
        ("check=lambda p, g: 1 / 0,", "check() raised ZeroDivisionError"),
        ("check=lambda p, g: [('alpha', 3)],", "check() must yield (key, problem) string pairs"),
        ("landmarks=lambda p, g: {'edge': 'far'},", "landmarks() must return a mapping"),
        ("seq_len_dependent=True, seq_len_rule='r', switch_at=lambda p, g: p['missing'],", "switch_at() raised KeyError"),
        ("seq_len_dependent=True, seq_len_rule='r', switch_at=lambda p, g: 0,", "switch_at() must return a positive"),
    ],
)
def test_every_scheme_callable_is_contained(
    make_dist: MakeDist, registry: Registry, replacement: str, problem: str
) -> None:
    source = plugin_source("halve").replace('doc="test scheme",', f'doc="test scheme", {replacement}')
    make_dist("ropekit-calls", {"halve": "calls_plugin"}, {"calls_plugin": source})
    with pytest.raises(ropekit.SchemeCallError) as caught:
        ropekit.load(CONFIG, registry=registry)
    assert caught.value.distribution == "ropekit-calls" and problem in str(caught.value)
    assert not isinstance(caught.value, ropekit.RopeConfigError)


@pytest.mark.parametrize(
    ("declaration", "problem"),
    [
        (lambda: ropekit.Key("f", "float", "doc", per_pair=True), "per_pair needs a list kind"),
        (lambda: ropekit.Key("f", "float", "doc", gt=2, lt=1), "empty range"),
        (lambda: ropekit.Key("f", "float", "doc", ge=1, lt=1), "empty range"),
        (lambda: ropekit.Key("f", "float", "doc", required=True, default=1.0), "required and also has a default"),
        (lambda: ropekit.Key("f", "float", "doc", default=-1.0, gt=0), "default -1.0 is invalid"),
        (lambda: ropekit.Key("f", "complex", "doc"), "kind must be one of"),  # type: ignore[arg-type]
        (lambda: ropekit.Key("rope_theta", "float", "doc"), "read by the loader"),
        (lambda: ropekit.Key("not a name", "float", "doc"), "identifier"),
        (lambda: ropekit.Scheme("s", "doc", build=_build, switch_at=lambda p, g: 1), "seq_len_dependent is false"),
        (lambda: ropekit.Scheme("s", "doc", build=_build, seq_len_dependent=True, seq_len_rule="r"),
         "must declare switch_at"),
        (lambda: ropekit.Scheme("s", "doc", build=_build, keys=(ropekit.Key("a", "int", "d"),) * 2), "declared twice"),
    ],
)
def test_declaration_errors_are_raised_at_the_authors_line(declaration: Any, problem: str) -> None:
    with pytest.raises(ropekit.DeclarationError, match=re.escape(problem)):
        declaration()


def _build(params: ropekit.Params, geometry: ropekit.Geometry, seq_len: int | None) -> ropekit.Frequencies:
    return ropekit.Frequencies(ropekit.plain_inv_freq(geometry.theta, geometry.rotary_dim))


def test_declaration_error_at_import_names_the_distribution(make_dist: MakeDist, registry: Registry) -> None:
    source = plugin_source("halve").replace('required=True, gt=0', 'required=True, gt=0, per_pair=True')
    source = source.replace("@hookimpl", "SCHEME = ropekit_scheme_value = None\n@hookimpl")
    source += "\nSCHEME = ropekit_scheme()\n"  # built at import time, as the built-ins do
    make_dist("ropekit-declared", {"halve": "declared_plugin"}, {"declared_plugin": source})
    with pytest.raises(ropekit.SchemeDeclarationError, match="ropekit-declared.*per_pair needs a list kind"):
        registry.scheme("halve")


def test_pluggy_is_the_plugin_manager(registry: Registry) -> None:
    """Each imported plugin is registered with pluggy under the rope_type it was asked for."""
    registry.scheme("llama3")
    manager = registry._manager
    assert manager.get_plugin("llama3") is sys.modules["ropekit.plugins.llama3"]
    blocked = Registry(block=["yarn"], read_env=False)
    assert blocked._manager.is_blocked("yarn")


def test_allow_list_pins_who_may_serve(make_dist: MakeDist, monkeypatch: pytest.MonkeyPatch) -> None:
    make_dist("ropekit-halve", {"halve": "halve_plugin"}, {"halve_plugin": plugin_source("halve")})
    pinned = Registry(allow=["ropekit"], read_env=False)
    with pytest.raises(ropekit.PluginBlockedError, match="not in the allow-list"):
        ropekit.load(CONFIG, registry=pinned)
    assert "halve_plugin" not in sys.modules  # refused before any of its code ran
    assert ropekit.load({"head_dim": 64}, registry=pinned).table.rope_type == "default"
    assert ropekit.load(CONFIG, registry=Registry(allow=["ropekit", "ropekit-halve"], read_env=False)).table
    monkeypatch.setenv("ROPEKIT_ALLOW", "ropekit")
    with pytest.raises(ropekit.PluginBlockedError):
        Registry().scheme("halve")


def test_a_chatty_plugin_cannot_corrupt_json_output(make_dist: MakeDist, tmp_path: Any) -> None:
    import json
    import subprocess

    source = "print('hello from import')\n" + plugin_source("halve").replace(
        "def build(params, geometry, seq_len):", "def build(params, geometry, seq_len):\n    print('hello from build')")
    site = make_dist("ropekit-chatty", {"halve": "chatty_plugin"}, {"chatty_plugin": source}).parent
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    env = {**__import__("os").environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-m", "ropekit", "table", str(config), "--json"], capture_output=True,
                            text=True, env=env, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["layers"]["full_attention"]["rope_type"] == "halve"
    assert "hello from import" in result.stderr and "hello from build" in result.stderr


def test_in_process_registration_may_name_its_distribution(registry: Registry) -> None:
    import ropekit.plugins.linear as linear

    registry.register(linear, name="linear_again", distribution="my-notebook")
    with pytest.raises(ropekit.SchemeMismatchError, match="my-notebook"):  # the module's scheme is 'linear'
        registry.scheme("linear_again")


def test_export_refuses_an_unsupported_dtype_by_name(tmp_path: Any) -> None:
    from ropekit.tools.export import export

    with pytest.raises(ropekit.ArgumentError, match="dtype"):
        export(ropekit.load({"head_dim": 8}), tmp_path / "out", positions=4, dtype="bfloat16")
