"""onnxruntime-genai packs (a folder or one ``.onnx``): baked cos/sin caches, a graph that computes its
rotary (evaluated with onnxruntime), each attention layer's rotary wiring; repaired by recomputing
caches and fixing per-layer wiring."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ....tables.table import ModelRope
    from ...fixing import RepairPlan
    from ...format import ReadRequest, Written
    from ...report import AuditReport, AuditScope, Judgement
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class Onnx:
    """An ONNX model or pack directory."""

    name = "onnx"

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """Every cache of the pack (or the rotary its graph computes, at ``request.graph_lengths``)."""
        from .pack import read_onnx

        return read_onnx(path, graph_lengths=request.graph_lengths)

    def judge(self, model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
        """The caches, then each layer's wiring."""
        from .judge import judge_onnx

        return judge_onnx(model, artifact, scope)

    def plan(self, model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
        """Caches to recompute and layers to rewire, or why the pack cannot be edited so."""
        from .fix import plan_onnx

        plan_onnx(model, report, plan)

    def write(self, plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
        """The edited pack in ``work``."""
        from .fix import write_onnx

        return write_onnx(plan, artifact, source, target, work)


FORMAT = Onnx()
