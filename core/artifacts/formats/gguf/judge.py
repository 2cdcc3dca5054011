"""Judging a GGUF: layer by layer, does each block rotate where the config says, with the table of
its layer type, as llama.cpp's rules rebuild it? :class:`LlamaCppRules` is what llama.cpp does at
run time that the tables alone do not say: one table at every length up to n_ctx, the file's own
``freq_base``, and no position streams without ``rope.dimension_sections``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ....contract.scheme import plain_inv_freq
from ....errors import ArgumentError
from ....tables.table import ModelRope, RopeTable
from ...judge import Layers, judge_table, judge_tables
from ...report import AuditScope, Judgement, LayerEntry, TableReport, worst
from ...rules import Candidate, Rules
from ...served import ServedArtifact, ServedTable

__all__ = ["LlamaCppRules", "judge_gguf"]


class LlamaCppRules(Rules):
    """llama.cpp's run-time rules for the tables of one GGUF."""

    def __init__(self, artifact: ServedArtifact) -> None:
        self.artifact = artifact

    def comparisons(self, table: RopeTable, served: ServedTable) -> list[tuple[str, RopeTable]] | None:
        """llama.cpp serves one table at every length up to n_ctx; a seq-len-dependent declaration
        changes past ``switch_at``. Every length the context allows must get the declared table."""
        if table.switch_at is None:
            return None
        n_ctx = int(self.artifact.engine.get("n_ctx") or 0)
        wanted = [(f"seq_len <= {min(n_ctx, table.switch_at) if n_ctx else table.switch_at}", table)]
        if n_ctx > table.switch_at:
            wanted.append((f"seq_len {n_ctx}", table.at(n_ctx)))
        return wanted

    def composition(self, table: RopeTable, served: ServedTable) -> str | None:
        """A multimodal declaration that llama.cpp rotates by one position per token."""
        if table.mrope_section is None:
            return None
        return (f"llama.cpp rotates every pair by the token's one position (ggml_rope_ext: no "
                f"rope.dimension_sections turning ggml_rope_multi on) where the model's code composes "
                f"{'interleaved ' if table.mrope_composition == 'interleaved' else ''}sections "
                f"{list(table.mrope_section)}")

    def candidates(self, table: RopeTable, served: ServedTable) -> Iterator[Candidate]:
        """Plain RoPE at the file's own ``freq_base`` for the set ``served`` belongs to (llama.cpp's
        default 10000 when the converter wrote none)."""
        caches = self.artifact.engine.get("caches", {})
        index = next((i for i, table_ in enumerate(self.artifact.tables) if table_ is served), None)
        if index is None or index >= len(caches):
            return
        base = float(list(caches.values())[index]["freq_base"])
        if base == table.geometry.theta:
            return
        note = "" if self.artifact.engine.get("freq_base_written", True) else \
            " (rope.freq_base absent: llama.cpp's default)"
        yield Candidate(f"plain RoPE at the file's freq_base {base:g}{note}, not the declared rope_theta "
                        f"{table.geometry.theta:g}", plain_inv_freq(base, table.rotary_dim, len(table.inv_freq)))

    def explain(self, table: RopeTable, served: ServedTable) -> str | None:
        """A longrope regime chosen by n_ctx, not by the sequence length."""
        if served.regime is None:
            return None
        engine = self.artifact.engine
        return (f"{table.rope_type}'s {served.regime} factors at every length up to n_ctx {engine.get('n_ctx')}: "
                f"llama.cpp's n_ctx rule (it pads n_ctx to a multiple of 256 and compares it with "
                f"original_context_length {engine.get('original_context_length')}, not the sequence length)")


