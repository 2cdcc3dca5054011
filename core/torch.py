"""ropekit tables in PyTorch and transformers (:mod:`ropekit.engines.torch`).

A public import path, kept stable: the code lives in :mod:`ropekit.engines.torch`, and everything its
``__all__`` lists is importable from here too.
"""

from .engines.torch import *  # noqa: F403
from .engines.torch import __all__ as __all__
