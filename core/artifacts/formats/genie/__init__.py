"""Qualcomm Genie bundles (a folder holding ``genie_config.json``, or the file itself, recognised by its
``dialog.engine``): the table Genie builds on device from the file's keys alone (``rope-theta`` over
``pos-id-dim``/``rope-dim`` pairs, plus llama3's ``rope-scaling`` block), judged at every length it serves;
repaired by adding llama3's block, refused by name for every scaling Genie's schema has no key for."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ....tables.table import ModelRope
    from ...fixing import RepairPlan
    from ...format import ReadRequest, Written
    from ...report import AuditReport, AuditScope, Judgement
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class Genie:
    """A Genie bundle's ``genie_config.json``."""

    name = "genie"

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """The one table Genie builds from the file's keys."""
        from .config import read_genie

        return read_genie(path)

    def judge(self, model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
        """That table against every layer type, at every length Genie serves it."""
        from .config import judge_genie

        return judge_genie(model, artifact, scope)

    def plan(self, model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
        """llama3's block to add, or the key Genie's schema lacks."""
        from .fix import plan_genie

        plan_genie(model, report, plan)

    def write(self, plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
        """The rewritten ``genie_config.json`` (or bundle folder) in ``work``."""
        from .fix import write_genie

        return write_genie(plan, artifact, source, target, work)


FORMAT = Genie()
