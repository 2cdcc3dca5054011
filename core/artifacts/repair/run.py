"""Carrying a repair out: decide from the audit's report, rewrite into staging (the artifact's format
writes it), audit the copy, move it into place, audit it again."""

from __future__ import annotations

import os

from ...errors import ArgumentError, RopekitError
from ...tables.table import ModelRope
from ..audit import audit_artifact
from ..files import checked_paths, publish, remove_paths, staging
from ..fixing import NotRepairableError, RepairResult, one_line
from ..format import format_of
from ..read import read_for_audit
from ..report import AuditReport
from .decide import plan_repair

__all__ = ["repair"]


def repair(model: ModelRope, served: str | os.PathLike[str], out: str | os.PathLike[str], *,
           n_ctx: int | None = None, report: AuditReport | None = None) -> RepairResult:
    """Write a copy of ``served`` at ``out`` that serves ``model``'s declared tables.

    ``unchanged`` (nothing written) when it already does; ``not_repairable`` (nothing written)
    when its format or engine cannot express them; ``repaired`` once the copy, moved into place,
    audits as ``match``. ``report`` is the audit of ``served`` already made (by
    :func:`~ropekit.artifacts.read.read_for_audit` and :func:`~ropekit.artifacts.audit.audit_artifact`
    with the default tolerances, as ``ropekit repair`` makes it): the repair decides from it and does
    not audit the original again; without it, that audit is made here, once. Invalid input (``out``
    existing or appearing meanwhile, inside ``served``, a symlink, an unreadable artifact) raises
    :class:`~ropekit.ArgumentError`; the original is never opened for writing.
    """
    source, target = checked_paths(os.fspath(served), os.fspath(out))
    if report is None:
        report = audit_artifact(model, read_for_audit(model, source, n_ctx=n_ctx))  # as `ropekit audit` reads it
    elif report.served is None or not report.scope.default:
        raise ArgumentError("report", "give the audit made with the default tolerances over every layer type "
                            "(audit_artifact(model, read_for_audit(model, served)))")
    artifact = report.served
    assert artifact is not None
    if report.verdict == "match":
        return RepairResult("unchanged", None, (), "it already serves the declared table")
    try:
        plan = plan_repair(model, report)
    except RopekitError:
        raise
    except Exception as error:
        raise ArgumentError("served", f"{source}: cannot be read for repair: {one_line(error)}") from None
    if not plan.repairable:
        return RepairResult("not_repairable", None, (), plan.reason)
    try:
        with staging(target) as work:
            written = format_of(artifact).write(plan, artifact, source, target, work)
            staged = written.moves[-1][0]
            _verify(model, staged, n_ctx, "the rewritten copy")
            publish(list(written.moves))
        try:
            _verify(model, target, n_ctx, f"the copy moved to {target}")
        except NotRepairableError as error:
            remove_paths([path for _, path in written.moves], moved=True)
            raise NotRepairableError(f"{error}; it was removed") from None
    except NotRepairableError as error:
        return RepairResult("not_repairable", None, (), str(error))
    except RopekitError:
        raise
    except OSError as error:  # a full disk, a folder that became read-only: nothing is left behind
        raise ArgumentError("out", f"cannot write {target}: {error.strerror or error}; nothing was written") from None
    except Exception as error:  # onnx's checker, protobuf, the gguf writer: the input, not a crash
        problem = f"{source}: cannot be rewritten: {one_line(error)}; nothing was written"
        raise ArgumentError("served", problem) from None
    return RepairResult("repaired", target, written.changes, f"wrote {target}; it audits as match")


def _verify(model: ModelRope, path: str, n_ctx: int | None, what: str) -> None:
    """``path`` read back as ``ropekit audit`` reads it audits as ``match`` with the audit's own
    tolerances (else :class:`NotRepairableError`)."""
    try:
        check = audit_artifact(model, read_for_audit(model, path, n_ctx=n_ctx))
    except ArgumentError as error:  # a copy that does not even read back (external data lost, say)
        raise NotRepairableError(f"{what} does not read back: {error.problem}") from None
    if check.verdict != "match":
        raise NotRepairableError(f"{what} still does not serve the declared table: "
                                 f"{check.first_served_as() or check.verdict}")
