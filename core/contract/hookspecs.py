"""The hooks ropekit plugins implement: ``ropekit_scheme`` for a rope_type, ``ropekit_family`` for
a model family ropekit does not know.

A plugin is a module registered under the ``ropekit.schemes`` entry-point group, named by its
rope_type::

    [project.entry-points."ropekit.schemes"]
    ntk_alpha = "my_package.ntk_alpha"

and the module implements::

    from ropekit import Scheme, hookimpl

    @hookimpl
    def ropekit_scheme() -> Scheme:
        return Scheme(name="ntk_alpha", ...)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .family import ModelFamily
    from .scheme import Scheme

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec", "ropekit_family", "ropekit_scheme"]

PROJECT_NAME = "ropekit"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Decorate a plugin's ``ropekit_scheme`` (or ``ropekit_family``) function with this."""


@hookspec(firstresult=True)
def ropekit_scheme() -> Scheme:  # type: ignore[empty-body]
    """Return this plugin's :class:`~ropekit.Scheme` declaration."""


@hookspec(firstresult=True)
def ropekit_family() -> ModelFamily:  # type: ignore[empty-body]
    """Return this plugin's :class:`~ropekit.ModelFamily` declaration (entry-point group
    ``ropekit.families``, named by the family's model_type)."""
