"""ropekit tables in MLX and MLX-LM (:mod:`ropekit.engines.mlx`).

A public import path, kept stable: the code lives in :mod:`ropekit.engines.mlx`, and everything its
``__all__`` lists is importable from here too.
"""

from .engines.mlx import *  # noqa: F403
from .engines.mlx import __all__ as __all__
