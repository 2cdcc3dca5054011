"""What an OpenVINO IR serves: per rotary of its graph, the baked ``inv_freq`` Const with the attention
factor its ``Multiply`` applies (a static scheme, and dynamic NTK as traced), or, where the graph keeps
the computation (longrope's switch), the cos/sin OpenVINO computes on both sides of the switch."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ....errors import ArgumentError
from ...format import DEFAULT_LENGTHS
from ...served import ServedArtifact, ServedTable
from .evaluate import evaluate_rotaries
from .ir import find_rotaries, read_graph

__all__ = ["PRODUCER", "read_openvino"]

PRODUCER = "OpenVINO IR (optimum-intel)"


def read_openvino(path: str, graph_lengths: tuple[int, ...] | None = None) -> ServedArtifact:
    """Every rotary of the IR at ``path`` (its folder or its ``.xml``)."""
    graph = read_graph(path)
    rotaries = find_rotaries(graph)
    where = os.path.basename(graph.xml)
    saved = os.path.join(os.path.dirname(graph.xml), "config.json")
    engine: dict[str, Any] = {"xml": graph.xml, "bin": graph.bin,
                              "saved_config": saved if os.path.isfile(saved) else None,
                              "rotaries": [_rotary_json(graph, rotary) for rotary in rotaries]}
    if not rotaries:
        return ServedArtifact(path, "openvino", (), PRODUCER, engine={
            **engine, "refused": f"{where} has no Cos/Sin pair: the rotary is not in this graph (its cos/sin may be "
                                 "inputs, fed by the host)"})
    tables: list[ServedTable] = []
    computed = [rotary for rotary in rotaries if rotary.inv_freq is None]
    for rotary in rotaries:
        if rotary.inv_freq is None:
            continue
        ref = rotary.inv_freq
        values = graph.value(ref).astype("float64").reshape(-1)
        tables.append(ServedTable(
            f"{where}: Const {ref.name!r} (inv_freq, {ref.element_type} at offset {ref.offset}) -> "
            f"{graph.layers[rotary.cos].name}", "inv_freq", values, "float32", magnitude=rotary.magnitude,
            layers=rotary.layers))
    if computed:
        names = {layer.id: layer.name for layer in graph.layers.values()}
        found, reason = evaluate_rotaries(graph.xml, graph.bin, computed, names, where,
                                          graph_lengths or DEFAULT_LENGTHS)
        if reason:
            return ServedArtifact(path, "openvino", (), PRODUCER, engine={**engine, "refused": reason})
        tables.extend(found)
    return ServedArtifact(path, "openvino", tuple(tables), PRODUCER, engine=engine)


def _rotary_json(graph: Any, rotary: Any) -> dict[str, Any]:
    """A rotary as the audit's ``engine`` shows it (and the repair finds its constants again)."""
    found: dict[str, Any] = {"cos": graph.layers[rotary.cos].name, "sin": graph.layers[rotary.sin].name,
                             "pairs": rotary.pairs, "layers": list(rotary.layers),
                             "attention_factor": rotary.magnitude if rotary.factors else None}
    if rotary.inv_freq is not None:
        found["inv_freq"] = rotary.inv_freq.name
    if rotary.select is not None:
        threshold = graph.value(rotary.select["threshold"]).reshape(-1)
        if threshold.size != 1 or not np.isfinite(threshold[0]) or abs(float(threshold[0])) > 2 ** 62:
            name = rotary.select["threshold"].name
            raise ArgumentError("served", f"{graph.xml}: longrope's threshold Const {name!r} "
                                f"holds {threshold[:4].tolist()}; one finite integer is valid")
        found["switch"] = {"threshold": int(threshold[0]),
                           **{key: ref.name for key, ref in rotary.select.items()}}
    if rotary.inv_freq is None and rotary.select is None:
        found["computed"] = "the frequencies are computed in the graph"
    return found
