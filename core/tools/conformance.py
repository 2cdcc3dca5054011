"""Conformance checks for rope_type plugins, usable from any project's CI.

Plain functions, one per contract clause; each raises ``AssertionError`` naming the rope_type
and the check (``[ntk_alpha] examples: ...``)::

    from ropekit.testing import run_checks
    for result in run_checks("ntk_alpha"):
        print(result.check, result.passed, result.message)

For pytest (opt-in; nothing auto-loads into other test sessions), one line in a test module
parametrizes every check per rope_type with ids ``<rope_type>-<check>``::

    from ropekit.testing import conformance_suite
    test_conformance = conformance_suite("ntk_alpha", expected_failures={"seq_len_thresholds": "why"})

The same checks run from the shell: ``ropekit check-plugin NAME [--json]``. A model-family plugin
(entry-point group ``ropekit.families``) is checked by :func:`check_family`, or
``ropekit check-plugin --family MODEL_TYPE``.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..config.classes import class_facts
from ..config.families import REMOTE_FAMILIES
from ..config.parse import parse_config
from ..contract.scheme import Example, Key, Scheme
from ..errors import NoRopeError, PluginError, RopeConfigError, RopekitError
from ..host.registry import Registry, default_registry
from ..loader import load, plugin_family
from ..tables.table import RopeTable

__all__ = [
    "CHECKS",
    "CheckNotRun",
    "CheckResult",
    "check_declaration",
    "check_entry_point",
    "check_examples",
    "check_extreme_values",
    "check_family",
    "check_minimal_configs",
    "check_no_mutation",
    "check_rejects_bad_input",
    "check_seq_len_thresholds",
    "check_table_properties",
    "conformance_suite",
    "installed_rope_types",
    "run_checks",
]

RTOL = 2e-6
"""Examples are compared at this relative tolerance (float32 references against float64 tables)."""

UNKNOWN_KEY = "ropekit_conformance_unknown_key"


class CheckNotRun(Exception):  # noqa: N818 - a signal like pytest's Skipped, not an error
    """Raised by a check that has nothing to check (``examples`` of a scheme that declares none).

    Not a failure, and not a pass: :func:`run_checks` records it as ``not_run``, the pytest helper
    as a skip, ``ropekit check-plugin`` as ``NOT RUN``.
    """


@attrs.frozen
class CheckResult:
    """The outcome of one check on one rope_type: ``passed``, or ``not_run`` (with the reason in
    ``message``), or neither (failed, the message says why)."""

    rope_type: str
    check: str
    passed: bool
    message: str = ""
    not_run: bool = False

    @property
    def status(self) -> str:
        """``pass``, ``fail`` or ``not_run``."""
        return "not_run" if self.not_run else "pass" if self.passed else "fail"

    @property
    def failed(self) -> bool:
        """Whether the check ran and failed."""
        return not self.passed and not self.not_run

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (``ropekit check-plugin --json``)."""
        return {"check": self.check, "passed": self.passed, "status": self.status, "message": self.message}


def _fail(rope_type: str, check: str, problem: str) -> AssertionError:
    return AssertionError(f"[{rope_type}] {check}: {problem}")


def _scheme(rope_type: str, check: str, registry: Registry) -> Scheme:
    try:
        return registry.scheme(rope_type)
    except RopekitError as error:
        raise _fail(rope_type, check, f"the plugin does not load: {error}") from error


def _table(example: Example, registry: Registry, rope_type: str, check: str) -> RopeTable:
    try:
        model = load(example.config, registry=registry)
        table = model.rotating_table(example.layer_type)
        return table.at(example.seq_len) if example.seq_len is not None else table
    except (RopekitError, KeyError) as error:
        advice = (" (no examples are declared, so the suite synthesized this config from the keys' ranges; "
                  "declare an Example whose config loads)") if not example.inv_freq else ""
        raise _fail(rope_type, check, f"example {example.name!r} does not load: {error}{advice}") from error


