"""The RoPE tables an ONNX model bakes (onnxruntime-genai packs and the like). Needs ``ropekit[onnx]``.

Where producers put them (checked on onnxruntime-genai 0.18's model builder): graph initializers
``cos_cache``/``sin_cache`` of shape ``[positions, rotary_dim / 2]`` (one column per pair, the
attention factor multiplied in, float32 or float16); for longrope, ``Constant`` nodes
``cos_cache_small``/``_large`` inside the branches of an ``If`` node (short table ``[original, .]``,
long table ``[max, .]``), or on DirectML one concatenated initializer ``[original + max, .]``, short
rows first; Gemma-3's ``cos_cache_global``/``_local``; and a plain ``inv_freq`` initializer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from ....errors import ArgumentError, MissingDependencyError
from ...served import MAX_ARRAY_BYTES, ServedArtifact, ServedTable, check_regular_file
from .wiring import OnnxStructureError, read_wiring

__all__ = ["CACHE_NAME", "LAYER_TYPES", "load_external", "onnx_module", "read_onnx", "table_array", "tensors"]

CACHE_NAME = re.compile(r"(?:^|[/_.])(cos|sin)_cache(?:_(small|large|global|local))?$")
"""A builder's cos/sin cache name: which of the two, and the suffix naming its regime or layer type."""
LAYER_TYPES = {"global": "full_attention", "local": "sliding_attention"}
"""The layer type a cache's suffix names (Gemma-3's global and local caches)."""
_REGIMES = {"small": "short", "large": "long"}


def onnx_module() -> Any:
    """The ``onnx`` package (:class:`~ropekit.errors.MissingDependencyError` naming the extra without it)."""
    try:
        import onnx
    except ImportError as error:
        raise MissingDependencyError(
            f"reading ONNX models needs the onnx package: pip install 'ropekit[onnx]' ({error})"
        ) from error
    return onnx


def read_onnx(path: str, *, graph_lengths: tuple[int, ...] | None = None) -> ServedArtifact:
    """The tables in an ONNX model file, or in the ``model.onnx`` of a pack directory: baked caches
    and ``inv_freq`` initializers, the wiring of every attention layer, and, for a graph that
    keeps no table but computes its rotary, that rotary evaluated at ``graph_lengths``
    (:mod:`ropekit.artifacts.onnx_graph`)."""
    model_path = _model_file(path)
    check_regular_file(model_path, "served")
    onnx = onnx_module()
    try:
        model = onnx.load(model_path, load_external_data=False)
    except Exception as error:  # protobuf errors, truncated files
        raise ArgumentError("served", f"{model_path}: not a readable ONNX model: {type(error).__name__}: "
                            f"{error}") from None
    try:
        check_text(model.graph, onnx)
        load_external(model, model_path, onnx)
        return _read(model, model_path, onnx, graph_lengths)
    except OnnxStructureError as error:
        raise ArgumentError("served", f"{model_path}: {error}") from None


def _read(model: Any, model_path: str, onnx: Any, graph_lengths: tuple[int, ...] | None) -> ServedArtifact:
    found: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}
    for where, name, tensor in tensors(model.graph, "graph", onnx):
        match = CACHE_NAME.search(name)
        if name.endswith("inv_freq"):  # every one is a table of its own (per-layer exports carry several)
            values = table_array(tensor, f"{where}:{name}", onnx)
            found[(where, name, None)] = {"inv_freq": values, "dtype": _dtype_name(tensor, onnx), "name": name}
            continue
        if match is None:
            continue
        which, suffix = match.group(1), match.group(2)
        # cos and sin pair up by the rest of their name, so two cache pairs in one graph stay two
        stem = name[: match.start(1)] + "*" + name[match.end(1) :]
        key = (f"{_scope(where)}:{stem}", LAYER_TYPES.get(suffix or ""), _REGIMES.get(suffix or ""))
        entry = found.setdefault(key, {})
        entry[which] = table_array(tensor, f"{where}:{name}", onnx)
        entry["dtype"] = _dtype_name(tensor, onnx)
        entry.setdefault("names", []).append(f"{where}:{name}")
    tables = []
    for (scope, layer_type, regime), entry in found.items():  # scope: where the table lives
        if "inv_freq" in entry:
            tables.append(ServedTable(f"{entry['name']} ({scope})", "inv_freq", entry["inv_freq"], entry["dtype"],
                                      angles="exact"))
            continue
        if "cos" not in entry or "sin" not in entry:
            raise ArgumentError("served", f"{model_path}: found {entry['names']} but not its cos/sin partner")
        cos, sin = entry["cos"], entry["sin"]
        if cos.ndim != 2 or cos.shape != sin.shape or cos.shape[0] == 0:
            raise ArgumentError("served", f"{model_path}: cos/sin caches of shapes {cos.shape} and {sin.shape}")
        tables.append(ServedTable(", ".join(entry["names"]), "cache", cos, entry["dtype"], sin=sin,
                                  layer_type=layer_type, regime=regime))
    producer = " ".join(_text(part) for part in (model.producer_name, model.producer_version) if part)
    widths = _cache_widths(model.graph, onnx)
    wiring = tuple(read_wiring(model.graph, widths, onnx))
    engine: dict[str, Any] = {}
    if all(table.kind == "inv_freq" for table in tables):  # no baked cache: what the graph computes, if it does
        from ...format import DEFAULT_LENGTHS
        from .graph import graph_rotary

        evaluated, reason = graph_rotary(model, onnx, os.path.basename(model_path), graph_lengths or DEFAULT_LENGTHS)
        if reason:  # the graph computes its rotary but it cannot be run: an inv_freq buffer beside it proves nothing
            if tables:
                reason += (f" (its {', '.join(table.where for table in tables)} is not audited in its place: the "
                           "graph serves what it computes, which need not be that buffer)")
            tables = []
            engine["refused"] = reason
        elif evaluated:  # an exported inv_freq buffer (original_inv_freq, say) need not be what is applied
            tables = evaluated
            engine["graph_rotary"] = ("no baked table: the rotary the graph computes, evaluated with onnxruntime at "
                                      f"{sorted({table.seq_len or 0 for table in evaluated})} positions")
    return ServedArtifact(model_path, "onnx", tuple(tables), producer=producer, wiring=wiring, engine=engine)


