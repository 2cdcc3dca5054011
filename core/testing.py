"""The conformance suite plugin authors run (:mod:`ropekit.tools.conformance`).

A public import path, kept stable: the code lives in :mod:`ropekit.tools.conformance`, and everything its
``__all__`` lists is importable from here too.
"""

from .tools.conformance import *  # noqa: F403
from .tools.conformance import __all__ as __all__
