"""ropekit: the RoPE tables a checkpoint was trained with.

``ropekit.load(config)`` reads a model's ``config.json``, dispatches each layer type's
``rope_type`` to the plugin registered for it (entry-point group ``ropekit.schemes``), validates
the parameters strictly and returns exact float64 tables. An unregistered rope_type raises;
nothing falls back to plain RoPE. See :mod:`ropekit.errors` for the exception tree.

Registry internals (``ropekit.discovery.BLOCK_ENV``, ``PluginInfo``, ``ropekit.registry.SchemeStatus``)
are importable from their submodules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .contract.hookspecs import hookimpl
from .contract.scheme import Example, Frequencies, Geometry, Key, KeyKind, Params, Scheme, plain_inv_freq
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ConfigSourceError,
    DeclarationError,
    DuplicateSchemeError,
    InvalidTableError,
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
from .host.registry import Registry, default_registry
from .loader import load
from .tables.table import ModelRope, RopeTable, SeqLenRule

if TYPE_CHECKING:  # imported on first use (see __getattr__); here for type checkers
    from .contract.family import ModelFamily
    from .positions import position_ids
    from .tables.kept import row_budget, set_row_budget
    from .tables.rotary import apply_rotary
    from .tables.rows import RopeRows


def __getattr__(name: str) -> Any:
    """``apply_rotary``, ``position_ids``, ``ModelFamily``, ``RopeRows`` and the kept-row budget are imported
    on first use: loading a table needs none of them."""
    if name == "apply_rotary":
        from .tables.rotary import apply_rotary

        return apply_rotary
    if name == "position_ids":
        from .positions import position_ids

        return position_ids
    if name == "ModelFamily":
        from .contract.family import ModelFamily

        return ModelFamily
    if name == "RopeRows":
        from .tables.rows import RopeRows

        return RopeRows
    if name in ("row_budget", "set_row_budget"):
        from .tables import kept

        return getattr(kept, name)
    raise AttributeError(f"module 'ropekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, those imported on first use included."""
    return sorted({*globals(), *__all__})

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ConfigSourceError",
    "DeclarationError",
    "DuplicateSchemeError",
    "Example",
    "Frequencies",
    "Geometry",
    "InvalidTableError",
    "Key",
    "KeyKind",
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
