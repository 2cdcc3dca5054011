"""One plugin object per family declaration, for modules that declare several families.

An entry point of the ``ropekit.families`` group names either a module (whose ``ropekit_family``
hook returns its one family) or an object in one (``module:ATTRIBUTE``): :func:`family_plugin`
makes that object.
"""

from __future__ import annotations

from types import SimpleNamespace

from ropekit import ModelFamily, hookimpl

__all__ = ["family_plugin"]


def family_plugin(family: ModelFamily) -> SimpleNamespace:
    """A plugin object whose ``ropekit_family`` hook returns ``family`` (and which keeps it as ``FAMILY``)."""

    @hookimpl
    def ropekit_family() -> ModelFamily:
        return family

    return SimpleNamespace(ropekit_family=ropekit_family, FAMILY=family)
