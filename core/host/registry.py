"""The pluggy host: finds one plugin per rope_type and imports it only when asked.

What pluggy does here: it is the plugin manager. Each plugin module is registered under the
rope_type it was imported for (``get_plugin(rope_type)``), its ``ropekit_scheme`` hookimpl is
validated against the hookspec on registration, and blocked rope_types are pluggy-blocked names.
What it does not do: read entry points. :mod:`ropekit.discovery` reads the ``ropekit.schemes``
group once, from metadata alone, so that listing and choosing plugins imports none of them and
duplicate claims are seen instead of silently skipped.

Running what a plugin returns (its builder and other callables) is :class:`~ropekit.host.loaded.LoadedScheme`'s job.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import pluggy

from ..contract import hookspecs
from ..errors import (
    DeclarationError,
    DuplicateSchemeError,
    PluginBlockedError,
    PluginError,
    PluginLoadError,
    SchemeDeclarationError,
    SchemeMismatchError,
    UnknownRopeTypeError,
)
from .discovery import ENTRY_POINT_GROUP, FAMILY_GROUP, PluginInfo, allowed_from_env, blocked_from_env, discover

if TYPE_CHECKING:
    from ..contract.family import ModelFamily
    from ..contract.scheme import Scheme
    from .loaded import LoadedScheme

__all__ = ["IN_PROCESS", "FamilyRegistry", "Registry", "SchemeStatus", "default_registry"]

IN_PROCESS = "<in-process>"
"""The distribution name recorded for plugins given to :meth:`Registry.register`."""

_HOOK = "ropekit_scheme"


class SchemeStatus(NamedTuple):
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


class _Host:
    """One entry-point group whose plugins each implement one hook returning a declaration: the
    discovery, claims, conflicts, blocking, allow-list, lazy import and hook call every group
    shares. :class:`Registry` serves rope_types from ``ropekit.schemes``; :class:`FamilyRegistry`
    model families from ``ropekit.families``."""

    _hook = _HOOK
    _kind = "rope_type"
    _default_group = ENTRY_POINT_GROUP

    def __init__(
        self,
        *,
        block: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        read_env: bool = True,
        group: str | None = None,
    ) -> None:
        block, allow = tuple(block), None if allow is None else tuple(allow)
        self._settings = (block, allow, read_env)
        self._group = group or self._default_group
        self._blocked = frozenset(block) | (blocked_from_env() if read_env else frozenset())
        self._allowed = frozenset(allow or ()) | (allowed_from_env() if read_env else frozenset())
        self._lock = threading.RLock()
        self._discovered: dict[str, tuple[PluginInfo, ...]] | None = None
        self._local: dict[str, tuple[object, PluginInfo]] = {}
        self._claims: Mapping[str, tuple[PluginInfo, ...]] | None = None  # merged once; register() resets it
        self._loaded: dict[str, Any] = {}
        self._failures: dict[str, PluginError] = {}
        self._manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._manager.add_hookspecs(hookspecs)
        for name in self._blocked:
            self._manager.set_blocked(name)

    @property
    def group(self) -> str:
        """The entry-point group this registry reads."""
        return self._group

    def claims(self) -> Mapping[str, tuple[PluginInfo, ...]]:
        """Every name (rope_type, or a family's model_type) with the plugins claiming it (two or
        more: a conflict), blocked ones included."""
        with self._lock:
            if self._claims is not None:  # every load asks (a model_type's family): merge and sort only after a change
                return self._claims
            if self._discovered is None:
                self._discovered = discover(self._group)
            merged = dict(self._discovered)
            for name, (_, info) in self._local.items():
                merged[name] = (*merged.get(name, ()), info)
            self._claims = MappingProxyType(dict(sorted(merged.items())))
            return self._claims

    def names(self) -> tuple[str, ...]:
        """Every registered name (rope_types with their aliases, or families' model_types), sorted."""
        return tuple(self.claims())

    def owner(self, rope_type: str) -> PluginInfo | None:
        """The one plugin that would serve ``rope_type`` (or family; ``None``: nothing, or a conflict)."""
        candidates = self._candidates(self.claims().get(rope_type, ()))
        return candidates[0] if len(candidates) == 1 else None

    def status(self) -> tuple[SchemeStatus, ...]:
        """One :class:`SchemeStatus` per registered name, without importing any plugin."""
        rows = []
        for rope_type, claims in self.claims().items():
            candidates = self._candidates(claims)
            first = candidates[0] if candidates else claims[0]
            state, problem = "available", ""
            if self._manager.is_blocked(rope_type):
                state, problem = "blocked", self._block_reason(first)
            elif len(candidates) > 1:
                state, problem = "conflict", _duplicate_text(rope_type, candidates)
                first = first._replace(distribution=", ".join(c.distribution for c in candidates))
            elif self._block_reason(first):
                state, problem = "blocked", self._block_reason(first)
            elif rope_type in self._failures:
                state, problem = "broken", self._failures[rope_type].problem
            elif rope_type in self._loaded:
                state = "loaded"
            rows.append(SchemeStatus(rope_type, first.target, first.distribution, first.version, state, problem))
        return tuple(rows)

    # -- loading ----------------------------------------------------------------------------

    def register(self, plugin: object, *, name: str, distribution: str = IN_PROCESS, version: str = "") -> None:
        """Serve ``name`` from ``plugin`` (a module or object with this group's hookimpl:
        ``ropekit_scheme``, or ``ropekit_family`` for a :class:`FamilyRegistry`).

        For schemes defined in-process (notebooks, tests); packages use the entry-point group.
        """
        with self._lock:
            previous = self._manager.get_plugin(name)
            if previous is not None:
                self._manager.unregister(previous)
            self._local[name] = (plugin, PluginInfo(name, repr(plugin), distribution, version))
            self._claims = None
            self._loaded.pop(name, None)
            self._failures.pop(name, None)

    # -- internals --------------------------------------------------------------------------

    def _candidates(self, claims: Iterable[PluginInfo]) -> list[PluginInfo]:
        """The claims left once blocked distributions are set aside (all of them if every one is blocked)."""
        claims = list(claims)
        unblocked = [claim for claim in claims if claim.distribution not in self._blocked]
        return unblocked or claims

    def _block_reason(self, info: PluginInfo) -> str:
        if self._manager.is_blocked(info.rope_type):
            return f"{self._kind} {info.rope_type!r} is blocked (ROPEKIT_BLOCK or Registry(block=...))"
        if info.distribution in self._blocked:
            return f"distribution {info.distribution} is blocked (ROPEKIT_BLOCK or Registry(block=...))"
        if self._allowed and info.distribution not in self._allowed and info.rope_type not in self._allowed:
            return (f"distribution {info.distribution} is not in the allow-list ({', '.join(sorted(self._allowed))}; "
                    "ROPEKIT_ALLOW or Registry(allow=...))")
        return ""

    def _cached(self, name: str, load: Callable[[], Any]) -> Any:
        """``load()``'s result for ``name``, cached; a plugin's error is cached too (a block is not:
        unblocking serves it)."""
        cached = self._loaded.get(name)
        if cached is not None:
            return cached
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            if name in self._failures:
                raise self._failures[name]
            try:
                result = load()
            except PluginError as error:
                if not isinstance(error, PluginBlockedError):
                    self._failures[name] = error
                raise
            self._loaded[name] = result
            return result

    def _declaration(self, name: str, claims: tuple[PluginInfo, ...]) -> tuple[object, PluginInfo]:
        """The declaration the one unblocked plugin claiming ``name`` returns from its hook."""
        candidates = self._candidates(claims)
        kind = self._kind
        if self._manager.is_blocked(name):
            raise PluginBlockedError(name, candidates[0].distribution, self._block_reason(candidates[0]), kind=kind)
        if len(candidates) > 1:
            raise DuplicateSchemeError(name, candidates[0].distribution, _duplicate_text(name, candidates), kind=kind)
        info = candidates[0]
        blocked = self._block_reason(info)
        if blocked:
            raise PluginBlockedError(name, info.distribution, blocked, kind=kind)
        local = self._local.get(name)
        plugin = local[0] if local is not None and local[1] == info else self._import(info)
        return self._call_hook(plugin, info), info

    def _import(self, info: PluginInfo) -> object:
        module_name, _, attribute = info.target.partition(":")
        try:
            plugin: object = importlib.import_module(module_name)
            for part in filter(None, attribute.split(".")):
                plugin = getattr(plugin, part)
        except DeclarationError as error:  # a Key or Scheme built at import time is malformed
            raise SchemeDeclarationError(info.rope_type, info.distribution, str(error), kind=self._kind) from error
        except BaseException as error:  # any import-time failure (SystemExit included) is the plugin's
            if isinstance(error, KeyboardInterrupt):
                raise
            raise PluginLoadError(
                info.rope_type,
                info.distribution,
                f"importing {info.target!r} failed: {type(error).__name__}: {error}",
                kind=self._kind,
            ) from error
        return plugin

    def _call_hook(self, plugin: object, info: PluginInfo) -> object:
        manager, hook, kind = self._manager, self._hook, self._kind
        if not manager.is_registered(plugin):  # an alias may share its module with an imported name
            try:
                manager.register(plugin, name=info.rope_type)
            except (ValueError, pluggy.PluginValidationError) as error:
                if manager.is_registered(plugin):  # pluggy < 1.7 leaves a half-registered plugin
                    manager.unregister(plugin)
                raise PluginLoadError(info.rope_type, info.distribution, f"invalid hook: {error}", kind=kind) from error
        impls = [impl for impl in getattr(manager.hook, hook).get_hookimpls() if impl.plugin is plugin]
        if not impls:
            raise PluginLoadError(info.rope_type, info.distribution, _missing_hook_text(manager, plugin, info, hook),
                                  kind=kind)
        try:
            declaration: object = impls[0].function()
        except DeclarationError as error:
            raise SchemeDeclarationError(info.rope_type, info.distribution, str(error), kind=kind) from error
        except Exception as error:
            raise PluginLoadError(
                info.rope_type, info.distribution, f"{hook}() raised {type(error).__name__}: {error}", kind=kind
            ) from error
        expected = self._declared()
        if not isinstance(declaration, expected):
            raise PluginLoadError(
                info.rope_type,
                info.distribution,
                f"{hook}() returned {type(declaration).__name__}, expected ropekit.{expected.__name__}",
                kind=kind,
            )
        return declaration

    def _declared(self) -> type:
        """The class a plugin's hook must return (imported with the first plugin: listing plugins needs no numpy)."""
        from ..contract.scheme import Scheme

        return Scheme


class Registry(_Host):
    """Discovers rope_type plugins and serves their schemes.

    Entry points are read once, on first use; a plugin module is imported the first time its
    rope_type is asked for, and the result (or the error) is cached. Safe to share between threads.

    ``block`` names rope_types or distributions that must not be loaded; unless ``read_env`` is
    false, ``$ROPEKIT_BLOCK`` adds to it. Blocking a distribution also resolves a conflict: when
    two distributions claim a rope_type, blocking all but one serves the one left.

    ``allow`` (and ``$ROPEKIT_ALLOW``) pins the distributions or rope_types that may serve at all;
    ``"ropekit"`` names the built-ins. Installing a plugin runs its code in this process when its
    rope_type is first used: an allow-list is how a production loader keeps that set fixed.

    :attr:`families` serves the model families plugins declare (``ropekit.families``), under the
    same block and allow rules.
    """

    _families: FamilyRegistry | None = None

    @property
    def families(self) -> FamilyRegistry:
        """The model families installed plugins declare, blocked and allowed as this registry's schemes."""
        with self._lock:
            if self._families is None:
                block, allow, read_env = self._settings
                self._families = FamilyRegistry(block=block, allow=allow, read_env=read_env)
            return self._families

    def scheme(self, rope_type: str, *, path: str = "rope_type") -> Scheme:
        """The scheme serving ``rope_type`` (an alias resolves to its scheme).

        Raises :class:`UnknownRopeTypeError` (at JSON ``path``) when nothing serves it, or a
        :class:`PluginError` naming the distribution at fault.
        """
        return self.loaded(rope_type, path=path).scheme

    def loaded(self, rope_type: str, *, path: str = "rope_type") -> LoadedScheme:
        """Like :meth:`scheme`, with the distribution serving it: what the loader builds tables with."""
        loaded: LoadedScheme = self._cached(rope_type, lambda: self._load(rope_type, path))
        return loaded

    def _load(self, rope_type: str, path: str) -> LoadedScheme:
        from ..contract.scheme import Scheme
        from .loaded import LoadedScheme

        claims = self.claims().get(rope_type)
        if not claims:
            raise self._unknown(rope_type, path)
        declared, info = self._declaration(rope_type, claims)
        assert isinstance(declared, Scheme)
        scheme = declared
        self._check_names(scheme, info)
        blocked_name = next((name for name in (scheme.name, *scheme.aliases) if self._manager.is_blocked(name)), None)
        if blocked_name is not None:  # an alias must not get round a block on its scheme
            raise PluginBlockedError(rope_type, info.distribution, f"rope_type {blocked_name!r}, which "
                                     f"{rope_type!r} names, is blocked (ROPEKIT_BLOCK or Registry(block=...))")
        return LoadedScheme(scheme, info)

    def _unknown(self, rope_type: str, path: str) -> UnknownRopeTypeError:
        names = self.names()
        close = _close_matches(rope_type, names, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        problem = (
            f"unknown rope_type {rope_type!r}{hint or '.'} Registered: {', '.join(names) or 'none'}. "
            f"If a package provides it, install it (it registers in the {self._group!r} entry-point group)."
        )
        return UnknownRopeTypeError(path, rope_type, problem)

    def _check_names(self, scheme: Scheme, info: PluginInfo) -> None:
        """The entry point must be the scheme's name or an alias, and a scheme may claim only
        names that no other distribution serves (built-ins included)."""
        if info.rope_type != scheme.name and info.rope_type not in scheme.aliases:
            raise SchemeMismatchError(
                info.rope_type,
                info.distribution,
                f"entry point {info.rope_type!r} returned a scheme named {scheme.name!r} "
                f"(aliases {list(scheme.aliases)}); the entry-point name must be the scheme's name or an alias",
            )
        claims = self.claims()
        for name in (scheme.name, *scheme.aliases):
            serving = self._candidates(claims.get(name, ()))
            others = sorted({c.distribution for c in serving if c.distribution != info.distribution})
            if others:
                raise SchemeMismatchError(
                    info.rope_type,
                    info.distribution,
                    f"its scheme claims the name {name!r}, which {', '.join(others)} serves; a scheme may use "
                    "only names its own distribution registers as entry points",
                )
        if info.distribution not in {claim.distribution for claim in claims.get(scheme.name, ())}:
            raise SchemeMismatchError(
                info.rope_type,
                info.distribution,
                f"entry point {info.rope_type!r} returned a scheme named {scheme.name!r}, which {info.distribution} "
                f"does not register as an entry point, so {scheme.name!r} itself would be unknown; register it in "
                f"the {self._group!r} group too",
            )


class FamilyRegistry(_Host):
    """Discovers model-family plugins (entry-point group ``ropekit.families``, named by model_type)
    and serves their :class:`~ropekit.ModelFamily` declarations, with :class:`Registry`'s rules:
    read from metadata once, imported when a config names the model_type, conflicts and broken
    plugins reported naming the distribution, ``block``/``allow`` (and their environment
    variables) by model_type or distribution. Get it as ``Registry().families``.
    """

    _hook = "ropekit_family"
    _kind = "model_type"
    def _declared(self) -> type:
        from ..contract.family import ModelFamily  # imported when a family plugin is: a cold table needs none

        return ModelFamily

    _default_group = FAMILY_GROUP

    def family(self, model_type: str) -> ModelFamily | None:
        """The declaration for ``model_type``, or ``None`` when no installed plugin claims it.

        Raises a :class:`~ropekit.PluginError` naming the distribution when the plugin claiming it is
        blocked, conflicts with another, fails to import, or declares something else.
        """
        claims = self.claims().get(model_type)
        if not claims:
            return None
        family: ModelFamily = self._cached(model_type, lambda: self._load(model_type, claims))
        return family

    def by_architecture(self, architectures: Iterable[str]) -> ModelFamily | None:
        """The family whose declaration names one of ``architectures`` (a config's class names), or
        ``None``. Imports every family plugin on first use, so it is asked only for a config that
        states no ``model_type``; a plugin that fails to load is skipped here (it is reported when a
        config names its model_type). Two families naming the same class are a conflict."""
        wanted = [name for name in architectures if isinstance(name, str)]
        found: dict[str, ModelFamily] = {}
        for model_type in self.claims():
            try:
                family = self.family(model_type)
            except PluginError:
                continue
            if family is not None and any(name in family.architectures for name in wanted):
                found[model_type] = family
        if len(found) > 1:
            first = sorted(found)[0]
            owners = ", ".join(f"{name} ({getattr(self.owner(name), 'distribution', '?')})" for name in sorted(found))
            raise DuplicateSchemeError(first, getattr(self.owner(first), "distribution", "?"),
                                       f"the config's architectures {wanted} name classes of the families {owners}, "
                                       "which run different code; state the checkpoint's model_type", kind=self._kind)
        return next(iter(found.values()), None)

    def _load(self, model_type: str, claims: tuple[PluginInfo, ...]) -> ModelFamily:
        found, info = self._declaration(model_type, claims)  # checked against _declared() there
        declared = cast("ModelFamily", found)
        if declared.model_type != model_type:
            raise SchemeMismatchError(model_type, info.distribution, f"entry point {model_type!r} returned a family "
                                      f"declared for model_type {declared.model_type!r}; they must be equal",
                                      kind=self._kind)
        return declared


def _duplicate_text(rope_type: str, claims: Iterable[PluginInfo]) -> str:
    claims = list(claims)
    owners = ", ".join(f"{c.distribution} {c.version} ({c.target})" for c in claims)
    return (f"claimed by {len(claims)} distributions: {owners}; uninstall all but one, or block the others "
            f"by distribution (ROPEKIT_BLOCK={claims[-1].distribution} or Registry(block=[...]))")


def _missing_hook_text(manager: pluggy.PluginManager, plugin: object, info: PluginInfo, hook: str) -> str:
    marked = [name for name in dir(plugin) if manager.parse_hookimpl_opts(plugin, name) is not None]
    if marked:
        guess = _close_matches(hook, marked, n=1)
        hint = f"; did you mean {hook!r} instead of {guess[0]!r}?" if guess else ""
        return f"{info.target!r} defines hook(s) {marked} but no {hook!r}{hint}"
    return f"{info.target!r} has no @ropekit.hookimpl function named {hook!r}"


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry ``ropekit.load`` uses by default (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def _close_matches(word: str, candidates: Any, n: int = 3, cutoff: float = 0.6) -> list[str]:
    import difflib  # only on the error path: it costs a millisecond of every cold start

    return difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)
