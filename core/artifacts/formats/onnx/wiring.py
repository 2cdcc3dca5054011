"""Which layers of an ONNX pack rotate, with which cache, width and pairing, judged layer by layer.

A cache can be right while the model is wrong: onnxruntime-genai's builder wires RoPE into
SmolLM3's NoPE layers, on the shared cache. This module reads the wiring of every attention layer
of a pack and compares it with the declared per-layer plan (:meth:`~ropekit.ModelRope.for_layer`).

Read from the graph (onnxruntime's contrib ops, as onnxruntime-genai 0.18 writes them):

- ``GroupQueryAttention`` with ``do_rotary=1`` rotates with its ``cos_cache``/``sin_cache`` inputs
  (7, 8); the rotary width is twice the cache's columns; ``rotary_interleaved`` is the pairing;
  ``local_window_size > 0`` marks a sliding layer;
- ``RotaryEmbedding`` nodes (``com.microsoft``, or ONNX 23's) on a layer's query and key rotate
  with their inputs 2 and 3; ``rotary_embedding_dim`` (0: the cache's full width) and
  ``interleaved``.

A layer's index comes from its node names (``/model/layers.N/...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ....tables.table import ModelRope
from ...report import LayerEntry
from ...served import LayerWiring, RotaryWiring

__all__ = ["OnnxStructureError", "cache_layer_type", "judge_wiring", "read_wiring", "rotations"]

_LAYER = re.compile(r"(?:^|/)layers\.(\d+)/")
_ATTENTION = frozenset({"GroupQueryAttention", "MultiHeadAttention", "Attention", "SparseAttention",
                        "PagedAttention"})
_CACHE_LAYER_TYPES = {"global": "full_attention", "local": "sliding_attention"}
_ROLES = {0: "query", 1: "key"}
_ROLE_NAMES = {"query": re.compile(r"(?:^|[_/.])q(?:uery)?_?(?:rot|proj)"),
               "key": re.compile(r"(?:^|[_/.])k(?:ey)?_?(?:rot|proj)")}
_RESHAPES = frozenset({"Reshape", "Transpose", "Cast", "Identity", "Squeeze", "Unsqueeze"})
_ROLE_HOPS = 4


class OnnxStructureError(ValueError):
    """A graph whose structure no producer writes (a tensor's type or dims, a node's attribute): the message names
    the tensor or node and what would be valid; the reader turns it into the artifact's error."""


_INTEGER_ATTRIBUTES = frozenset({"local_window_size", "rotary_embedding_dim", "interleaved", "do_rotary",
                                 "rotary_interleaved"})


