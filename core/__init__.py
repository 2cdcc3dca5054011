"""ropekit: the RoPE tables a checkpoint was trained with.

``ropekit.load(config)`` reads a model's ``config.json``, dispatches each layer type's
``rope_type`` to the plugin registered for it (entry-point group ``ropekit.schemes``), validates
the parameters strictly and returns exact float64 tables. An unregistered rope_type raises;
nothing falls back to plain RoPE. See :mod:`ropekit.errors` for the exception tree.
"""

from __future__ import annotations

from .discovery import BLOCK_ENV, ENTRY_POINT_GROUP, PluginInfo
from .errors import (
    ConfigSourceError,
    DuplicateSchemeError,
    InvalidTableError,
    MissingDependencyError,
    PluginBlockedError,
    PluginError,
    PluginLoadError,
    RopeConfigError,
    RopekitError,
    SchemeDeclarationError,
    SchemeMismatchError,
    UnknownRopeTypeError,
)
from .hookspecs import hookimpl
from .loader import load
from .registry import Registry, SchemeStatus, default_registry
from .rotary import apply_rotary
from .scheme import Example, Frequencies, Geometry, Key, KeyKind, Params, Scheme, plain_inv_freq
from .table import ModelRope, RopeTable

__version__ = "0.1.0"

__all__ = [
    "BLOCK_ENV",
    "ENTRY_POINT_GROUP",
    "ConfigSourceError",
    "DuplicateSchemeError",
    "Example",
    "Frequencies",
    "Geometry",
    "InvalidTableError",
    "Key",
    "KeyKind",
    "MissingDependencyError",
    "ModelRope",
    "Params",
    "PluginBlockedError",
    "PluginError",
    "PluginInfo",
    "PluginLoadError",
    "Registry",
    "RopeConfigError",
    "RopeTable",
    "RopekitError",
    "Scheme",
    "SchemeDeclarationError",
    "SchemeMismatchError",
    "SchemeStatus",
    "UnknownRopeTypeError",
    "__version__",
    "apply_rotary",
    "default_registry",
    "hookimpl",
    "load",
    "plain_inv_freq",
]