def judge_gguf(model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
    """The GGUF's tables as llama.cpp serves them, layer by layer where the reader knows its plan."""
    rules = LlamaCppRules(artifact)
    if "layers" not in artifact.engine:
        return judge_tables(model, artifact, scope, rules)
    tables = dict(zip(artifact.engine.get("caches", {}), artifact.tables, strict=True))
    plan: list[dict[str, Any]] = artifact.engine["layers"]
    flags = []
    count = len(model.layer_types)
    if count and count != len(plan):
        flags.append(f"the config declares {count} layers; the GGUF's block_count is {len(plan)}")
    reports: dict[tuple[str, str], TableReport] = {}
    entries: list[LayerEntry] = []
    owners: list[str | None] = []  # per entry, the declared table's layer type (None: the layer has no RoPE)
    for layer in plan:
        entry, declared = _layer_entry(model, layer, len(plan))
        if scope.layer_type is not None and (
                declared.layer_type if declared else entry.layer_type) != scope.layer_type:
            continue
        owners.append(declared.layer_type if declared is not None else None)
        if declared is not None and layer["rotates"]:
            key = (str(layer["cache"]), declared.layer_type)
            if key not in reports:
                reports[key] = judge_table(model, declared, tables[key[0]], artifact, scope, rules)
            report = reports[key]
            cache = artifact.engine["caches"][key[0]]
            reason = (
                f"the declared {declared.layer_type} table ({declared.rope_type}) with llama.cpp's {key[0]} set "
                f"(freq_base {cache['freq_base']:g}, freq_scale {cache['freq_scale']:g})"
                if report.verdict == "match" else
                f"layer {layer['index']} ({entry.layer_type}) rotates with llama.cpp's {key[0]} set (freq_base "
                f"{cache['freq_base']:g}, freq_scale {cache['freq_scale']:g}): {report.served_as}")
            entry = LayerEntry(entry.index, entry.layer_type, entry.rotates, entry.cache, entry.rotary_dim,
                               entry.interleaved, report.verdict, reason)
        entries.append(entry)
    layers = Layers()
    for (_, name), report in reports.items():
        layers.add(name, report)
    for entry, owner in zip(entries, owners, strict=True):
        if entry.verdict == "match" or entry.layer_type is None:  # None: a layer past the config's count
            continue
        layers.mark(owner or entry.layer_type, entry.reason, no_rope=owner is None)
    verdicts = layers.verdicts() | {entry.verdict for entry in entries}
    verdict = "mismatch" if not entries else worst(verdicts)
    return Judgement(layers.reports(), tuple(entries), tuple(flags), verdict)


def _layer_entry(model: ModelRope, layer: dict[str, Any], n_layer: int) -> tuple[LayerEntry, RopeTable | None]:
    """One layer's entry before its table is compared, and the table the config declares at that
    index; when rotation alone decides, the entry has its verdict."""
    index = int(layer["index"])
    facts = (bool(layer["rotates"]), layer["cache"], layer["rotary_dim"], layer["interleaved"])
    try:
        declared = model.for_layer(index)
    except IndexError:
        return LayerEntry(index, None, *facts, "mismatch",
                          f"layer {index}: the config declares {len(model.layer_types)} layers, the GGUF {n_layer}"), \
            None
    except LookupError as error:
        raise ArgumentError("config", f"cannot tell which table layer {index} uses: {error}") from None
    name = model.layer_types[index] if index < len(model.layer_types) else (
        declared.layer_type if declared is not None else "full_attention")
    why = f" ({layer['why']})" if layer.get("why") else ""
    verdict, reason = "match", ""
    if declared is None and not layer["rotates"]:
        reason = f"no RoPE, as declared{why}"
    elif declared is None:
        verdict, reason = "mismatch", (f"layer {index} ({name}) rotates in llama.cpp (its {layer['cache']} set) but "
                                       "the config declares no RoPE on it")
    elif not layer["rotates"]:
        verdict, reason = "mismatch", (f"layer {index} ({name}) applies no RoPE in llama.cpp{why}; the config declares "
                                       f"{declared.rope_type} on it")
    return LayerEntry(index, name, *facts, verdict, reason), declared
