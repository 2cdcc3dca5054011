"""What a repair would do: the plan :func:`~ropekit.artifacts.repair.plan_repair` makes, its fixes,
the result, and the refusal."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ...errors import RopekitError
from ...tables.table import RopeTable

__all__ = [
    "VERDICTS",
    "CacheFix",
    "GgufFix",
    "NotRepairableError",
    "RepairPlan",
    "RepairResult",
    "WireFix",
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


@attrs.frozen
class CacheFix:
    """One cache tensor to recompute: rows from each ``(table, rows)`` segment, cos or sin."""

    name: str
    scope: str
    layer_type: str
    index: int
    segments: tuple[tuple[RopeTable, int], ...]

    def compute(self, dtype: Any) -> np.ndarray[Any, Any]:
        wanted = dtype if dtype in (np.float16, np.float32, np.float64) else np.float32
        parts = [table.cos_sin(rows, layout="half", dtype=wanted)[self.index] for table, rows in self.segments]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


@attrs.frozen
class WireFix:
    """One layer's wiring edit: ``remove`` (bypass ``bypass``, turn off ``switch_off``'s
    ``do_rotary``) or ``rewire`` (``nodes`` read ``wanted`` instead of ``cache``)."""

    index: int
    layer_type: str
    action: str
    nodes: tuple[str, ...] = ()
    bypass: tuple[str, ...] = ()
    switch_off: tuple[str, ...] = ()
    cache: str = ""
    wanted: str = ""


@attrs.frozen
class GgufFix:
    """Keys to set (``None``: remove) and rope tensors to write (``None``: drop)."""

    keys: dict[str, Any]
    tensors: dict[str, Any]
    changes: tuple[dict[str, Any], ...]


@attrs.define
class RepairPlan:
    """What :func:`repair` would rewrite in one artifact, or why it cannot.

    ``refusals`` maps a layer type (``None``: the artifact as a whole) to why it cannot be made to
    serve the declared table; ``notes`` maps a layer type to what would be rewritten. The plan is
    repairable when there is no refusal.
    """

    refusals: dict[str | None, str] = attrs.field(factory=dict)
    notes: dict[str, list[str]] = attrs.field(factory=dict)
    caches: dict[tuple[str, str], CacheFix] = attrs.field(factory=dict)
    wiring: list[WireFix] = attrs.field(factory=list)
    gguf: GgufFix | None = None

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