def _probe_value(key: Key) -> Any:
    """A valid value for ``key``: its default, else 1 (or 4096 for ints) moved inside its range."""
    if key.default is not None:
        return key.default
    if key.kind == "bool":
        return True
    value = 4096.0 if key.kind in ("int", "int_list") else 1.0
    if key.ge is not None:
        value = max(value, key.ge)
    if key.gt is not None and value <= key.gt:
        value = key.gt + 1.0
    if key.le is not None:
        value = min(value, key.le)
    if key.lt is not None and value >= key.lt:
        value = key.lt - 1.0 if key.gt is None or key.lt - 1.0 > key.gt else (key.lt + (key.gt or 0.0)) / 2
    return int(value) if key.kind in ("int", "int_list") else value


def _probes(scheme: Scheme) -> tuple[Example, ...]:
    """The scheme's examples; without any, one synthesized config (no expected values) that
    sets every required key to a value inside its declared range."""
    if scheme.examples:
        return scheme.examples
    block: dict[str, Any] = {"rope_type": scheme.name}
    for key in scheme.keys:
        if key.required:
            value = _probe_value(key)
            block[key.name] = [value] * 32 if key.kind.endswith("_list") else value
    config = {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 8192, "rope_scaling": block}
    return (Example("synthesized", config, ()),)


def installed_rope_types(registry: Registry | None = None) -> tuple[str, ...]:
    """Every rope_type registered in the entry-point group (aliases included)."""
    return (registry or default_registry()).names()


def check_entry_point(rope_type: str, *, registry: Registry | None = None) -> None:
    """The entry point exists, is unique, imports, returns a Scheme of that name, and every
    declared alias is registered too (otherwise configs using the alias cannot find it)."""
    registry = registry or default_registry()
    check = "entry_point"
    claims = registry.claims().get(rope_type)
    if not claims:
        raise _fail(rope_type, check, "no entry point of that name in the 'ropekit.schemes' group")
    if len(claims) > 1:
        owners = ", ".join(claim.distribution for claim in claims)
        raise _fail(rope_type, check, f"claimed by {len(claims)} distributions: {owners}")
    scheme = _scheme(rope_type, check, registry)
    names = registry.names()
    missing = [alias for alias in scheme.aliases if alias not in names]
    if missing:
        raise _fail(rope_type, check, f"aliases {missing} are declared but not registered as entry points")


def check_declaration(rope_type: str, *, registry: Registry | None = None) -> None:
    """Doc strings present, key names are identifiers with docs and coherent ranges, and
    seq-len-dependent schemes state their rule and switch point."""
    registry = registry or default_registry()
    check = "declaration"
    scheme = _scheme(rope_type, check, registry)
    problems = []
    if not scheme.doc.strip():
        problems.append("the scheme has no doc")
    for key in scheme.keys:
        if not key.name.isidentifier():
            problems.append(f"key {key.name!r} is not an identifier")
        if not key.doc.strip():
            problems.append(f"key {key.name!r} has no doc")
        if key.per_pair and not key.kind.endswith("_list"):
            problems.append(f"key {key.name!r} is per_pair but of kind {key.kind}")
        lower = [b for b in (key.gt, key.ge) if b is not None]
        upper = [b for b in (key.lt, key.le) if b is not None]
        if lower and upper and max(lower) > min(upper):
            problems.append(f"key {key.name!r} has an empty range ({key.range_text()})")
    if scheme.seq_len_dependent and not scheme.seq_len_rule.strip():
        problems.append("seq_len_dependent but seq_len_rule is empty")
    if not scheme.seq_len_dependent and scheme.switch_at is not None:
        problems.append("switch_at is declared but seq_len_dependent is false")
    if problems:
        raise _fail(rope_type, check, "; ".join(problems))


