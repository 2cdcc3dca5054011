"""OpenVINO IRs (``openvino_model.xml`` and its ``.bin``, or their folder), read without OpenVINO: each
rotary's ``inv_freq`` Const, its attention-factor ``Multiply``, longrope's switch (evaluated with OpenVINO
on both sides, under the ``openvino`` extra) and the layers reading it; repaired by rewriting the rope
constants' bytes in a copy of the ``.bin``; dynamic NTK, frozen at trace time, refused by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ....tables.table import ModelRope
    from ...fixing import RepairPlan
    from ...format import ReadRequest, Written
    from ...report import AuditReport, AuditScope, Judgement
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class OpenVino:
    """An OpenVINO IR exported by optimum-intel."""

    name = "openvino"

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """Every rotary of the graph (a computed one evaluated at ``request.graph_lengths``)."""
        from .read import read_openvino

        return read_openvino(path, request.graph_lengths)

    def judge(self, model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
        """Each rotary against the layer types reading it, at every length a baked table is served."""
        from .judge import judge_openvino

        return judge_openvino(model, artifact, scope)

    def plan(self, model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
        """The rope constants to rewrite, or why constants cannot serve the declaration."""
        from .fix import plan_openvino

        plan_openvino(model, report, plan)

    def write(self, plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
        """The IR with the rewritten ``.bin`` in ``work``."""
        from .fix import write_openvino

        return write_openvino(plan, artifact, source, target, work)


FORMAT = OpenVino()
