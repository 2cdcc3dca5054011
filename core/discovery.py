"""Reading the ``ropekit.schemes`` entry-point group (:mod:`ropekit.host.discovery`).

A public import path, kept stable: the code lives in :mod:`ropekit.host.discovery`, and everything its
``__all__`` lists is importable from here too.
"""

from .host.discovery import *  # noqa: F403
from .host.discovery import __all__ as __all__
