"""The pluggy host: finds one plugin per rope_type, imports it only when asked, and checks what it returns."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import pluggy

from . import hookspecs
from .discovery import ENTRY_POINT_GROUP, PluginInfo, blocked_from_env, discover
from .errors import (
    DuplicateSchemeError,
    InvalidTableError,
    PluginBlockedError,
    PluginError,
    PluginLoadError,
    SchemeDeclarationError,
    SchemeMismatchError,
    UnknownRopeTypeError,
)
from .scheme import Frequencies, Geometry, Params, Scheme
from .validation import LOADER_KEYS, check_value

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["IN_PROCESS", "Registry", "SchemeStatus", "default_registry"]

IN_PROCESS = "<in-process>"
"""The distribution name recorded for plugins given to :meth:`Registry.register`."""

_HOOK = "ropekit_scheme"


@attrs.frozen
class SchemeStatus:
    """What ``ropekit list`` shows for one rope_type, known without importing its plugin.

    ``state`` is ``available``, ``loaded``, ``blocked``, ``conflict`` or ``broken``; ``problem``
    says why for the last three.
    """

    rope_type: str
    target: str
    distribution: str
    version: str
    state: str
    problem: str = ""


class Registry:
    """Discovers rope_type plugins and serves their schemes.

    Entry points are read once, on first use; a plugin module is imported the first time its
    rope_type is asked for, and the result (or the error) is cached. Safe to share between threads.

    ``block`` names rope_types or distributions that must not be loaded; unless ``read_env`` is
    false, ``$ROPEKIT_BLOCK`` adds to it.
    """

    def __init__(
        self, *, block: Iterable[str] = (), read_env: bool = True, group: str = ENTRY_POINT_GROUP
    ) -> None:
        self._group = group
        self._blocked = frozenset(block) | (blocked_from_env() if read_env else frozenset())
        self._lock = threading.RLock()
        self._claims: dict[str, tuple[PluginInfo, ...]] | None = None
        self._local: dict[str, tuple[object, PluginInfo]] = {}
        self._schemes: dict[str, Scheme] = {}
        self._owners: dict[str, PluginInfo] = {}  # scheme name -> who serves it, for build()'s errors
        self._failures: dict[str, PluginError] = {}
        self._manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._manager.add_hookspecs(hookspecs)

    # -- discovery (no imports) -------------------------------------------------------------

    def claims(self) -> Mapping[str, tuple[PluginInfo, ...]]:
        """Every rope_type with the plugins claiming it (two or more: a conflict)."""
        with self._lock:
            if self._claims is None:
                self._claims = discover(self._group)
            merged = dict(self._claims)
            for name, (_, info) in self._local.items():
                merged[name] = (*merged.get(name, ()), info)
            return MappingProxyType(dict(sorted(merged.items())))

    def names(self) -> tuple[str, ...]:
        """Every registered rope_type (aliases included), sorted."""
        return tuple(self.claims())

    def status(self) -> tuple[SchemeStatus, ...]:
        """One :class:`SchemeStatus` per rope_type, without importing any plugin."""
        rows = []
        for rope_type, claims in self.claims().items():
            first = claims[0]
            state, problem = "available", ""
            blocked = self._block_reason(first)
            if len(claims) > 1:
                state, problem = "conflict", _duplicate_text(claims)
                first = attrs.evolve(first, distribution=", ".join(c.distribution for c in claims))
            elif blocked:
                state, problem = "blocked", blocked
            elif rope_type in self._failures:
                state, problem = "broken", self._failures[rope_type].problem
            elif rope_type in self._schemes:
                state = "loaded"
            rows.append(SchemeStatus(rope_type, first.target, first.distribution, first.version, state, problem))
        return tuple(rows)

    # -- loading ----------------------------------------------------------------------------

    def register(self, plugin: object, *, name: str, distribution: str = IN_PROCESS, version: str = "") -> None:
        """Serve ``name`` from ``plugin`` (a module or object with a ``ropekit_scheme`` hookimpl).

        For schemes defined in-process (notebooks, tests); packages use the entry-point group.
        """
        with self._lock:
            self._local[name] = (plugin, PluginInfo(name, repr(plugin), distribution, version))
            self._schemes.pop(name, None)
            self._owners.pop(name, None)
            self._failures.pop(name, None)

    def scheme(self, rope_type: str, *, path: str = "rope_type") -> Scheme:
        """The scheme serving ``rope_type`` (an alias resolves to its scheme).

        Raises :class:`UnknownRopeTypeError` (at JSON ``path``) when nothing serves it, or a
        :class:`PluginError` naming the distribution at fault.
        """
        cached = self._schemes.get(rope_type)
        if cached is not None:
            return cached
        with self._lock:
            if rope_type in self._schemes:
                return self._schemes[rope_type]
            if rope_type in self._failures:
                raise self._failures[rope_type]
            claims = self.claims().get(rope_type)
            if not claims:
                raise self._unknown(rope_type, path)
            try:
                scheme = self._load(rope_type, claims)
            except PluginError as error:
                if not isinstance(error, PluginBlockedError):
                    self._failures[rope_type] = error
                raise
            self._schemes[rope_type] = scheme
            self._owners.setdefault(scheme.name, claims[0])
            return scheme

    def build(self, scheme: Scheme, params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
        """Run ``scheme``'s builder and check its output; the returned ``inv_freq`` is read-only."""
        info = self._info(scheme.name)
        try:
            result = scheme.build(params, geometry, seq_len)
        except Exception as error:  # a plugin bug: contain it, name the distribution
            raise InvalidTableError(
                scheme.name, info.distribution, f"builder raised {type(error).__name__}: {error}"
            ) from error
        return _checked_frequencies(scheme, geometry, result, info)

    # -- internals --------------------------------------------------------------------------

    def _info(self, rope_type: str) -> PluginInfo:
        owner = self._owners.get(rope_type)
        if owner is not None:
            return owner
        claims = self.claims().get(rope_type)
        return claims[0] if claims else PluginInfo(rope_type, "?", "<unknown distribution>", "?")

    def _block_reason(self, info: PluginInfo) -> str:
        if info.rope_type in self._blocked:
            return f"rope_type {info.rope_type!r} is blocked (ROPEKIT_BLOCK or Registry(block=...))"
        if info.distribution in self._blocked:
            return f"distribution {info.distribution} is blocked (ROPEKIT_BLOCK or Registry(block=...))"
        return ""

    def _unknown(self, rope_type: str, path: str) -> UnknownRopeTypeError:
        import difflib

        names = self.names()
        close = difflib.get_close_matches(rope_type, names, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        problem = (
            f"unknown rope_type {rope_type!r}{hint or '.'} Registered: {', '.join(names) or 'none'}. "
            f"If a package provides it, install it (it registers in the {self._group!r} entry-point group)."
        )
        return UnknownRopeTypeError(path, rope_type, problem)

    def _load(self, rope_type: str, claims: tuple[PluginInfo, ...]) -> Scheme:
        if len(claims) > 1:
            raise DuplicateSchemeError(rope_type, claims[0].distribution, _duplicate_text(claims))
        info = claims[0]
        blocked = self._block_reason(info)
        if blocked:
            raise PluginBlockedError(rope_type, info.distribution, blocked)
        plugin = self._local[rope_type][0] if info.distribution == IN_PROCESS else self._import(info)
        scheme = self._call_hook(plugin, info)
        if rope_type != scheme.name and rope_type not in scheme.aliases:
            raise SchemeMismatchError(
                rope_type,
                info.distribution,
                f"entry point {rope_type!r} returned a scheme named {scheme.name!r} "
                f"(aliases {list(scheme.aliases)}); the entry-point name must be the scheme's name or an alias",
            )
        _check_declaration(scheme, info)
        return scheme

    def _import(self, info: PluginInfo) -> object:
        module_name, _, attribute = info.target.partition(":")
        try:
            plugin: object = importlib.import_module(module_name)
            for part in filter(None, attribute.split(".")):
                plugin = getattr(plugin, part)
        except Exception as error:  # any import-time failure is the plugin's, not ours
            raise PluginLoadError(
                info.rope_type,
                info.distribution,
                f"importing {info.target!r} failed: {type(error).__name__}: {error}",
            ) from error
        return plugin

    def _call_hook(self, plugin: object, info: PluginInfo) -> Scheme:
        manager = self._manager
        if not manager.is_registered(plugin):
            try:
                manager.register(plugin, name=f"{info.distribution}:{info.rope_type}")
            except (ValueError, pluggy.PluginValidationError) as error:
                if manager.is_registered(plugin):  # pluggy < 1.7 leaves a half-registered plugin
                    manager.unregister(plugin)
                raise PluginLoadError(info.rope_type, info.distribution, f"invalid hook: {error}") from error
        others = [p for p in manager.get_plugins() if p is not plugin]
        caller = manager.subset_hook_caller(_HOOK, remove_plugins=others)
        if not caller.get_hookimpls():
            raise PluginLoadError(info.rope_type, info.distribution, _missing_hook_text(plugin, info))
        try:
            scheme = caller()
        except Exception as error:
            raise PluginLoadError(
                info.rope_type, info.distribution, f"{_HOOK}() raised {type(error).__name__}: {error}"
            ) from error
        if not isinstance(scheme, Scheme):
            raise PluginLoadError(
                info.rope_type,
                info.distribution,
                f"{_HOOK}() returned {type(scheme).__name__}, expected ropekit.Scheme",
            )
        return scheme


def _duplicate_text(claims: tuple[PluginInfo, ...]) -> str:
    owners = ", ".join(f"{c.distribution} {c.version} ({c.target})" for c in claims)
    return f"claimed by {len(claims)} distributions: {owners}; uninstall or block all but one"


def _missing_hook_text(plugin: object, info: PluginInfo) -> str:
    import difflib

    marked = [
        name
        for name in dir(plugin)
        if getattr(getattr(plugin, name, None), f"{hookspecs.PROJECT_NAME}_impl", None) is not None
    ]
    if marked:
        guess = difflib.get_close_matches(_HOOK, marked, n=1)
        hint = f"; did you mean {_HOOK!r} instead of {guess[0]!r}?" if guess else ""
        return f"{info.target!r} defines hook(s) {marked} but no {_HOOK!r}{hint}"
    return f"{info.target!r} has no @ropekit.hookimpl function named {_HOOK!r}"


def _check_declaration(scheme: Scheme, info: PluginInfo) -> None:
    def fail(problem: str) -> SchemeDeclarationError:
        return SchemeDeclarationError(info.rope_type, info.distribution, problem)

    seen: set[str] = set()
    for key in scheme.keys:
        if key.name in seen:
            raise fail(f"key {key.name!r} is declared twice")
        if key.name in LOADER_KEYS:
            raise fail(f"key {key.name!r} is read by the loader for every scheme; do not declare it")
        seen.add(key.name)
        if key.required and key.default is not None:
            raise fail(f"key {key.name!r} is required and also has a default")
        if key.default is not None:
            try:
                check_value(key, key.default, key.name, None)
            except ValueError as error:
                raise fail(f"default of key {key.name!r} is invalid: {error}") from error
    if scheme.seq_len_dependent and scheme.switch_at is None:
        raise fail("a seq_len_dependent scheme must declare switch_at")


def _checked_frequencies(scheme: Scheme, geometry: Geometry, result: Any, info: PluginInfo) -> Frequencies:
    def fail(problem: str) -> InvalidTableError:
        return InvalidTableError(scheme.name, info.distribution, problem)

    if not isinstance(result, Frequencies):
        raise fail(f"builder returned {type(result).__name__}, expected ropekit.Frequencies")
    inv_freq = result.inv_freq
    if not isinstance(inv_freq, np.ndarray) or inv_freq.dtype != np.float64:
        kind = inv_freq.dtype if isinstance(inv_freq, np.ndarray) else type(inv_freq).__name__
        raise fail(f"inv_freq must be a float64 numpy array, got {kind}")
    expected = scheme.table_length(geometry)
    if inv_freq.shape != (expected,):
        raise fail(f"inv_freq has shape {inv_freq.shape}, expected ({expected},) for {geometry}")
    if not np.all(np.isfinite(inv_freq)):
        raise fail(f"inv_freq has non-finite values at pairs {np.flatnonzero(~np.isfinite(inv_freq)).tolist()}")
    bad = inv_freq < 0 if scheme.covers_head else inv_freq <= 0
    if np.any(bad):
        raise fail(f"inv_freq has {'negative' if scheme.covers_head else 'non-positive'} values at pairs "
                   f"{np.flatnonzero(bad).tolist()}")
    factor = result.attention_factor
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not np.isfinite(factor) or factor <= 0:
        raise fail(f"attention_factor must be a finite positive number, got {factor!r}")
    frozen: npt.NDArray[np.float64] = np.array(inv_freq, dtype=np.float64, copy=True)
    frozen.flags.writeable = False
    return Frequencies(frozen, float(factor))


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry ``ropekit.load`` uses by default (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default
