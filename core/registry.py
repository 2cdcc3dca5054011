"""Which plugin serves a rope_type (:mod:`ropekit.host.registry`).

A public import path, kept stable: the code lives in :mod:`ropekit.host.registry`, and everything its
``__all__`` lists is importable from here too.
"""

from .host.registry import *  # noqa: F403
from .host.registry import __all__ as __all__
