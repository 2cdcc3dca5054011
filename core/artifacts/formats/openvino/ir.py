"""Reading an OpenVINO IR (``openvino_model.xml`` and its ``.bin``) without OpenVINO: the XML's layers
and edges (ElementTree), each ``Const``'s bytes at its offset in the ``.bin`` (numpy).

optimum-intel traces transformers' rotary module into the graph: the (already scaled) ``inv_freq`` is
an f32 ``Const`` (``__module.model.rotary_emb/aten::to/Convert``, shape ``[1, d/2, 1]``) feeding
``MatMul -> Transpose -> Concat -> Cos/Sin``; a scalar ``Multiply`` after Cos and Sin is the attention
factor. Longrope keeps both factor vectors as ``Const``s behind a ``Select`` on ``Greater(max(position_ids)
+ 1, threshold)``, then ``1 / (factors * base ** (2i / d))``. Each rotary's Cos/Sin are attached to the
decoder layers whose nodes (``__module.model.layers.N...``) read them.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from ....errors import ArgumentError
from ...served import MAX_ARRAY_BYTES, check_regular_file

__all__ = ["ConstRef", "IrGraph", "Rotary", "find_rotaries", "ir_paths", "read_graph"]

MAX_XML_BYTES = 1 << 26
"""The largest ``.xml`` read (an 8B model's is a few MB; ElementTree holds about 10 times its size)."""
_DTYPES = {"f32": "<f4", "f16": "<f2", "f64": "<f8", "i64": "<i8", "i32": "<i4", "u8": "u1", "i8": "i1",
           "boolean": "u1", "u64": "<u8", "u32": "<u4"}
_LAYER = re.compile(r"(?<![A-Za-z0-9_])layers\.(\d+)(?![0-9])")
_LAYER_HOPS = 8
_PASS_THROUGH = frozenset({"Unsqueeze", "Squeeze", "Reshape", "Convert", "Broadcast", "Transpose", "Concat"})


@attrs.frozen
class ConstRef:
    """One ``Const`` of the IR: its layer ``id``, friendly ``name``, ``element_type``, ``shape`` and the
    bytes it reads in the ``.bin`` (``offset``, ``size``)."""

    id: str
    name: str
    element_type: str
    shape: tuple[int, ...]
    offset: int
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "element_type": self.element_type, "shape": list(self.shape),
                "offset": self.offset, "size": self.size}


@attrs.frozen
class Layer:
    id: str
    name: str
    type: str
    data: dict[str, str]
    dims: tuple[int, ...] | None
    """The first output's dims (``-1``: dynamic), when stated."""


@attrs.define
class IrGraph:
    """The IR's layers, edges (``inputs[(layer, port)]`` is the producing layer) and the ``.bin``."""

    xml: str
    bin: str
    layers: dict[str, Layer]
    inputs: dict[tuple[str, int], str]
    consumers: dict[str, list[str]]
    weights: bytes

    def const(self, layer: str) -> ConstRef:
        found = self.layers[layer]
        data = found.data
        shape = tuple(int(part) for part in data.get("shape", "").split(",") if part.strip())
        return ConstRef(found.id, found.name, data.get("element_type", ""), shape, int(data.get("offset", 0)),
                        int(data.get("size", 0)))

    def value(self, ref: ConstRef) -> np.ndarray[Any, Any]:
        dtype = _DTYPES.get(ref.element_type)
        if dtype is None:
            raise ArgumentError("served", f"{self.xml}: Const {ref.name!r} is {ref.element_type}, not a number type")
        if ref.offset < 0 or ref.offset + ref.size > len(self.weights):
            raise ArgumentError("served", f"{self.xml}: Const {ref.name!r} reads bytes {ref.offset}.."
                                f"{ref.offset + ref.size} past the end of {os.path.basename(self.bin)} "
                                f"({len(self.weights)} bytes)")
        count = ref.size // np.dtype(dtype).itemsize
        values = np.frombuffer(self.weights, dtype=dtype, count=count, offset=ref.offset)
        return values.reshape(ref.shape) if int(np.prod(ref.shape, dtype=np.int64)) == count else values

    def input_layers(self, layer: str) -> list[str]:
        """The layers feeding ``layer``, by port."""
        return [self.inputs[key] for key in sorted(key for key in self.inputs if key[0] == layer)]

    def ancestors(self, layer: str) -> list[str]:
        """Every layer ``layer`` depends on (itself excluded), nearest first."""
        found: list[str] = []
        seen = {layer}
        frontier = [layer]
        while frontier:
            following = []
            for current in frontier:
                for source in self.input_layers(current):
                    if source not in seen:
                        seen.add(source)
                        found.append(source)
                        following.append(source)
            frontier = following
        return found

    def sharing(self, ref: ConstRef) -> list[str]:
        """Other Consts reading any of ``ref``'s bytes (OpenVINO shares equal constants' bytes)."""
        return [layer.name for layer in self.layers.values() if layer.type == "Const" and layer.id != ref.id and
                _overlaps(self.const(layer.id), ref)]


