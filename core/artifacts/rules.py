"""What an engine does at run time that its tables alone do not say, as the neutral judgement asks
it: :class:`Rules` (the default: nothing beyond the tables) and :class:`Candidate`, a table a served
one is compared with when it is not the declared one. A format whose engine has rules of its own
(llama.cpp's n_ctx and base) subclasses :class:`Rules`; the judgement never asks which format it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..tables.table import RopeTable
    from .served import ServedTable

__all__ = ["Candidate", "Rules"]


@attrs.frozen
class Candidate:
    """A table the served one is compared with when it is not the declared one."""

    description: str
    inv_freq: npt.NDArray[np.float64] = attrs.field(repr=False, eq=False)
    magnitude: float | None = None
    magnitude_only: bool = False
    """The declared frequencies with another magnitude (pointless when the magnitudes agree)."""


class Rules:
    """An engine's run-time rules, as the judgement of one served table asks them. The defaults say
    the tables are served as read."""

    def comparisons(self, table: RopeTable, served: ServedTable) -> list[tuple[str, RopeTable]] | None:
        """The declarations ``served`` must equal as ``(condition, table)`` (``None``: the neutral
        choice, by the table's own seq-len rule)."""
        return None

    def composition(self, table: RopeTable, served: ServedTable) -> str | None:
        """For a table observed without its position axes: why the engine's composition is not the
        declared one (``None``: nothing to say)."""
        return None

    def candidates(self, table: RopeTable, served: ServedTable) -> Iterator[Candidate]:
        """The engine's own variants of ``table`` that ``served`` may be."""
        return iter(())

    def explain(self, table: RopeTable, served: ServedTable) -> str | None:
        """What the engine serves instead of ``table`` by its own rule alone (``None``: no rule says)."""
        return None
