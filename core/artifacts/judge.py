"""The format-neutral judgement: one served table against its declared table
(:func:`judge_table`), and every table of an artifact paired with the layer types it serves
(:func:`judge_tables`: the one named, those of the layers known to read it, else every one of its
width). A format with a per-layer plan (a GGUF's blocks, an ONNX pack's wiring) adds its own
judgement on top, through :class:`Layers`; an engine's run-time rules come in as
:class:`~ropekit.artifacts.rules.Rules`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from ..tables.table import ModelRope, RopeTable
from .compare import compare, difference, width
from .diagnose import served_as
from .report import AuditScope, Judgement, LayerReport, TableReport, worst
from .rules import Rules
from .served import ServedArtifact, ServedTable

__all__ = ["Layers", "judge_table", "judge_tables", "layer_types_of"]

NEUTRAL = Rules()


@attrs.define
class _Layer:
    verdict: str = "match"
    tables: list[TableReport] = attrs.field(factory=list)
    served_as: str | None = None
    no_rope: bool = False


class Layers:
    """Per layer type, the judgement so far: tables added one by one, a mismatch found elsewhere
    (a layer's wiring) marked; the first mismatch's line is the layer type's ``served_as``."""

    def __init__(self) -> None:
        self._found: dict[str, _Layer] = {}

    def add(self, name: str, report: TableReport) -> None:
        """``report`` (one served table against layer type ``name``) into the layer type's summary."""
        layer = self._found.setdefault(name, _Layer())
        layer.tables.append(report)
        if report.verdict != "match":
            self.mark(name, report.served_as)

    def mark(self, name: str, served_as: str, *, no_rope: bool = False) -> None:
        """Layer type ``name`` is a mismatch for a reason outside its tables (``no_rope``: a layer
        that must not rotate does)."""
        layer = self._found.setdefault(name, _Layer())
        layer.verdict = "mismatch"
        layer.no_rope = layer.no_rope or no_rope
        if layer.served_as is None:
            layer.served_as = served_as

    def verdicts(self) -> set[str]:
        """Every layer type's verdict so far."""
        return {layer.verdict for layer in self._found.values()}

    def reports(self) -> dict[str, LayerReport]:
        """The typed summaries, in the order the layer types were met."""
        return {name: LayerReport(layer.verdict, tuple(layer.tables), layer.served_as, layer.no_rope)
                for name, layer in self._found.items()}


def judge_tables(
    model: ModelRope, artifact: ServedArtifact, scope: AuditScope, rules: Rules = NEUTRAL, layers: Layers | None = None
) -> Judgement:
    """Every table of ``artifact`` against the declared table of each layer type it serves. Tables a
    graph computes at one length that nothing assigns to a layer type are matched with the layer
    type whose table they are; one that is no layer type's is flagged (and makes a mismatch)."""
    found = Layers() if layers is None else layers
    flags: list[str] = []
    served_tables = list(_split_concatenated(model, artifact.tables))
    unassigned = _unassigned(model, served_tables, scope.layer_type)
    for served in served_tables:
        if any(served in group for group in unassigned):
            continue
        for name in _targets(model, served, scope.layer_type):
            found.add(name, judge_table(model, model.tables[name], served, artifact, scope, rules))
    orphans = [_judge_unassigned(model, group, artifact, found, flags, scope, rules) for group in unassigned]
    verdicts = found.verdicts() | ({"mismatch"} if any(orphans) else set())
    return Judgement(found.reports(), None, tuple(flags), worst(verdicts))


def layer_types_of(model: ModelRope, served: ServedTable) -> list[str]:
    """The layer types of the layers ``served`` is known to be read by, in the model's order."""
    found = {model.layer_types[index] for index in served.layers if index < len(model.layer_types)}
    return [name for name in model.tables if name in found]


def _unassigned(model: ModelRope, tables: list[ServedTable], layer_type: str | None) -> list[list[ServedTable]]:
    """Groups of tables a graph computes at one length, of one width, that nothing assigns to a
    layer type (no layer type, no consuming layer known) where several layer types have that
    width: which table serves which layer type is then not known (a two-rotary Gemma-3 export)."""
    if layer_type is not None:
        return []
    groups: dict[tuple[int | None, int], list[ServedTable]] = {}
    for served in tables:
        if served.seq_len is not None and served.layer_type is None and not layer_types_of(model, served):
            groups.setdefault((served.seq_len, width(served)), []).append(served)
    return [group for (_, pairs), group in groups.items() if len(group) > 1 and sum(
        len(table.inv_freq) == pairs for table in model.tables.values()) > 1]


def _judge_unassigned(
    model: ModelRope, group: list[ServedTable], artifact: ServedArtifact, layers: Layers, flags: list[str],
    scope: AuditScope, rules: Rules,
) -> bool:
    """Tables of one length that no layer is known to consume: each layer type of their width
    matches when some table is its declared one (a mismatch only when none is). A table that is
    no layer type's is flagged. ``True`` when there is such a table."""
    pairs = width(group[0])
    fitted: set[int] = set()
    for name, table in model.tables.items():
        if len(table.inv_freq) != pairs:
            continue
        reports = [judge_table(model, table, served, artifact, scope, rules) for served in group]
        matching = [index for index, report in enumerate(reports) if report.verdict == "match"]
        fitted.update(matching)
        assigned = ("the graph does not say which layers read this table: it is matched with the layer type whose "
                    "table it is" if matching else "the graph does not say which layers read this table: none of its "
                    f"tables is the {name} table")
        for report in [reports[index] for index in matching[:1]] or reports:
            layers.add(name, attrs.evolve(report, assigned=assigned))
    orphans = [served for index, served in enumerate(group) if index not in fitted]
    flags.extend(f"{served.where}: is no declared layer type's table, and the graph does not say which layers "
                 "read it" for served in orphans)
    return bool(orphans)


def _split_concatenated(model: ModelRope, tables: tuple[ServedTable, ...]) -> Iterator[ServedTable]:
    """DirectML's longrope cache: ``[original + max, .]``, short rows first. Split it in two."""
    tables_used = {id(table): table for table in model.tables.values()}
    for served in tables:
        if len(tables_used) != 1:  # a DirectML longrope pack holds one table for the whole model
            yield served
            continue
        table = next(iter(tables_used.values()))
        original = table.switch_at if table.rope_type == "longrope" else None
        maximum = table.geometry.max_position_embeddings
        if (served.kind == "cache" and served.regime is None and original and maximum and served.sin is not None
                and served.values.shape[0] == original + maximum):
            yield attrs.evolve(served, values=served.values[:original], sin=served.sin[:original], regime="short",
                               where=f"{served.where} rows 0..{original - 1}")
            yield attrs.evolve(served, values=served.values[original:], sin=served.sin[original:], regime="long",
                               where=f"{served.where} rows {original}..{original + maximum - 1}")
        else:
            yield served


def _targets(model: ModelRope, served: ServedTable, layer_type: str | None) -> list[str]:
    """The layer types ``served`` stands for: the one named, else those of the layers known to read
    it, else every one of its width (an engine that serves one table serves it to every layer),
    else the first."""
    if layer_type is not None:
        return [layer_type]
    if served.layer_type is not None and served.layer_type in model.tables:
        return [served.layer_type]
    consumed = layer_types_of(model, served)
    if consumed:  # a graph's rotary read by these layers: their layer types, whatever the width
        return consumed
    sized = [name for name, table in model.tables.items() if len(table.inv_freq) == width(served)]
    return sized or [next(iter(model.tables))]


def _declared_for(table: RopeTable, served: ServedTable) -> list[tuple[str, RopeTable]]:
    """The declared tables ``served`` must equal: longrope's short or long regime (both, for an
    engine that serves one regime at every length)."""
    if not table.seq_len_dependent or table.switch_at is None:
        return [("", table)]
    if served.seq_len is not None:  # measured at one length: the declaration at that length
        return [(f"seq_len {served.seq_len}", table.at(served.seq_len))]
    beyond = table.at(table.switch_at + 1)
    if served.regime == "short":
        return [(f"seq_len <= {table.switch_at}", table)]
    if served.regime == "long":
        return [(f"seq_len > {table.switch_at}", beyond)]
    return [("", table)]


def judge_table(
    model: ModelRope, table: RopeTable, served: ServedTable, artifact: ServedArtifact, scope: AuditScope,
    rules: Rules = NEUTRAL,
) -> TableReport:
    """Is ``served`` the declared ``table`` (at every length its engine serves it)? When not, what
    it is instead, and by how much it differs."""
    comparisons = rules.comparisons(table, served) or _declared_for(table, served)
    verdict, said = "match", ""
    measured: list[dict[str, Any]] = []
    apart: dict[str, Any] | None = None
    for condition, declared in comparisons:
        ok, detail = compare(declared, served, scope.rtol)
        measured.append({"declared": condition or "load-time table", **detail})
        if not ok and verdict == "match":
            verdict = "mismatch"
            said = served_as(model, declared, served, artifact, scope.rtol, detail, rules)
            if condition:
                said += f"; the declaration differs at {condition}"
            apart = difference(declared.inv_freq, detail.get("served_inv_freq"), scope.positions)
    composition: str | None = None
    if served.axes is not None:
        composed = _composition_served(table, served)
        composition = "match" if composed is None else "mismatch"
        if composed is not None and verdict == "match":
            verdict, said = "mismatch", composed
    else:
        engine = rules.composition(table, served)
        if engine is not None:
            composition = "mismatch"
            if verdict == "match":
                verdict, said = "mismatch", engine
    unverified = None
    if served.kind == "inv_freq" and served.magnitude is None and table.attention_factor != 1.0:
        unverified = (f"the artifact holds frequencies only; the declared attention factor {table.attention_factor:.6g}"
                      " must be applied by the forward, and this audit cannot see whether it is")
    for comparison in measured:
        comparison.pop("served_inv_freq", None)
    return TableReport(served.where, served.kind, served.dtype,
                       {**table.to_json(inv_freq=False), "pairs": len(table.inv_freq)}, verdict, tuple(measured),
                       served.regime, apart, composition, said, unverified)


def _composition_served(table: RopeTable, served: ServedTable) -> str | None:
    """How a multimodal module's observed axes differ from the declared composition (``None``: they do not)."""
    from ..tables.mrope import describe_axes

    assert served.axes is not None
    layout = served.layout if served.layout in ("neox", "gptj", "half") else table.layout
    return describe_axes(table.mrope_composition, table.mrope_section or (), len(table.inv_freq), layout,
                         served.axes, names=served.axis_names)
