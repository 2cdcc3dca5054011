"""Rotary kept in an ONNX graph (optimum-onnx, ``torch.onnx`` exports): located, cut out and run.

Such graphs hold no cos/sin cache: ``inv_freq`` is an unnamed constant feeding
``MatMul -> Cos/Sin`` and an attention factor is a scalar ``Mul``. What they serve can only be
measured: the Cos and Sin that feed the attention's rotation are found (after any scalar ``Mul``,
``Cast`` or ``Unsqueeze``), the part of the graph they depend on is cut out (position inputs,
masks, the constants), and onnxruntime evaluates it at the lengths asked for. A traced export
freezes seq-len branches at its dummy length (a Phi-3 longrope export serves the short factors at
every length), which is exactly what running it at lengths on both sides of the switch shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ...served import ServedTable, output_rows

__all__ = ["graph_rotary"]

"""Lengths a graph's rotary is evaluated at when the declaration names no switch."""
_PASS_THROUGH = frozenset({"Cast", "Unsqueeze", "Identity"})
_LAYER = re.compile(r"(?<![A-Za-z0-9_])layers\.(\d+)(?![0-9])")
_SCOPES = ("pkg.torch.onnx.name_scopes", "namespace")
"""Node metadata where ``torch.onnx``'s dynamo exporter records the module a node came from."""
_LAYER_HOPS = 8


def _constant_names(graph: Any) -> set[str]:
    names = {tensor.name for tensor in graph.initializer}
    names.update(node.output[0] for node in graph.node if node.op_type == "Constant" and node.output)
    return names


