"""What a family's code does that its config does not say (:mod:`ropekit.config.families`).

A public import path, kept stable: the code lives in :mod:`ropekit.config.families`, and everything its
``__all__`` lists is importable from here too.
"""

from .config.families import *  # noqa: F403
from .config.families import __all__ as __all__