def check_examples(rope_type: str, *, registry: Registry | None = None) -> None:
    """Every declared example loads through ``ropekit.load`` and yields its declared values.

    A scheme with no examples is not run (:class:`CheckNotRun`): the other checks then use a config
    synthesized from its keys, but only examples prove the numbers."""
    registry = registry or default_registry()
    check = "examples"
    scheme = _scheme(rope_type, check, registry)
    if not scheme.examples:
        raise CheckNotRun(f"[{rope_type}] {check}: no examples declared, so nothing proves the numbers "
                          "(add Example(...) values from a reference implementation)")
    for example in scheme.examples:
        table = _table(example, registry, rope_type, check)
        if table.rope_type != scheme.name:
            raise _fail(rope_type, check, f"example {example.name!r} is served by {table.rope_type!r}")
        want = np.asarray(example.inv_freq, dtype=np.float64)
        if table.inv_freq.shape != want.shape:
            problem = f"example {example.name!r}: {len(table.inv_freq)} pairs, declared {len(want)}"
            raise _fail(rope_type, check, problem)
        if not np.allclose(table.inv_freq, want, rtol=RTOL, atol=0.0):
            worst = int(np.argmax(np.abs(table.inv_freq - want) / np.maximum(np.abs(want), 1e-300)))
            raise _fail(rope_type, check, f"example {example.name!r}: inv_freq[{worst}] = "
                        f"{float(table.inv_freq[worst])!r}, declared {float(want[worst])!r}")
        if not math.isclose(table.attention_factor, example.attention_factor, rel_tol=RTOL):
            raise _fail(rope_type, check, f"example {example.name!r}: attention_factor "
                        f"{table.attention_factor!r}, declared {example.attention_factor!r}")


def _table_problems(table: RopeTable, scheme: Scheme) -> Iterator[str]:
    freq = table.inv_freq
    if not isinstance(freq, np.ndarray) or freq.dtype != np.float64:
        yield f"inv_freq is not float64 ({getattr(freq, 'dtype', type(freq))})"
        return
    if freq.shape != (scheme.table_length(table.geometry),):
        yield f"inv_freq has shape {freq.shape}, expected ({scheme.table_length(table.geometry)},)"
    if not np.all(np.isfinite(freq)):
        yield "inv_freq has non-finite values"
    if np.any(freq < 0) or (not scheme.covers_head and np.any(freq == 0)):
        yield "inv_freq has negative (or, for a non-covers_head scheme, zero) values"
    if freq.flags.writeable:
        yield "inv_freq is writeable"
    if not (math.isfinite(table.attention_factor) and table.attention_factor > 0):
        yield f"attention_factor {table.attention_factor!r} is not finite and positive"


def check_table_properties(rope_type: str, *, registry: Registry | None = None) -> None:
    """Tables are float64, the right length, finite, non-negative, read-only and deterministic
    (two loads, and two builds, agree bit for bit)."""
    registry = registry or default_registry()
    check = "table_properties"
    scheme = _scheme(rope_type, check, registry)
    for example in _probes(scheme):
        first = _table(example, registry, rope_type, check)
        problems = list(_table_problems(first, scheme))
        second = _table(example, registry, rope_type, check)
        if not np.array_equal(first.inv_freq, second.inv_freq) or first.attention_factor != second.attention_factor:
            problems.append("two loads of the same config differ")
        if problems:
            raise _fail(rope_type, check, f"example {example.name!r}: " + "; ".join(problems))


def check_no_mutation(rope_type: str, *, registry: Registry | None = None) -> None:
    """Loading (and asking for a seq-len table) never changes the caller's config."""
    registry = registry or default_registry()
    check = "no_mutation"
    scheme = _scheme(rope_type, check, registry)
    for example in _probes(scheme):
        config = copy.deepcopy(dict(example.config))
        before = copy.deepcopy(config)
        try:
            model = load(config, registry=registry)
            model.at(example.seq_len or 1)
        except RopekitError as error:
            raise _fail(rope_type, check, f"example {example.name!r} does not load: {error}") from error
        if config != before:
            raise _fail(rope_type, check, f"loading example {example.name!r} mutated the caller's config")


