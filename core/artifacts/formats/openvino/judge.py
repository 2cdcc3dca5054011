"""Judging an OpenVINO IR: its tables by the neutral judgement under :class:`OpenVinoRules` (a baked
table is served at every length, so a seq-len-dependent declaration is held against it on both sides of
its switch), and which config was judged: the ``config.json`` optimum-intel saves beside the IR may
differ from the checkpoint's (it rewrites Phi-3's ``max_position_embeddings``)."""

from __future__ import annotations

import os

from ....tables.table import ModelRope, RopeTable
from ...compare import compare
from ...fixing import same_table
from ...judge import judge_tables
from ...report import AuditScope, Judgement
from ...rules import Rules
from ...served import ServedArtifact, ServedTable

__all__ = ["FROZEN", "OpenVinoRules", "judge_openvino"]

FROZEN = "plain RoPE baked at the trace length; wrong beyond max_position_embeddings"


class OpenVinoRules(Rules):
    """What OpenVINO serves that the tables alone do not say: a Const is the same at every length."""

    def comparisons(self, table: RopeTable, served: ServedTable) -> list[tuple[str, RopeTable]] | None:
        """A baked table against a seq-len-dependent declaration: up to the switch and well beyond it."""
        if table.switch_at is None or served.seq_len is not None:
            return None
        return [(f"seq_len <= {table.switch_at}", table), (f"seq_len {2 * table.switch_at}", table.at(
            2 * table.switch_at))]

    def explain(self, table: RopeTable, served: ServedTable) -> str | None:
        """Dynamic NTK traced once, below its switch: the load-time (plain) table, frozen."""
        if served.seq_len is not None or table.switch_at is None:
            return None
        load_time = table.at(table.switch_at)
        ok, _ = compare(load_time, served, None)
        if not ok:
            return None
        what = FROZEN if table.rope_type == "dynamic" else (
            f"{table.rope_type}'s load-time table baked at the trace length; wrong beyond {table.switch_at} positions")
        return (f"{what} ({table.switch_at}): the trace evaluated transformers' seq_len switch once, at the dummy "
                "input's length, and froze its branch")


def judge_openvino(model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
    """The IR's tables, and a flag naming the config judged when the one saved beside the IR differs."""
    judged = judge_tables(model, artifact, scope, OpenVinoRules())
    flag = _which_config(model, artifact.engine.get("saved_config"))
    if flag is None:
        return judged
    return Judgement(judged.layers, judged.entries, (*judged.flags, flag), judged.verdict)


def _which_config(model: ModelRope, saved: str | None) -> str | None:
    """Which config was judged, when it matters: CONFIG differs from the config saved beside the IR, or
    CONFIG is that saved config and declares longrope (whose length optimum-intel rewrites)."""
    if not saved:
        return None
    source = model.source
    if os.path.isdir(source):
        source = os.path.join(source, "config.json")
    if os.path.exists(source) and os.path.realpath(source) == os.path.realpath(saved):
        if any(table.rope_type == "longrope" for table in model.tables.values()):
            return (f"judged against the config.json saved beside the IR ({saved}); optimum-intel rewrites "
                    "max_position_embeddings in it for Phi-3 (and with it longrope's attention factor): if the "
                    "checkpoint's own config.json differs, audit against that one")
        return None
    try:
        from ....loader import load

        beside = load(saved, strict=False)
    except Exception:  # a saved config ropekit cannot read says nothing about CONFIG
        return None
    differences = []
    for name, table in model.tables.items():
        other = beside.tables.get(name)
        if other is None:
            differences.append(f"no {name} table")
        elif not same_table(table, other):
            differences.append(
                f"{name}: {other.rope_type} (CONFIG {table.rope_type}), attention factor "
                f"{other.attention_factor:.6g} (CONFIG {table.attention_factor:.6g}), max_position_embeddings "
                f"{other.geometry.max_position_embeddings} (CONFIG {table.geometry.max_position_embeddings})")
    if not differences:
        return None
    return (f"judged against CONFIG ({model.source}); the config.json optimum-intel saved beside the IR ({saved}) "
            f"declares other tables ({'; '.join(differences)}): judged against it, the verdict may differ")