_FLOAT_TYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
"""ONNX element types a table may be stored in (FLOAT, FLOAT16, DOUBLE, BFLOAT16)."""


def table_array(tensor: Any, where: str, onnx: Any) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A cos/sin cache or ``inv_freq`` tensor as float64, its element type and dims checked against its data
    first (:class:`OnnxStructureError` naming the tensor otherwise)."""
    from onnx import numpy_helper

    kind = int(tensor.data_type)
    if kind not in _FLOAT_TYPES:
        raise OnnxStructureError(f"tensor {where}: element type {kind} "
                                 f"({_TYPE_NAMES.get(kind, 'undefined or unknown')}); a RoPE table is one of "
                                 f"{', '.join(_FLOAT_TYPES.values())}")
    dims = [int(size) for size in tensor.dims]
    count = 1
    for size in dims:
        count *= max(size, 0)
    if any(size < 0 for size in dims) or count * 8 > MAX_ARRAY_BYTES:
        raise OnnxStructureError(f"tensor {where}: dims {dims}; non-negative dims of at most {MAX_ARRAY_BYTES} "
                                 "bytes are valid")
    try:
        values = numpy_helper.to_array(tensor)
    except Exception as error:  # dims that do not match the data, a data field of the wrong kind
        raise OnnxStructureError(f"tensor {where}: dims {dims} ({_FLOAT_TYPES[kind]}) do not match its data "
                                 f"({type(error).__name__}); a tensor's data holds exactly its dims' elements") \
            from None
    if values.size != count:
        raise OnnxStructureError(f"tensor {where}: dims {dims} but {values.size} values")
    return np.asarray(values, dtype=np.float64).reshape(dims)


_TYPE_NAMES = {0: "UNDEFINED", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
               9: "BOOL", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64", 15: "COMPLEX128"}


def _text(value: str | bytes) -> str:
    """A free-text field (the producer's name): protobuf hands it back as bytes when it is not UTF-8."""
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def check_text(graph: Any, onnx: Any) -> None:
    """Every name the reader matches (tensors, nodes, their inputs and outputs, attributes, external data keys) is
    text: protobuf hands a string field that is not UTF-8 back as bytes, refused here by where it is."""
    stack = [(graph, "graph")]
    while stack:
        current, where = stack.pop()
        for tensor in current.initializer:
            _text_fields(tensor, where)
        for node in current.node:
            names = [node.name, node.op_type, node.domain, *node.input, *node.output]
            if not all(isinstance(name, str) for name in names):
                raise OnnxStructureError(f"{where}: node {names[0]!r}: a name, input or output that is not UTF-8 "
                                         "text; ONNX strings are UTF-8")
            for attribute in node.attribute:
                if not isinstance(attribute.name, str):
                    raise OnnxStructureError(f"{where}: node {node.name!r}: attribute name {attribute.name!r} is not "
                                             "UTF-8 text")
                if attribute.HasField("t"):
                    _text_fields(attribute.t, f"{where}/{node.name}")
                if attribute.type == onnx.AttributeProto.GRAPH:
                    stack.append((attribute.g, f"{where}/{node.name}.{attribute.name}"))
                for index, subgraph in enumerate(attribute.graphs):
                    stack.append((subgraph, f"{where}/{node.name}.{attribute.name}[{index}]"))


def _text_fields(tensor: Any, where: str) -> None:
    fields = [tensor.name, *(part for entry in tensor.external_data for part in (entry.key, entry.value))]
    if not all(isinstance(field, str) for field in fields):
        raise OnnxStructureError(f"{where}: tensor {fields[0]!r}: a name or external-data entry that is not UTF-8 "
                                 "text; ONNX strings are UTF-8")


def load_external(model: Any, model_path: str, onnx: Any) -> None:
    """Every tensor's external data read into it, bounded: each ``location`` a regular file inside the model's
    folder, each ``offset``/``length`` inside that file and equal to what the tensor's dims need, and no more
    bytes read in all than the data files hold (a file naming one region for every tensor cannot multiply
    memory). :class:`OnnxStructureError` naming the tensor and key otherwise."""
    folder = os.path.dirname(os.path.abspath(model_path))
    root = os.path.realpath(folder)
    sizes: dict[str, int] = {}
    total = 0
    for where, name, tensor in tensors(model.graph, "graph", onnx):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        what = f"tensor {where}:{name} external data"
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        if not location or "\0" in location or os.path.isabs(location) or ".." in location.replace(
                "\\", "/").split("/"):
            raise OnnxStructureError(f"{what}: location {location!r}; a file name inside the model's folder is valid")
        file = os.path.realpath(os.path.join(folder, location))
        if os.path.commonpath([root, file]) != root:
            raise OnnxStructureError(f"{what}: location {location!r} leads outside the model's folder")
        if file not in sizes:
            try:
                sizes[file] = check_regular_file(file, "served").st_size
            except ArgumentError as error:
                raise OnnxStructureError(f"{what}: location {location!r}: {error.problem}") from None
        size = sizes[file]
        try:
            offset = int(entries.get("offset", "0"))
            length = int(entries.get("length", str(size - offset)))
        except ValueError:
            raise OnnxStructureError(f"{what}: offset {entries.get('offset')!r} / length {entries.get('length')!r}; "
                                     "non-negative integers are valid") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise OnnxStructureError(f"{what}: {length} bytes at offset {offset} of {location!r}, which has {size}; "
                                     "the data must lie inside the file")
        total += length
        if total > sum(sizes.values()):
            raise OnnxStructureError(f"{what}: the tensors name {total} bytes in all, more than their data files hold "
                                     f"({sum(sizes.values())}); each byte is read once")
        with open(file, "rb") as handle:
            handle.seek(offset)
            tensor.raw_data = handle.read(length)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _cache_widths(graph: Any, onnx: Any) -> dict[str, int]:
    """Columns (pairs) of every cos cache by tensor name, and by the name an ``If`` that picks
    between ``cos_cache_small``/``_large`` gives its output (``cos_cache``)."""
    widths: dict[str, int] = {}
    for _, name, tensor in tensors(graph, "graph", onnx):
        match = CACHE_NAME.search(name)
        if match is None or match.group(1) != "cos" or len(tensor.dims) != 2:
            continue
        widths[name] = int(tensor.dims[1])
        if match.group(2) in _REGIMES:
            widths.setdefault(name[: match.end(1)] + "_cache", int(tensor.dims[1]))
    return widths


def _model_file(path: str) -> str:
    if not os.path.isdir(path):
        return path
    candidates = sorted(name for name in os.listdir(path) if name.endswith(".onnx"))
    if "model.onnx" in candidates:
        return os.path.join(path, "model.onnx")
    if len(candidates) == 1:
        return os.path.join(path, candidates[0])
    if not candidates:
        raise ArgumentError("served", f"{path}: a directory without an .onnx model (give a pack, an .onnx, a .gguf "
                            "or an array file)")
    raise ArgumentError("served", f"{path}: several ONNX models ({', '.join(candidates)}); name one")


def _scope(where: str) -> str:
    """A table's scope: the subgraph path, so a pack's main graph and each If branch are told apart."""
    return where.rsplit(":", 1)[0]


def _dtype_name(tensor: Any, onnx: Any) -> str:
    return str(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))


def tensors(graph: Any, where: str, onnx: Any) -> Iterator[tuple[str, str, Any]]:
    """``(location, name, TensorProto)`` of every initializer and Constant, in subgraphs too."""
    for tensor in graph.initializer:
        yield where, tensor.name, tensor
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value" and node.output:
                    yield where, node.output[0], attribute.t
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from tensors(attribute.g, f"{where}/{node.name}.{attribute.name}", onnx)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for index, subgraph in enumerate(attribute.graphs):
                    yield from tensors(subgraph, f"{where}/{node.name}.{attribute.name}[{index}]", onnx)
