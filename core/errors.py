"""Every exception ropekit raises, in one place.

::

    RopekitError                      base class; catch this to catch everything ropekit raises
    ├── RopeConfigError (ValueError)  the config is wrong; ``.path`` is the JSON path at fault
    │   ├── ConfigSourceError         the file or directory cannot be read as a config
    │   ├── UnknownRopeTypeError      no installed plugin serves the declared rope_type
    │   ├── UnknownModelTypeError     the model_type's code is unknown to ropekit (strict mode)
    │   └── NoRopeError               the model's code applies no RoPE: there is no table to serve
    ├── ArgumentError (ValueError)    a wrong argument to a ropekit function; ``.argument`` names it
    │   ├── ArgumentTypeError (TypeError)  ... of the wrong type
    │   └── LayerLookupError (LookupError)  no single answer for that layer question: ``model.table`` of a
    │       │                         model with several tables or NoPE layers, a layer type it lacks
    │       └── LayerIndexError (IndexError)  a layer index the model does not have
    ├── DeclarationError (ValueError) a ``Key`` or ``Scheme`` is declared wrongly (raised at the author's line)
    ├── MissingDependencyError (ImportError)  an optional extra (matplotlib for plots) is not installed
    └── PluginError                   a plugin is at fault; ``.rope_type`` (a family's model_type for a
        │                             family plugin) and ``.distribution`` name it
        ├── PluginBlockedError        the user blocked this rope_type or distribution
        ├── PluginLoadError           the plugin failed to import or has no usable ``ropekit_scheme`` hook
        ├── DuplicateSchemeError      two distributions claim one rope_type
        ├── SchemeMismatchError       the scheme's name differs from its entry-point name
        ├── SchemeDeclarationError    the scheme's declaration is malformed (a DeclarationError, attributed)
        ├── InvalidTableError         the builder raised or returned a wrong length, dtype or value
        └── SchemeCallError           check, switch_at or landmarks raised or returned the wrong type

A config error is the user's to fix (the CLI exits 2); a plugin error is the plugin author's
(the message names the distribution so the user knows whom to tell; the CLI exits 3). Other
rope_types keep working when one plugin is broken. An argument error is the calling code's: the
library names the argument (``positions``, ``served``), and the CLI maps it to its flag.
"""

from __future__ import annotations

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ConfigSourceError",
    "DeclarationError",
    "DuplicateSchemeError",
    "InvalidTableError",
    "LayerIndexError",
    "LayerLookupError",
    "MissingDependencyError",
    "NoRopeError",
    "PluginBlockedError",
    "PluginError",
    "PluginLoadError",
    "RopeConfigError",
    "RopekitError",
    "SchemeCallError",
    "SchemeDeclarationError",
    "SchemeMismatchError",
    "UnknownModelTypeError",
    "UnknownRopeTypeError",
]


class RopekitError(Exception):
    """Base class of every error ropekit raises.

    ``str(error)`` is always one line: control characters that came from a config or a plugin
    (newline, carriage return, ESC, ...) are shown escaped, so an error cannot forge lines or write
    to a terminal.
    """

    def __str__(self) -> str:
        return one_line(super().__str__())


def one_line(text: str) -> str:
    """``text`` with every control or line-breaking character escaped (``\\n``, ``\\x1b``, ``\\u2028``)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() or char == " " else repr(char)[1:-1] for char in text)


class RopeConfigError(RopekitError, ValueError):
    """A config is invalid. ``path`` is the dotted JSON path of the offending key (may be empty)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


class ConfigSourceError(RopeConfigError):
    """The config file or model directory cannot be read."""


class UnknownRopeTypeError(RopeConfigError):
    """The declared rope_type is served by no installed (or unblocked) plugin."""

    def __init__(self, path: str, rope_type: str, problem: str) -> None:
        self.rope_type = rope_type
        super().__init__(path, problem)


class UnknownModelTypeError(RopeConfigError):
    """The config's ``model_type`` is neither a class of the transformers release ropekit's facts
    come from, nor a remote-code family ropekit has checked against its code, nor declared by an
    installed family plugin: ropekit will not guess which code it runs. ``model_type`` names it."""

    def __init__(self, path: str, model_type: str, problem: str) -> None:
        self.model_type = model_type
        super().__init__(path, problem)


class NoRopeError(RopeConfigError):
    """The model's code applies no rotary embedding (learned, ALiBi or relative positions, or no
    attention): asking for its RoPE table is refused by name, never answered with one."""


class ArgumentError(RopekitError, ValueError):
    """A ropekit function got a wrong argument. ``argument`` names it (the CLI maps it to a flag)."""

    def __init__(self, argument: str, problem: str) -> None:
        self.argument = argument
        self.problem = problem
        super().__init__(f"{argument}: {problem}")


class ArgumentTypeError(ArgumentError, TypeError):
    """A ropekit function got an argument of the wrong type."""


class LayerLookupError(ArgumentError, LookupError):
    """A question about a model's layers has no single answer: ``model.table`` of a model whose
    layers use more than one table or include layers without RoPE, a layer type the config does not
    list, a layer index the model does not have. The message names ``for_layer`` and the layer
    types; ``argument`` is ``table``, ``layer_type`` or ``index``."""


class LayerIndexError(LayerLookupError, IndexError):
    """A layer index outside the model's layers (``argument`` is ``index``)."""


class DeclarationError(RopekitError, ValueError):
    """A :class:`~ropekit.Key` or :class:`~ropekit.Scheme` is declared wrongly.

    Raised where the plugin author constructs it; when a plugin fails this way at load time, the
    registry reports a :class:`SchemeDeclarationError` naming the distribution.
    """


class MissingDependencyError(RopekitError, ImportError):
    """An optional dependency is missing; the message says which extra to install."""


class PluginError(RopekitError):
    """A plugin is at fault. ``rope_type`` and ``distribution`` say which one; for a family plugin
    (entry-point group ``ropekit.families``) ``rope_type`` holds the family's model_type and
    ``kind`` is ``"model_type"``."""

    def __init__(self, rope_type: str, distribution: str, problem: str, *, kind: str = "rope_type") -> None:
        self.rope_type = rope_type
        self.distribution = distribution
        self.problem = problem
        self.kind = kind
        super().__init__(f"{kind} {rope_type!r} (distribution {distribution}): {problem}")


class PluginBlockedError(PluginError):
    """The rope_type or its distribution is blocked by the user."""


class PluginLoadError(PluginError):
    """The plugin module failed to import, or defines no usable ``ropekit_scheme`` hook."""


class DuplicateSchemeError(PluginError):
    """Two or more distributions register the same rope_type."""


class SchemeMismatchError(PluginError):
    """The scheme a plugin returns is named differently from its entry point."""


class SchemeDeclarationError(PluginError):
    """The scheme's declaration (keys, defaults, examples) is malformed."""


class InvalidTableError(PluginError):
    """The scheme's builder raised, or returned a table of wrong length, dtype or values."""


class SchemeCallError(PluginError):
    """One of the scheme's other callables (``check``, ``switch_at``, ``landmarks``) raised, or
    returned something of the wrong type."""