def _overlaps(one: ConstRef, other: ConstRef) -> bool:
    return one.size > 0 and other.size > 0 and one.offset < other.offset + other.size and \
        other.offset < one.offset + one.size


def ir_paths(path: str) -> tuple[str, str]:
    """``(xml, bin)`` of an IR given as its folder (``openvino_model.xml`` in it) or its ``.xml``."""
    xml = os.path.join(path, "openvino_model.xml") if os.path.isdir(path) else path
    check_regular_file(xml, "served")
    weights = os.path.splitext(xml)[0] + ".bin"
    if not os.path.isfile(weights):
        raise ArgumentError("served", f"{xml}: no {os.path.basename(weights)} beside it (the IR's constants)")
    return xml, weights


def read_graph(path: str) -> IrGraph:
    """The IR at ``path`` (its folder or its ``.xml``), parsed."""
    xml, weights = ir_paths(path)
    if os.path.getsize(xml) > MAX_XML_BYTES:
        raise ArgumentError("served", f"{xml}: larger than {MAX_XML_BYTES} bytes")
    size = check_regular_file(weights, "served").st_size
    if size > 4 * MAX_ARRAY_BYTES:
        raise ArgumentError("served", f"{weights}: {size} bytes; read the rope constants from a smaller IR")
    try:
        root = ElementTree.parse(xml).getroot()
    except (ElementTree.ParseError, OSError) as error:
        raise ArgumentError("served", f"{xml}: cannot read as an OpenVINO IR: {error}") from None
    if root.tag != "net" or root.find("layers") is None:
        raise ArgumentError("served", f"{xml}: not an OpenVINO IR (no <net><layers>)")
    layers: dict[str, Layer] = {}
    for element in root.iterfind("layers/layer"):
        data = element.find("data")
        port = element.find("output/port")
        ident = element.get("id", "")
        where = f"layer id={ident!r} ({element.get('name', '')!r})"
        if ident in layers:
            raise ArgumentError("served", f"{xml}: {where} appears twice; each layer id is unique")
        dims = tuple(_integer(dim.text or "-1", xml, f"{where} output dim", -1) for dim in port.iterfind("dim")) \
            if port is not None else None
        layers[ident] = Layer(ident, element.get("name", ""), element.get("type", ""),
                              dict(data.attrib) if data is not None else {}, dims)
        if layers[ident].type == "Const":
            _check_const(layers[ident].data, xml, where, size)
    inputs: dict[tuple[str, int], str] = {}
    consumers: dict[str, list[str]] = {}
    for number, edge in enumerate(root.iterfind("edges/edge")):
        source, target = edge.get("from-layer", ""), edge.get("to-layer", "")
        for end, ident in (("from-layer", source), ("to-layer", target)):
            if ident not in layers:
                raise ArgumentError("served", f"{xml}: edge #{number} {end}={ident!r} names no layer; an edge joins "
                                    "two layers of <layers>")
        port_number = _integer(edge.get("to-port", "0"), xml, f"edge #{number} to-port", 0)
        inputs[(target, port_number)] = source
        consumers.setdefault(source, []).append(target)
    with open(weights, "rb") as file:
        content = file.read()
    return IrGraph(xml, weights, layers, inputs, consumers, content)


def _integer(text: str, xml: str, where: str, least: int) -> int:
    """An integer attribute or dim of the XML (at least ``least``), refused by where it is otherwise."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ArgumentError("served", f"{xml}: {where} is {text[:40]!r}; an integer is valid") from None
    if value < least:
        raise ArgumentError("served", f"{xml}: {where} is {value}; at least {least} is valid")
    return value


def _check_const(data: dict[str, str], xml: str, where: str, size: int) -> None:
    """A ``Const``'s shape, offset and size: integers, and its bytes inside the ``.bin``."""
    for part in data.get("shape", "").split(","):
        if part.strip():
            _integer(part, xml, f"{where} shape", 0)
    offset = _integer(data.get("offset", "0"), xml, f"{where} offset", 0)
    length = _integer(data.get("size", "0"), xml, f"{where} size", 0)
    if offset + length > size:
        raise ArgumentError("served", f"{xml}: {where} reads bytes {offset}..{offset + length}, past the end of the "
                            f".bin ({size} bytes); a Const's bytes lie inside it")