def _attributes(node: Any, onnx: Any) -> dict[str, Any]:
    """A node's attributes; those the wiring reads must be integers (an attribute written as a string, a float
    or a list is refused by node and name)."""
    found = {}
    for attribute in node.attribute:
        try:
            found[attribute.name] = onnx.helper.get_attribute_value(attribute)
        except Exception as error:  # an attribute of no known type
            raise OnnxStructureError(f"node {node.name!r} ({node.op_type}) attribute {attribute.name!r}: "
                                     f"{type(error).__name__}; an attribute of one of ONNX's types is valid") from None
    for name in _INTEGER_ATTRIBUTES & found.keys():
        value = found[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise OnnxStructureError(f"node {node.name!r} ({node.op_type}) attribute {name} is {value!r}; an integer "
                                     "is valid")
    return found


def read_wiring(graph: Any, widths: Mapping[str, int], onnx: Any) -> list[LayerWiring]:
    """Every attention layer of ``graph`` (the main graph), in index order. ``widths`` maps a cos
    cache's tensor name to its columns (pairs)."""
    layers: dict[int, dict[str, Any]] = {}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in graph.node:
        match = _LAYER.search(node.name)
        if match is None:
            continue
        index = int(match.group(1))
        attributes = _attributes(node, onnx)
        if node.op_type in _ATTENTION:
            entry = layers.setdefault(index, {"nodes": [], "rotary": []})
            entry["nodes"].append(node.name)
            entry["attention"] = (node, attributes)
        elif node.op_type == "RotaryEmbedding":
            entry = layers.setdefault(index, {"nodes": [], "rotary": []})
            entry["nodes"].append(node.name)
            entry["rotary"].append((node, attributes, _role(node, consumers)))
    found = []
    for index in sorted(layers):
        entry = layers[index]
        found.append(_wiring(index, entry, widths))
    return found


def _role(node: Any, consumers: Mapping[str, list[Any]]) -> str | None:
    """What a ``RotaryEmbedding`` rotates: the attention input its output reaches (0 the query, 1
    the key) through reshapes and casts, else what its name says (``q_rotary``/``k_rotary``)."""
    frontier, seen = list(node.output[:1]), set()
    for _ in range(_ROLE_HOPS):
        following = []
        for name in frontier:
            for consumer in consumers.get(name, ()):
                if consumer.op_type in _ATTENTION:
                    position = list(consumer.input).index(name)
                    if position in _ROLES:
                        return _ROLES[position]
                elif consumer.op_type in _RESHAPES and id(consumer) not in seen:
                    seen.add(id(consumer))
                    following.extend(consumer.output[:1])
        frontier = following
    last = node.name.lower().rsplit("/", 2)
    for role, pattern in _ROLE_NAMES.items():
        if any(pattern.search(part) for part in last):
            return role
    return None


def _wiring(index: int, entry: Mapping[str, Any], widths: Mapping[str, int]) -> LayerWiring:
    attention = entry.get("attention")
    sliding = None
    if attention is not None:
        window = attention[1].get("local_window_size")
        sliding = bool(isinstance(window, int) and window > 0)
    nodes = tuple(entry["nodes"])
    rotaries = []
    for node, attributes, role in entry["rotary"]:
        cache = node.input[2] if len(node.input) > 2 and node.input[2] else None
        dim = attributes.get("rotary_embedding_dim") or 0
        if not dim and cache is not None and cache in widths:
            dim = 2 * widths[cache]
        rotaries.append(RotaryWiring(node.name, role, cache, int(dim) or None,
                                     bool(attributes.get("interleaved", 0))))
    if attention is not None:
        node, attributes = attention
        if attributes.get("do_rotary", 0):
            cache = node.input[7] if len(node.input) > 7 and node.input[7] else None
            dim = 2 * widths[cache] if cache is not None and cache in widths else None
            rotaries.append(RotaryWiring(node.name, "query and key", cache, dim,
                                         bool(attributes.get("rotary_interleaved", 0))))
    if not rotaries:
        return LayerWiring(index, False, None, None, None, sliding, nodes)
    first = rotaries[0]
    return LayerWiring(index, True, first.cache, first.rotary_dim, first.interleaved, sliding, nodes,
                       tuple(rotaries))


def cache_layer_type(cache: str | None) -> str | None:
    """The layer type a cache's name says it serves (Gemma-3's ``cos_cache_global``/``_local``)."""
    if cache is None:
        return None
    for suffix, layer_type in _CACHE_LAYER_TYPES.items():
        if cache.endswith(f"_{suffix}"):
            return layer_type
    return None


def judge_wiring(model: ModelRope, wiring: Iterable[LayerWiring]) -> list[LayerEntry]:
    """One record per layer (``index``, ``layer_type``, ``rotates``, ``cache``, ``rotary_dim``,
    ``interleaved``, ``verdict``, ``reason``): ``mismatch`` where the pack's wiring is not the
    declared per-layer plan, naming the layer and what it does. Every rotation of a layer is
    judged (the query's and the key's); where they differ, the record's ``cache``,
    ``rotary_dim`` and ``interleaved`` are the first that is not the declared one."""
    records = []
    for layer in wiring:
        layer_type = model.layer_types[layer.index] if layer.index < len(model.layer_types) else None
        shown: dict[str, Any] = {"cache": layer.cache, "rotary_dim": layer.rotary_dim, "interleaved": layer.interleaved}
        try:
            declared = model.for_layer(layer.index)
        except (IndexError, LookupError) as error:
            verdict, reason = "unknown", f"the declaration cannot say what layer {layer.index} applies: {error}"
        else:
            verdict, reason = _verdict(model, layer, declared, layer_type)
            if declared is not None:
                shown = _shown(model, layer, declared)
        records.append(LayerEntry(layer.index, layer_type, layer.rotates, shown["cache"], shown["rotary_dim"],
                                  shown["interleaved"], verdict, reason))
    return records


def rotations(layer: LayerWiring) -> tuple[RotaryWiring, ...]:
    """The layer's rotations (one built from its summary when the wiring was made without them)."""
    if layer.rotaries or not layer.rotates:
        return layer.rotaries
    return (RotaryWiring(layer.nodes[0] if layer.nodes else f"layer {layer.index}", None, layer.cache,
                         layer.rotary_dim, bool(layer.interleaved)),)


def _shown(model: ModelRope, layer: LayerWiring, declared: Any) -> dict[str, Any]:
    """Per field, the first rotation's value that is not the declared one, else the first's."""
    shown: dict[str, Any] = {"cache": layer.cache, "rotary_dim": layer.rotary_dim, "interleaved": layer.interleaved}
    offending: set[str] = set()
    for rotary in rotations(layer):
        for field in _problems(model, rotary, declared).keys() - offending:
            shown[field] = getattr(rotary, field)
            offending.add(field)
    return shown


def _problems(model: ModelRope, rotary: RotaryWiring, declared: Any) -> dict[str, str]:
    """What one rotation does that the declared layer does not, by field (verb phrases)."""
    problems = {}
    wired = cache_layer_type(rotary.cache)
    if wired is not None and len(model.tables) > 1 and wired != declared.layer_type:
        problems["cache"] = f"reads the {wired} cache {rotary.cache} in a {declared.layer_type} layer"
    if rotary.rotary_dim is not None and rotary.rotary_dim != declared.rotary_dim:
        problems["rotary_dim"] = f"rotates {rotary.rotary_dim} channels where the model rotates {declared.rotary_dim}"
    if rotary.interleaved != (declared.layout == "gptj"):
        served, wanted = ("interleaved (gptj)", "rotate-half (neox)") if rotary.interleaved else \
            ("rotate-half (neox)", "interleaved (gptj)")
        problems["interleaved"] = f"pairs channels {served} where the model pairs them {wanted}"
    return problems


def _subject(rotary: RotaryWiring) -> str:
    role = f"the {rotary.role}'s rotation" if rotary.role in ("query", "key") else \
        "its rotation of query and key" if rotary.role else "a rotation"
    return f"{role} ({rotary.node})"


def _coverage(rotations: tuple[RotaryWiring, ...]) -> list[str]:
    """The query and the key must each be rotated once (checked where every rotation's role is known)."""
    if any(rotary.role is None for rotary in rotations):
        return []
    problems = []
    for part in ("query", "key"):
        by = [rotary.node for rotary in rotations if rotary.role is not None and part in rotary.role.split(" and ")]
        if not by:
            problems.append(f"its {part} is not rotated (only {', '.join(r.node for r in rotations)} rotates)")
        elif len(by) > 1:
            problems.append(f"its {part} is rotated {len(by)} times ({', '.join(by)})")
    return problems


def _verdict(model: ModelRope, layer: LayerWiring, declared: Any, layer_type: str | None) -> tuple[str, str]:
    index = layer.index
    if declared is None:
        if layer.rotates:
            why = f"layer type {layer_type!r} applies none" if layer_type in model.no_rope_types else \
                "it is a NoPE layer (no_rope_layers)"
            return "mismatch", (f"layer {index} applies no RoPE in the model's code ({why}), but the pack rotates it "
                                f"with {layer.cache}")
        return "match", f"layer {index} applies no RoPE, and the pack rotates nothing"
    if not layer.rotates:
        return "mismatch", f"layer {index} rotates in the model's code ({declared.layer_type}), but the pack does not"
    rotated = rotations(layer)
    found = [(rotary, _problems(model, rotary, declared)) for rotary in rotated]
    problems: list[str] = []
    if len({tuple(wrong.values()) for _, wrong in found}) == 1:  # every rotation alike: say it once
        wrong = dict(found[0][1])
        if "cache" in wrong:
            wrong["cache"] = (f"is a {declared.layer_type} layer wired to the {cache_layer_type(rotated[0].cache)} "
                              f"cache {rotated[0].cache}")
        problems.extend(f"it {phrase}" for phrase in wrong.values())
    else:
        problems.extend(f"{_subject(rotary)} {phrase}" for rotary, wrong in found for phrase in wrong.values())
    problems.extend(_coverage(rotated))
    if len({(r.cache, r.rotary_dim, r.interleaved) for r in rotated}) > 1:
        problems.append("its rotations disagree (" + "; ".join(
            f"{rotary.node}: cache {rotary.cache}, {rotary.rotary_dim or '?'} channels, interleaved "
            f"{int(rotary.interleaved)}" for rotary in rotated) + ")")
    wired = cache_layer_type(layer.cache)
    if layer.sliding is not None and len(model.tables) > 1 and layer.sliding != (
            declared.layer_type == "sliding_attention") and wired is None:
        problems.append(f"its attention window says {'sliding' if layer.sliding else 'full'} where the declared "
                        f"layer type is {declared.layer_type}")
    if problems:
        return "mismatch", f"layer {index}: " + "; ".join(problems)
    return "match", f"layer {index} rotates with {layer.cache} as declared ({declared.layer_type})"
