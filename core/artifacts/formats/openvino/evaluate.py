"""Running the rotary an OpenVINO IR keeps in its graph (longrope's switch on the length): the Cos and Sin
that feed the attention (after the attention factor) cut out with the parameters they read, compiled by
OpenVINO on CPU in f32, and evaluated at the lengths asked for (both sides of the switch). Needs the
``openvino`` extra; everything else in this format reads the IR without it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...served import ServedTable, output_rows
from .ir import Rotary

__all__ = ["MISSING", "evaluate_rotaries"]

MISSING = ("the IR computes its rotary in the graph (longrope's Select on the length) and evaluating it needs "
           "OpenVINO: pip install 'ropekit[openvino]'")


def _parameters(outputs: Sequence[Any]) -> list[Any]:
    """The graph Parameters the ``outputs`` depend on."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    stack = [output.get_node() for output in outputs]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.get_type_name() == "Parameter":
            found[node.get_friendly_name()] = node
        stack.extend(value.get_node() for value in node.input_values())
    return list(found.values())


def _feed(parameter: Any, length: int) -> np.ndarray[Any, Any]:
    """One sequence of ``length`` tokens, no past: positions 0..length-1, ids and mask 1, anything else 0."""
    name = parameter.get_friendly_name().lower()
    shape = parameter.get_partial_shape()
    dims = []
    for index, dim in enumerate(shape):
        if dim.is_static:
            dims.append(dim.get_length())
        else:
            dims.append(1 if index == 0 else 0 if "past" in name or "key" in name or "value" in name else length)
    dtype = parameter.get_element_type().to_dtype()
    if "position" in name:
        return np.broadcast_to(np.arange(dims[-1] if dims else length), dims).astype(dtype)
    if "mask" in name or "ids" in name:
        return np.ones(dims, dtype=dtype)
    return np.zeros(dims, dtype=dtype)


def evaluate_rotaries(xml: str, weights: str, rotaries: Sequence[Rotary], names: dict[str, str], where: str,
                      lengths: Sequence[int]) -> tuple[list[ServedTable], str]:
    """The cos/sin each rotary serves at each of ``lengths`` (one cache table per rotary and length), or
    ``([], reason)``. ``names`` maps a layer id to its friendly name."""
    try:
        import openvino
    except ImportError:
        return [], MISSING
    try:
        core = openvino.Core()
        model = core.read_model(xml, weights)
        ops = {op.get_friendly_name(): op for op in model.get_ops()}
        outputs = [ops[names[layer]].output(0) for rotary in rotaries for layer in (rotary.cos_out, rotary.sin_out)]
        cut = openvino.Model(outputs, _parameters(outputs), "ropekit_rotary")
        compiled = core.compile_model(cut, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    except Exception as error:  # an op the CPU plugin lacks, a cut that needs more than its parameters
        return [], ("the IR's rotary (Cos/Sin) could not be isolated and compiled by OpenVINO: "
                    f"{type(error).__name__}: {error}")
    tables = []
    for length in lengths:
        try:
            results = compiled({parameter.get_friendly_name(): _feed(parameter, length)
                                for parameter in cut.get_parameters()})
            values = [np.asarray(results[compiled.output(index)], dtype=np.float64) for index in range(len(outputs))]
        except Exception as error:
            return [], f"the IR's rotary could not be evaluated at {length} positions: {type(error).__name__}: {error}"
        for index, rotary in enumerate(rotaries):
            cos, sin = (output_rows(array, length) for array in values[2 * index : 2 * index + 2])
            if cos is None or sin is None:
                return [], f"the IR's rotary output {names[rotary.cos_out]} has shape {values[2 * index].shape}, not " \
                           f"(..., {length}, width)"
            tables.append(ServedTable(
                f"{where}: {names[rotary.cos_out]} / {names[rotary.sin_out]} evaluated at {length} positions", "cache",
                cos, "float32", sin=sin, layout="neox", seq_len=length, angles="float32", layers=rotary.layers))
    return tables, ""