@attrs.frozen
class Rotary:
    """One rotary of the graph: its Cos and Sin (and the layers applying them after any attention factor,
    ``cos_out``/``sin_out``), ``pairs``, the ``inv_freq`` Const when the frequencies are one constant,
    the attention-factor Consts and their value, longrope's ``select`` (its threshold and factor-vector
    Consts) and the decoder ``layers`` that read it."""

    cos: str
    sin: str
    cos_out: str
    sin_out: str
    pairs: int
    inv_freq: ConstRef | None
    factors: tuple[ConstRef, ...]
    magnitude: float
    select: dict[str, ConstRef] | None
    layers: tuple[int, ...]

    def constants(self) -> list[ConstRef]:
        """Every rope Const of this rotary."""
        return [*([self.inv_freq] if self.inv_freq else []), *self.factors, *(self.select or {}).values()]


def _scalar_factor(graph: IrGraph, layer: str) -> tuple[str, ConstRef | None, float]:
    """Past ``layer`` (a Cos or Sin): the Multiply by a scalar f32 Const it feeds alone, if any."""
    following = graph.consumers.get(layer, [])
    if len(following) == 1 and graph.layers[following[0]].type == "Multiply":
        multiply = following[0]
        for source in graph.input_layers(multiply):
            found = graph.layers[source]
            if source != layer and found.type == "Const" and found.data.get("element_type") == "f32":
                ref = graph.const(source)
                value = graph.value(ref)
                if value.size == 1:
                    return multiply, ref, float(value.reshape(-1)[0])
    return layer, None, 1.0


def _layers_reading(graph: IrGraph, start: str) -> tuple[int, ...]:
    """The decoder layers whose nodes read ``start`` (through shared nodes outside any layer, a few hops)."""
    found: set[int] = set()
    frontier, seen = [start], {start}
    for _ in range(_LAYER_HOPS):
        following = []
        for current in frontier:
            for target in graph.consumers.get(current, []):
                if target in seen:
                    continue
                seen.add(target)
                match = _LAYER.search(graph.layers[target].name)
                if match is not None and graph.layers[target].type not in _PASS_THROUGH:
                    found.add(int(match.group(1)))
                else:  # a shape op (OpenVINO shares layer 0's Unsqueeze with every layer): follow it
                    following.append(target)
        frontier = following
    return tuple(sorted(found))


def find_rotaries(graph: IrGraph) -> list[Rotary]:
    """Every Cos/Sin pair sharing one angle input, with its constants and consuming layers."""
    by_angle: dict[str, dict[str, str]] = {}
    for layer in graph.layers.values():
        if layer.type in ("Cos", "Sin"):
            sources = graph.input_layers(layer.id)
            if sources:
                by_angle.setdefault(sources[0], {})[layer.type] = layer.id
    found = []
    for pair in by_angle.values():
        if "Cos" not in pair or "Sin" not in pair:
            continue
        cos, sin = pair["Cos"], pair["Sin"]
        width = (graph.layers[cos].dims or (0,))[-1]
        pairs = width // 2 if width and width > 0 else 0
        cos_out, cos_factor, cos_value = _scalar_factor(graph, cos)
        sin_out, sin_factor, sin_value = _scalar_factor(graph, sin)
        factors = tuple(ref for ref in (cos_factor, sin_factor) if ref is not None)
        magnitude = cos_value if cos_value == sin_value else float("nan")
        ancestors = graph.ancestors(cos)
        select = _select(graph, ancestors)
        vectors = [graph.const(layer) for layer in ancestors if graph.layers[layer].type == "Const"
                   and graph.layers[layer].data.get("element_type") == "f32" and pairs
                   and graph.const(layer).size == 4 * pairs]
        inv_freq = vectors[0] if select is None and len(vectors) == 1 else None
        found.append(Rotary(cos, sin, cos_out, sin_out, pairs, inv_freq, factors, magnitude, select,
                            _layers_reading(graph, cos_out)))
    return found


def _select(graph: IrGraph, ancestors: Iterable[str]) -> dict[str, ConstRef] | None:
    """Longrope's switch: ``Select(Greater(length, threshold), long, short)`` with Const operands."""
    for layer in ancestors:
        if graph.layers[layer].type != "Select":
            continue
        condition, long, short = ([*graph.input_layers(layer), "", "", ""])[:3]
        if graph.layers.get(condition) is None or graph.layers[condition].type != "Greater":
            continue
        threshold = [source for source in graph.input_layers(condition) if graph.layers[source].type == "Const"]
        if not threshold or any(graph.layers.get(end) is None or graph.layers[end].type != "Const"
                                for end in (long, short)):
            continue
        found = {"threshold": graph.const(threshold[0]), "long": graph.const(long), "short": graph.const(short)}
        power = [source for source in graph.consumers.get(layer, []) if graph.layers[source].type == "Multiply"]
        for multiply in power:
            for source in graph.input_layers(multiply):
                if source != layer and graph.layers[source].type == "Const":
                    found["base_powers"] = graph.const(source)
        return found
    return None