def _block_location(config: Mapping[str, Any], layer_type: str) -> list[str] | None:
    for block in parse_config(config).blocks:
        if block.layer_type == layer_type and block.path:
            return block.path.split(".")
    return None


def _with_block_change(
    config: Mapping[str, Any], where: list[str], rope_type: str, key: str, value: Any
) -> dict[str, Any]:
    changed = copy.deepcopy(dict(config))
    target: Any = changed
    for part in where:
        if target.get(part) is None:
            target[part] = {}
        target = target[part]
    if "rope_type" not in target and "type" not in target:
        target["rope_type"] = rope_type  # an empty block means default; name the scheme under test
    if value is _DROP:
        target.pop(key, None)
    else:
        target[key] = value
    return changed


_DROP = object()


def _bad_values(kind: str) -> list[tuple[str, Any]]:
    if kind == "bool":
        return [("a wrong type", "yes"), ("a number", 1)]
    if kind == "float":
        return [("a wrong type", "1.0"), ("a bool", True), ("NaN", float("nan")), ("infinity", float("inf"))]
    if kind == "int":
        return [("a wrong type", "8"), ("a bool", True), ("a fraction", 0.5)]
    if kind == "float_list":
        return [("a wrong type", "1.0"), ("a list holding NaN", [float("nan")])]
    return [("a wrong type", "1"), ("a list holding a string", ["1"])]


def _first_example(rope_type: str, check: str, registry: Registry) -> tuple[Scheme, Example, list[str]]:
    """The scheme, its first example (or probe) and the JSON path of its rope block, to vary."""
    scheme = _scheme(rope_type, check, registry)
    example = _probes(scheme)[0]
    where = _block_location(example.config, example.layer_type)
    if where is None:
        raise _fail(rope_type, check, f"example {example.name!r} has no rope block for {example.layer_type!r}")
    return scheme, example, where


def check_rejects_bad_input(rope_type: str, *, registry: Registry | None = None) -> None:
    """Dropping each required key, adding an unknown key, a wrong type, a bool for a number and
    NaN each raise RopeConfigError whose path names the key."""
    registry = registry or default_registry()
    check = "rejects_bad_input"
    scheme, example, where = _first_example(rope_type, check, registry)
    cases: list[tuple[str, str, Any]] = [(UNKNOWN_KEY, "an unknown key", 1.0)]
    for key in scheme.keys:
        if key.required and key.config_fallback is None and not key.default_from_max_positions:
            cases.append((key.name, "the required key dropped", _DROP))
        cases.extend((key.name, what, value) for what, value in _bad_values(key.kind))
    for name, what, value in cases:
        config = _with_block_change(example.config, where, rope_type, name, value)
        try:
            load(config, registry=registry)
        except RopeConfigError as error:
            if name not in error.path:
                raise _fail(rope_type, check, f"{what} ({name}) raised an error naming {error.path!r}, "
                            f"not the key: {error}") from error
            continue
        except Exception as error:
            raise _fail(rope_type, check, f"{what} ({name}) raised {type(error).__name__}, "
                        f"not RopeConfigError: {error}") from error
        raise _fail(rope_type, check, f"{what} ({name}={value!r}) was accepted")


def _extremes(key: Key, pairs: int) -> list[Any]:
    """Valid values at the edges of ``key``'s range (or far out, where it is unbounded); a list
    key gets lists of ``pairs`` such values."""
    if key.kind == "bool":
        return []
    low = key.ge if key.ge is not None else (key.gt * (1 + 1e-9) + 1e-12 if key.gt is not None else -1e12)
    high = key.le if key.le is not None else (key.lt * (1 - 1e-9) if key.lt is not None else 1e12)
    values: list[Any] = [low, high]
    if key.kind in ("int", "int_list"):
        values = [math.ceil(low) if abs(low) < 1e18 else -(10**18), int(high) if high < 1e18 else 10**18]
    return [[value] * pairs for value in values] if key.kind.endswith("_list") else values


