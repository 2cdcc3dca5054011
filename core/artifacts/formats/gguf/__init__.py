"""llama.cpp GGUF files: the tables llama.cpp rebuilds from a file's keys and rope tensors by its
rules per architecture (derived from its source into ``llama_cpp_rules.json``, read on first use),
judged layer by layer; repaired by rewriting the rope keys and tensors."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ....tables.table import ModelRope
    from ...fixing import RepairPlan
    from ...format import ReadRequest, Written
    from ...report import AuditReport, AuditScope, Judgement
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class Gguf:
    """A GGUF file and the llama.cpp that serves it."""

    name = "gguf"

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """What llama.cpp serves per layer with a context of ``request.n_ctx`` tokens."""
        from .file import read_gguf

        return read_gguf(path, n_ctx=request.n_ctx)

    def judge(self, model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
        """Layer by layer, by llama.cpp's run-time rules."""
        from .judge import judge_gguf

        return judge_gguf(model, artifact, scope)

    def plan(self, model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
        """The rope keys and tensors to rewrite, proved on the reader, or llama.cpp's rule that forbids it."""
        from .fix import plan_gguf

        plan_gguf(model, report, plan)

    def write(self, plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
        """The rewritten GGUF in ``work``."""
        from .fix import write_gguf

        return write_gguf(plan, artifact, source, target, work)


FORMAT = Gguf()
