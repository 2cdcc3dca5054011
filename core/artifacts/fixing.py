"""What a repair would do, format-neutral: the plan :func:`~ropekit.artifacts.repair.plan_repair`
makes (refusals and notes per layer type, and the format's own edits), the result, and the refusal.
Each format's fix (``formats/<format>/fix.py``) fills a plan in and carries it out."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ..errors import RopekitError
from ..tables.table import RopeTable

__all__ = [
    "VERDICTS",
    "NotRepairableError",
    "RepairPlan",
    "RepairResult",
    "one_line",
    "same_table",
]


VERDICTS = ("repaired", "unchanged", "not_repairable")


class NotRepairableError(RopekitError):
    """The artifact cannot be made to serve the declared table in its own format (exit 1)."""


@attrs.frozen
class RepairResult:
    """What ``ropekit repair`` did: ``verdict`` (``repaired``, ``unchanged``, ``not_repairable``),
    ``out`` (the written path, or ``None``), ``changes`` (what was rewritten, per layer type or
    layer) and ``reason`` (one line)."""

    verdict: str
    out: str | None
    changes: tuple[dict[str, Any], ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The ``ropekit repair --json`` object."""
        return {"verdict": self.verdict, "out": self.out, "changes": list(self.changes), "reason": self.reason}


@attrs.define
class RepairPlan:
    """What :func:`repair` would rewrite in one artifact, or why it cannot.

    ``refusals`` maps a layer type (``None``: the artifact as a whole) to why it cannot be made to
    serve the declared table; ``notes`` maps a layer type to what would be rewritten. The plan is
    repairable when there is no refusal.
    """

    refusals: dict[str | None, str] = attrs.field(factory=dict)
    notes: dict[str, list[str]] = attrs.field(factory=dict)
    edits: Any = None
    """The format's own edits (its fix module's type): what :meth:`Format.write` carries out."""

    @property
    def repairable(self) -> bool:
        return not self.refusals

    @property
    def reason(self) -> str:
        """The refusals in one line (one reason alone when they all say the same)."""
        reasons = list(dict.fromkeys(self.refusals.values()))
        if len(reasons) == 1:
            return reasons[0]
        return "; ".join(f"{name or 'the artifact'}: {why}" for name, why in self.refusals.items())

    def refuse(self, layer_type: str | None, why: str) -> None:
        self.refusals.setdefault(layer_type, why)

    def note(self, layer_type: str, what: str) -> None:
        found = self.notes.setdefault(layer_type, [])
        if what not in found:
            found.append(what)


def same_table(one: RopeTable, other: RopeTable) -> bool:
    """Whether two tables serve the same frequencies, attention factor and switch length."""
    return one is other or (one.inv_freq.shape == other.inv_freq.shape and bool(np.array_equal(
        one.inv_freq, other.inv_freq)) and one.attention_factor == other.attention_factor
        and one.switch_at == other.switch_at)


def one_line(error: BaseException) -> str:
    """``error`` as one line (its type and at most 300 characters), for a message."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__
