"""Carrying a repair out: plan, rewrite into staging, audit the copy, move it into place, audit it again."""

from __future__ import annotations

import os

from ...errors import ArgumentError, RopekitError
from ...tables.table import ModelRope
from ..audit import audit_artifact
from ..read import read_for_audit
from .decide import plan_repair
from .files import checked_paths, data_target, publish, remove_paths, staging
from .gguf_fix import rewrite_gguf
from .onnx_fix import rewrite_onnx
from .plans import NotRepairableError, RepairResult, one_line

__all__ = ["repair"]


def repair(model: ModelRope, served: str | os.PathLike[str], out: str | os.PathLike[str], *,
           n_ctx: int | None = None) -> RepairResult:
    """Write a copy of ``served`` at ``out`` that serves ``model``'s declared tables.

    ``unchanged`` (nothing written) when it already does; ``not_repairable`` (nothing written)
    when its format or engine cannot express them; ``repaired`` once the copy, moved into place,
    audits as ``match``. Invalid input (``out`` existing or appearing meanwhile, inside
    ``served``, a symlink, an unreadable artifact) raises :class:`~ropekit.ArgumentError`; the
    original is never opened for writing.
    """
    source, target = checked_paths(os.fspath(served), os.fspath(out))
    artifact = read_for_audit(model, source, n_ctx=n_ctx)  # read as `ropekit audit` reads it
    document = audit_artifact(model, artifact)
    if document["verdict"] == "match":
        return RepairResult("unchanged", None, (), "it already serves the declared table")
    try:
        plan = plan_repair(model, artifact, document)
    except RopekitError:
        raise
    except Exception as error:
        raise ArgumentError("served", f"{source}: cannot be read for repair: {one_line(error)}") from None
    if not plan.repairable:
        return RepairResult("not_repairable", None, (), plan.reason)
    extra = data_target(artifact, source, target)
    try:
        with staging(target) as work:
            staged = os.path.join(work, os.path.basename(target))
            if artifact.kind == "onnx":
                changes = rewrite_onnx(plan, artifact, source, staged, extra is not None)
            else:
                changes = rewrite_gguf(plan, artifact, source, staged)
            _verify(model, staged, n_ctx, "the rewritten copy")
            moves = [(staged, target)]
            if extra is not None:
                moves.insert(0, (os.path.join(work, os.path.basename(extra)), extra))
            publish(moves)
        try:
            _verify(model, target, n_ctx, f"the copy moved to {target}")
        except NotRepairableError as error:
            remove_paths([path for _, path in moves], moved=True)
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
    return RepairResult("repaired", target, tuple(changes), f"wrote {target}; it audits as match")


def _verify(model: ModelRope, path: str, n_ctx: int | None, what: str) -> None:
    """``path`` read back by ``audit``'s readers audits as ``match`` (else :class:`NotRepairableError`)."""
    try:
        check = audit_artifact(model, read_for_audit(model, path, n_ctx=n_ctx))
    except ArgumentError as error:  # a copy that does not even read back (external data lost, say)
        raise NotRepairableError(f"{what} does not read back: {error.problem}") from None
    if check["verdict"] != "match":
        still = next((str(layer.get("served_as", "")) for layer in check["layers"].values()
                      if layer.get("verdict") == "mismatch"), "")
        raise NotRepairableError(f"{what} still does not serve the declared table: {still or check['verdict']}")
