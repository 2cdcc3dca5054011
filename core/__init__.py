"""ropekit: the RoPE tables a checkpoint was trained with.

``ropekit.load(config)`` reads a model's ``config.json``, dispatches each layer type's
``rope_type`` to the plugin registered for it (entry-point group ``ropekit.schemes``), validates
the parameters strictly and returns exact float64 tables. An unregistered rope_type raises;
nothing falls back to plain RoPE. See :mod:`ropekit.errors` for the exception tree.

Registry internals (``ropekit.discovery.BLOCK_ENV``, ``PluginInfo``, ``ropekit.registry.SchemeStatus``)
are importable from their submodules.

Only the version and the exceptions are imported with the package; every other public name is
imported on first use (``ropekit.load``, ``from ropekit import Scheme``), so ``import ropekit``, and
with it ``ropekit --help``, ``--version`` and ``list --no-import``, imports neither numpy nor the
stages that build tables.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ConfigSourceError,
    DeclarationError,
    DuplicateSchemeError,
    InvalidTableError,
    LayerIndexError,
    LayerLookupError,
    MissingDependencyError,
    NoRopeError,
    PluginBlockedError,
    PluginError,
    PluginLoadError,
    RopeConfigError,
    RopekitError,
    SchemeCallError,
    SchemeDeclarationError,
    SchemeMismatchError,
    UnknownModelTypeError,
    UnknownRopeTypeError,
)

if TYPE_CHECKING:  # imported on first use (see __getattr__); here for type checkers
    from .contract.family import ModelFamily
    from .contract.hookspecs import hookimpl
    from .contract.scheme import Example, Frequencies, Geometry, Key, KeyKind, Params, Scheme, plain_inv_freq
    from .host.registry import Registry, default_registry
    from .loader import load
    from .positions import position_ids
    from .tables.cache import CosSinArray
    from .tables.kept import row_budget, set_row_budget
    from .tables.rotary import apply_rotary
    from .tables.rows import RopeRows
    from .tables.table import ModelRope, RopeTable, SeqLenRule

_LAZY: dict[str, str] = {
    "hookimpl": ".contract.hookspecs",
    **dict.fromkeys(("Example", "Frequencies", "Geometry", "Key", "KeyKind", "Params", "Scheme", "plain_inv_freq"),
                    ".contract.scheme"),
    "ModelFamily": ".contract.family",
    "Registry": ".host.registry",
    "default_registry": ".host.registry",
    "load": ".loader",
    "ModelRope": ".tables.table",
    "RopeTable": ".tables.table",
    "SeqLenRule": ".tables.table",
    "apply_rotary": ".tables.rotary",
    "RopeRows": ".tables.rows",
    "CosSinArray": ".tables.cache",
    "row_budget": ".tables.kept",
    "set_row_budget": ".tables.kept",
    "position_ids": ".positions",
}
"""Each public name imported on first use, and the module it is imported from."""


def __getattr__(name: str) -> Any:
    """A public name of :data:`_LAZY`, imported from its module on first use (then kept as a global)."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module 'ropekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, those imported on first use included."""
    return sorted({*globals(), *__all__})

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ConfigSourceError",
    "CosSinArray",
    "DeclarationError",
    "DuplicateSchemeError",
    "Example",
    "Frequencies",
    "Geometry",
    "InvalidTableError",
    "Key",
    "KeyKind",
    "LayerIndexError",
    "LayerLookupError",
    "MissingDependencyError",
    "ModelFamily",
    "ModelRope",
    "NoRopeError",
    "Params",
    "PluginBlockedError",
    "PluginError",
    "PluginLoadError",
    "Registry",
    "RopeConfigError",
    "RopeRows",
    "RopeTable",
    "RopekitError",
    "Scheme",
    "SchemeCallError",
    "SchemeDeclarationError",
    "SchemeMismatchError",
    "SeqLenRule",
    "UnknownModelTypeError",
    "UnknownRopeTypeError",
    "__version__",
    "apply_rotary",
    "default_registry",
    "hookimpl",
    "load",
    "plain_inv_freq",
    "position_ids",
    "row_budget",
    "set_row_budget",
]
