"""Audit what a forward actually served against what the config declares.

:func:`audit_artifact` takes the tables read from an artifact (:mod:`ropekit.artifacts.served`: an array
file, an ONNX pack, a GGUF, an ExecuTorch program, a live module's tables) and says, per layer type,
whether each is the declared table and, when it is not, what was served instead. The artifact's
format judges it (:mod:`~ropekit.artifacts.format` finds it by the artifact's kind); the comparison
(:mod:`~ropekit.artifacts.compare`) and the diagnosis (:mod:`~ropekit.artifacts.diagnose`) are the
same for every format. The result is an :class:`~ropekit.artifacts.report.AuditReport`.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import numpy as np

from ..errors import ArgumentError
from ..tables.gap import DEFAULT_POSITIONS
from ..tables.table import ModelRope
from .compare import estimate_from_cos_sin
from .format import format_of
from .report import ArtifactFacts, AuditReport, AuditScope, LayerReport, worst
from .served import ServedArtifact

__all__ = ["audit_artifact", "estimate_from_cos_sin", "module_verdicts"]

DUMP_REQUEST = ("the artifact carries no RoPE table: its runtime builds its own. Dump the inv_freq or cos/sin caches "
                "the forward uses (.npy) and audit those.")


def audit_artifact(
    model: ModelRope,
    artifact: ServedArtifact,
    *,
    layer_type: str | None = None,
    positions: Iterable[int] = DEFAULT_POSITIONS,
    rtol: float | None = None,
) -> AuditReport:
    """``artifact`` against ``model``'s declaration (``to_json()`` is the ``ropekit audit --json`` document).

    ``verdict`` is ``match`` (every served table is the declared one), ``mismatch`` or
    ``no_table`` (the artifact carries none: its runtime builds one, which only a dump can show).
    ``layers`` has, per layer type, a ``verdict`` and, when not a match, ``served_as``.
    """
    if not model.tables:
        raise ArgumentError("config", f"the model applies no RoPE ({model.no_rope_reason or 'no layer type rotates'});"
                            " there is no table to audit")
    if rtol is not None and not (np.isfinite(rtol) and 0 < rtol < 1):
        raise ArgumentError("rtol", f"expected a relative tolerance in (0, 1), got {rtol!r}")
    if layer_type is not None and layer_type not in model.tables:
        raise ArgumentError("layer_type", f"unknown layer type {layer_type!r}; the config has {sorted(model.tables)}")
    scope = AuditScope(layer_type, tuple(positions), rtol)
    engine = {key: value for key, value in artifact.engine.items() if key != "layers"} if artifact.engine else None
    facts = ArtifactFacts(artifact.path, artifact.kind, artifact.producer, tuple(t.where for t in artifact.tables),
                          engine)
    stated = artifact.engine.get("non_finite") if artifact.engine else None
    if not artifact.tables and stated:  # the file states a non-finite value: no table it builds is the declared one
        return AuditReport("mismatch", facts, {name: LayerReport("mismatch", None, served_as=str(stated))
                                               for name in model.tables}, scope, artifact, artifact.rules,
                           artifact.flags, reason=str(stated))
    if not artifact.tables:
        refused = artifact.engine.get("refused")
        return AuditReport(
            "no_table", facts, {name: LayerReport("no_table", None) for name in model.tables}, scope, artifact,
            artifact.rules, artifact.flags,
            request=DUMP_REQUEST if not refused else (f"{refused}. Dump the inv_freq or cos/sin caches the forward "
                                                      "uses (.npy) and audit those."),
            reason=str(refused) if refused else None)
    judged = format_of(artifact).judge(model, artifact, scope)
    verdicts = [judged.verdict or worst(layer.verdict for layer in judged.layers.values())]
    verdicts += [entry.verdict for entry in judged.entries or ()]
    return AuditReport(worst(verdicts), attrs.evolve(facts, layers=judged.entries), judged.layers, scope, artifact,
                       artifact.rules, (*artifact.flags, *judged.flags))


def module_verdicts(report: AuditReport, owners: dict[str, str]) -> dict[str, str]:
    """Per live module, the worst verdict of the tables it served (``owners`` maps a table's
    ``where`` to its module's name): what ``ropekit.torch`` and ``ropekit.mlx`` audits report."""
    verdicts: dict[str, str] = {}
    for layer in report.layers.values():
        for table in layer.tables or ():
            owner = owners.get(table.where, table.where)
            if verdicts.get(owner) != "mismatch":
                verdicts[owner] = table.verdict
    return verdicts