def check_extreme_values(rope_type: str, *, registry: Registry | None = None) -> None:
    """Every value a key declares valid (the edges of its range; 1e12 and 1e-12 beyond where it is
    unbounded) either gives a valid table or a RopeConfigError: never NaN, infinities, zeros or a
    raising builder, which users would see as this plugin's fault. Declare bounds (``ge``/``le``)
    to refuse values the scheme cannot serve."""
    registry = registry or default_registry()
    check = "extreme_values"
    scheme, example, where = _first_example(rope_type, check, registry)
    pairs = len(_table(example, registry, rope_type, check).inv_freq)
    for key in scheme.keys:
        for value in _extremes(key, pairs):
            config = _with_block_change(example.config, where, rope_type, key.name, value)
            try:
                table = load(config, registry=registry).rotating_table(example.layer_type)
                lengths = ((table.switch_at or 0) + 1, 1 << 20) if table.seq_len_dependent else ()
                tables = [table, *(table.at(length) for length in lengths)]
            except RopeConfigError:
                continue
            except RopekitError as error:
                raise _fail(rope_type, check, f"{key.name}={value!r} is declared valid but fails: {error}") from error
            for candidate in tables:
                problems = list(_table_problems(candidate, scheme))
                if problems:
                    raise _fail(rope_type, check, f"{key.name}={value!r} is declared valid but gives: "
                                + "; ".join(problems))