def _consumers(graph: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _applied(start: str, consumers: dict[str, list[Any]], constants: set[str]) -> str:
    """Follow ``start`` through scalar ``Mul`` (the attention factor), ``Cast`` and ``Unsqueeze``
    while it has one consumer: the tensor the rotation multiplies by."""
    current = start
    while len(consumers.get(current, [])) == 1:
        node = consumers[current][0]
        if node.op_type in _PASS_THROUGH or (node.op_type == "Mul" and any(
                name in constants for name in node.input if name != current)):
            current = node.output[0]
            continue
        break
    return current


def _pairs(graph: Any) -> list[tuple[str, str]]:
    """``(cos tensor, sin tensor)`` the rotation applies, paired by the angle tensor they share."""
    constants, consumers = _constant_names(graph), _consumers(graph)
    by_angle: dict[str, dict[str, str]] = {}
    for node in graph.node:
        if node.op_type in ("Cos", "Sin") and node.input:
            by_angle.setdefault(node.input[0], {})[node.op_type] = _applied(node.output[0], consumers, constants)
    return [(found["Cos"], found["Sin"]) for found in by_angle.values() if "Cos" in found and "Sin" in found]


def _layer_of(node: Any) -> int | None:
    """The decoder layer a node belongs to: ``layers.N`` in its name (``/model/layers.0/...``) or
    in the module scope the exporter recorded in its metadata."""
    texts = [node.name, *(prop.value for prop in node.metadata_props if prop.key in _SCOPES)]
    for text in texts:
        match = _LAYER.search(text)
        if match is not None:
            return int(match.group(1))
    return None


def _consuming_layers(tensors: Iterable[str], consumers: Mapping[str, list[Any]]) -> tuple[int, ...]:
    """The layers whose nodes read ``tensors`` (followed through nodes outside any layer, such as a
    shared ``Unsqueeze``, a few hops at most); empty when no consumer names its layer."""
    found: set[int] = set()
    frontier, seen = list(tensors), set()
    for _ in range(_LAYER_HOPS):
        following = []
        for name in frontier:
            for node in consumers.get(name, ()):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                index = _layer_of(node)
                if index is None:
                    following.extend(node.output)
                else:
                    found.add(index)
        frontier = following
        if not frontier:
            break
    return tuple(sorted(found))


def _cut(graph: Any, outputs: Sequence[str], onnx: Any) -> Any:
    """A model of only the nodes ``outputs`` depend on, with the graph inputs they read."""
    producer = {name: node for node in graph.node for name in node.output}
    inputs = {value.name: value for value in graph.input}
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    needed_nodes: list[Any] = []
    seen: set[str] = set()
    used_inputs: list[Any] = []
    used_initializers: list[Any] = []
    stack = list(outputs)
    while stack:
        name = stack.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        if name in inputs:
            used_inputs.append(inputs[name])
        elif name in initializers:
            used_initializers.append(initializers[name])
        elif name in producer:
            node = producer[name]
            if id(node) not in {id(n) for n in needed_nodes}:
                needed_nodes.append(node)
                stack.extend(node.input)
    order = {id(node): index for index, node in enumerate(graph.node)}
    needed_nodes.sort(key=lambda node: order[id(node)])
    return onnx.helper.make_graph(
        needed_nodes, "ropekit_rotary", used_inputs,
        [onnx.helper.make_empty_tensor_value_info(name) for name in outputs], used_initializers)


def _feeds(inputs: Iterable[Any], length: int, onnx: Any) -> dict[str, Any]:
    """Inputs for one sequence of ``length`` tokens, no past: ids 1, mask 1, positions 0..length-1."""
    feeds: dict[str, Any] = {}
    for value in inputs:
        tensor_type = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        shape = []
        for dim in tensor_type.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(int(dim.dim_value))
            else:
                label = dim.dim_param.lower()
                shape.append(0 if "past" in label else 1 if "batch" in label else length)
        name = value.name.lower()
        if "position" in name:
            feeds[value.name] = np.broadcast_to(np.arange(shape[-1] if shape else length), shape).astype(dtype)
        elif "mask" in name or "ids" in name:
            feeds[value.name] = np.ones(shape, dtype=dtype)
        else:
            feeds[value.name] = np.zeros(shape, dtype=dtype)
    return feeds


def _layout(cos: np.ndarray[Any, Any]) -> str:
    width = cos.shape[1]
    if width % 2 == 0 and np.array_equal(cos[:, : width // 2], cos[:, width // 2 :]):
        return "neox"
    if width % 2 == 0 and np.array_equal(cos[:, 0::2], cos[:, 1::2]):
        return "gptj"
    return "half"


def graph_rotary(model: Any, onnx: Any, where: str, lengths: Sequence[int]) -> tuple[list[ServedTable], str]:
    """The cos/sin the graph's rotary computes at each of ``lengths`` (one table per rotary and
    length), or ``([], reason)`` when there is none or it cannot be evaluated."""
    pairs = _pairs(model.graph)
    if not pairs:
        return [], ""
    try:
        import onnxruntime
    except ImportError:
        return [], ("the graph computes its rotary (Cos/Sin nodes) but evaluating it needs onnxruntime: "
                    "pip install 'ropekit[onnx]'")
    consumers = _consumers(model.graph)
    layers = [_consuming_layers(pair, consumers) for pair in pairs]
    outputs = [name for pair in pairs for name in pair]
    cut = onnx.helper.make_model(_cut(model.graph, outputs, onnx), opset_imports=list(model.opset_import),
                                 ir_version=model.ir_version)
    try:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(cut.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # an op onnxruntime lacks, a graph that needs more than its inputs
        return [], f"the graph's rotary (Cos/Sin nodes) could not be isolated and run: {type(error).__name__}: {error}"
    tables: list[ServedTable] = []
    for length in lengths:
        try:
            values = session.run(outputs, _feeds(cut.graph.input, length, onnx))
        except Exception as error:
            return [], f"the graph's rotary could not be evaluated at {length} positions: {type(error).__name__}: " \
                       f"{error}"
        for index, (cos_name, _) in enumerate(pairs):
            cos, sin = (np.asarray(array, dtype=np.float64) for array in values[2 * index : 2 * index + 2])
            rows = output_rows(cos, length)
            if rows is None or sin.size != cos.size:
                return [], f"the graph's rotary output {cos_name} has shape {cos.shape}, not (..., {length}, width)"
            tables.append(ServedTable(
                f"{where}: {cos_name} / {pairs[index][1]} evaluated at {length} positions", "cache", rows,
                str(values[2 * index].dtype), sin=output_rows(sin, length), layout=_layout(rows),
                seq_len=length, angles="float32", layers=layers[index]))
    return tables, ""