def check_seq_len_thresholds(rope_type: str, *, registry: Registry | None = None) -> None:
    """Up to ``switch_at`` the table is the load-time table; past it, tables are valid and
    deterministic. Schemes independent of seq_len give the same table at every length."""
    registry = registry or default_registry()
    check = "seq_len_thresholds"
    scheme = _scheme(rope_type, check, registry)
    for example in _probes(scheme):
        if example.seq_len is not None:
            continue
        table = _table(example, registry, rope_type, check)
        if not scheme.seq_len_dependent:
            for length in (1, 4096, 1 << 20):
                if not np.array_equal(table.at(length).inv_freq, table.inv_freq):
                    raise _fail(rope_type, check, f"not seq_len_dependent, yet the table at {length} differs")
            continue
        threshold = table.switch_at
        if threshold is None or threshold < 1:
            raise _fail(rope_type, check, f"switch_at is {threshold!r} for example {example.name!r}")
        for length in sorted({1, max(threshold // 2, 1), threshold}):
            if not np.array_equal(table.at(length).inv_freq, table.inv_freq):
                raise _fail(rope_type, check, f"the table at seq_len {length} <= switch_at {threshold} "
                            "differs from the load-time table")
        for length in (threshold + 1, 2 * threshold):
            try:
                beyond, again = table.at(length), table.at(length)
            except RopekitError as error:
                raise _fail(rope_type, check, f"the table at seq_len {length} fails: {error}") from error
            problems = list(_table_problems(beyond, scheme))
            if not np.array_equal(beyond.inv_freq, again.inv_freq):
                problems.append("not deterministic")
            if problems:
                raise _fail(rope_type, check, f"at seq_len {length}: " + "; ".join(problems))


def _minimal_variants(config: Mapping[str, Any], where: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The config shapes real models have that a probe with every key set never exercises."""
    bare = copy.deepcopy(dict(config))
    for key in ("max_position_embeddings", "original_max_position_embeddings"):
        bare.pop(key, None)
    yield "no max_position_embeddings", bare
    partial = copy.deepcopy(dict(config))
    partial["partial_rotary_factor"] = 0.5
    yield "partial_rotary_factor 0.5", partial
    block: Any = config
    for part in where:
        block = block.get(part, {}) if isinstance(block, Mapping) else {}
    if where and where[0] in ("rope_scaling", "rope_parameters") and len(where) == 1 and isinstance(block, Mapping):
        nested = copy.deepcopy(dict(config))
        nested.pop(where[0], None)
        nested["rope_parameters"] = {"full_attention": copy.deepcopy(dict(block)),
                                     "sliding_attention": {"rope_type": "default"}}
        nested["layer_types"] = ["sliding_attention", "full_attention"]
        nested["num_hidden_layers"] = 2
        yield "nested per layer type", nested


def check_minimal_configs(rope_type: str, *, registry: Registry | None = None) -> None:
    """Configs as real models write them (no max_position_embeddings, partial rotary, parameters
    nested per layer type) give a valid table or a RopeConfigError naming a key: never an exception
    from the plugin's own code (its ``check``, ``switch_at``, ``landmarks`` or builder)."""
    registry = registry or default_registry()
    check = "minimal_configs"
    scheme, example, where = _first_example(rope_type, check, registry)
    for what, config in _minimal_variants(example.config, where):
        try:
            with warnings.catch_warnings():  # ropekit's notes on a config (a key its class ignores) are not failures
                warnings.simplefilter("ignore")
                model = load(config, registry=registry)
            for table in model.tables.values():
                if table.rope_type != scheme.name:
                    continue
                lengths = ((table.switch_at or 0) + 1,) if table.seq_len_dependent else ()
                for candidate in (table, *(table.at(length) for length in lengths)):
                    problems = list(_table_problems(candidate, scheme))
                    if problems:
                        raise _fail(rope_type, check, f"with {what}: " + "; ".join(problems))
        except RopeConfigError:
            continue
        except RopekitError as error:
            raise _fail(rope_type, check, f"with {what}, the plugin fails instead of refusing the config: "
                        f"{error}") from error


CheckFunction = Callable[..., None]

_CHECK_FUNCTIONS: dict[str, CheckFunction] = {
    "entry_point": check_entry_point,
    "declaration": check_declaration,
    "examples": check_examples,
    "table_properties": check_table_properties,
    "no_mutation": check_no_mutation,
    "rejects_bad_input": check_rejects_bad_input,
    "extreme_values": check_extreme_values,
    "minimal_configs": check_minimal_configs,
    "seq_len_thresholds": check_seq_len_thresholds,
}
CHECKS: tuple[str, ...] = tuple(_CHECK_FUNCTIONS)
"""The check names, in the order they run."""


def run_checks(
    rope_type: str, *, registry: Registry | None = None, checks: Sequence[str] = CHECKS
) -> list[CheckResult]:
    """Run ``checks`` on ``rope_type``; every check runs even when an earlier one fails, except when the
    plugin does not load at all: the first check reports why, once, and the others are ``not_run``.

    A plugin passes when no result ``failed`` (a check ``not_run`` is reported, not failed)."""
    results: list[CheckResult] = []
    loads = _loads(rope_type, registry or default_registry())
    for name in checks:
        if not loads and any(result.failed for result in results):
            first = next(result.check for result in results if result.failed)
            results.append(CheckResult(rope_type, name, False, f"not run: the plugin does not load ({first} says why)",
                                       not_run=True))
            continue
        try:
            _CHECK_FUNCTIONS[name](rope_type, registry=registry)
        except CheckNotRun as reason:
            results.append(CheckResult(rope_type, name, False, str(reason), not_run=True))
        except AssertionError as failure:
            results.append(CheckResult(rope_type, name, False, str(failure)))
        except PluginError as error:  # a plugin fault surfacing past a check's own handling
            results.append(CheckResult(rope_type, name, False, f"[{rope_type}] {name}: {error}"))
        else:
            results.append(CheckResult(rope_type, name, True))
    return results


def _loads(rope_type: str, registry: Registry) -> bool:
    """Whether ``rope_type``'s plugin loads (its scheme is served): every check needs it to."""
    try:
        registry.scheme(rope_type)
    except RopekitError:
        return False
    return True


def conformance_suite(
    *rope_types: str,
    expected_failures: Mapping[str, str] | None = None,
    registry: Registry | None = None,
) -> Callable[..., None]:
    """A pytest test function running every check for each rope_type (default: all installed).

    Assign it in a test module: ``test_conformance = conformance_suite("my_type")``. Test ids are
    ``<rope_type>-<check>``. ``expected_failures`` maps ``"<rope_type>-<check>"`` or ``"<check>"``
    to a reason; those become strict xfails (they must fail, with an AssertionError).
    """
    import pytest

    names = rope_types or installed_rope_types(registry)
    reasons = dict(expected_failures or {})
    unknown = [k for k in reasons if k not in CHECKS and k.rpartition("-")[2] not in CHECKS]
    if unknown:
        raise ValueError(f"expected_failures names unknown checks {unknown}; checks are {list(CHECKS)}")
    params = []
    for name in names:
        for check in CHECKS:
            reason = reasons.get(f"{name}-{check}") or reasons.get(check)
            marks = [pytest.mark.xfail(reason=reason, strict=True, raises=AssertionError)] if reason else []
            params.append(pytest.param(name, check, id=f"{name}-{check}", marks=marks))

    @pytest.mark.parametrize(("rope_type", "check"), params)
    def test_conformance(rope_type: str, check: str) -> None:
        try:
            _CHECK_FUNCTIONS[check](rope_type, registry=registry)
        except CheckNotRun as reason:
            pytest.skip(str(reason))

    return test_conformance


def check_family(model_type: str, *, registry: Registry | None = None) -> list[str]:
    """Check the family plugin registered for ``model_type`` (group ``ropekit.families``): it is
    found, unique and importable; its declaration is for ``model_type``, names only config keys
    ropekit reads, and is for a model_type ropekit does not already know (else it would never be
    used); each example loads to its table at rtol 2e-6, and a family declaring ``no_rope`` is
    refused by name. Returns what was checked; raises ``AssertionError`` naming the family.
    """
    registry = registry or default_registry()
    done: list[str] = []

    def fail(problem: str) -> AssertionError:
        return AssertionError(f"[family {model_type}] {problem}")

    try:
        family = plugin_family(registry, model_type)
    except PluginError as error:
        raise fail(str(error)) from None
    if family is None:
        raise fail(f"no installed distribution registers it in the {registry.families.group!r} entry-point group")
    done.append("entry_point")
    facts = class_facts(model_type)
    if model_type in REMOTE_FAMILIES or (facts is not None and facts.kind != "unreadable"):
        raise fail("ropekit already knows this model_type's code, so the declaration would never be used")
    done.append("declaration")
    if family.no_rope:
        try:
            load({"model_type": model_type, "head_dim": 8}, registry=registry)
        except NoRopeError:
            done.append("no_rope")
        else:
            raise fail("declares no_rope, yet a config of it loaded a table")
    for example in family.examples:
        stated, named = example.config.get("model_type"), example.config.get("architectures")
        by_class = stated is None and isinstance(named, list) and any(name in family.architectures for name in named)
        if stated != model_type and not by_class:
            raise fail(f"example {example.name!r} states model_type {stated!r} (state {model_type!r}, or no "
                       "model_type and one of the family's architectures)")
        try:
            table = load(example.config, registry=registry).rotating_table(example.layer_type)
        except RopekitError as error:
            raise fail(f"example {example.name!r} does not load: {error}") from None
        expected = np.asarray(example.inv_freq, dtype=np.float64)
        if table.inv_freq.shape != expected.shape or not np.allclose(table.inv_freq, expected, rtol=RTOL, atol=0):
            raise fail(f"example {example.name!r}: inv_freq {table.inv_freq.tolist()} != expected {expected.tolist()}")
        done.append(f"example:{example.name}")
    return done
