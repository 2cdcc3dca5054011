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

from ..tables.table import ModelRope
from .served import LayerWiring

__all__ = ["cache_layer_type", "judge_wiring", "read_wiring"]

_LAYER = re.compile(r"(?:^|/)layers\.(\d+)/")
_ATTENTION = frozenset({"GroupQueryAttention", "MultiHeadAttention", "Attention", "SparseAttention",
                        "PagedAttention"})
_CACHE_LAYER_TYPES = {"global": "full_attention", "local": "sliding_attention"}


def _attributes(node: Any, onnx: Any) -> dict[str, Any]:
    return {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}


def read_wiring(graph: Any, widths: Mapping[str, int], onnx: Any) -> list[LayerWiring]:
    """Every attention layer of ``graph`` (the main graph), in index order. ``widths`` maps a cos
    cache's tensor name to its columns (pairs)."""
    layers: dict[int, dict[str, Any]] = {}
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
            entry["rotary"].append((node, attributes))
    found = []
    for index in sorted(layers):
        entry = layers[index]
        found.append(_wiring(index, entry, widths))
    return found


def _wiring(index: int, entry: Mapping[str, Any], widths: Mapping[str, int]) -> LayerWiring:
    attention = entry.get("attention")
    sliding = None
    if attention is not None:
        window = attention[1].get("local_window_size")
        sliding = bool(isinstance(window, int) and window > 0)
    nodes = tuple(entry["nodes"])
    if entry["rotary"]:
        node, attributes = entry["rotary"][0]
        cache = node.input[2] if len(node.input) > 2 else None
        dim = attributes.get("rotary_embedding_dim") or 0
        if not dim and cache is not None and cache in widths:
            dim = 2 * widths[cache]
        return LayerWiring(index, True, cache, int(dim) or None, bool(attributes.get("interleaved", 0)), sliding, nodes)
    if attention is not None:
        node, attributes = attention
        if attributes.get("do_rotary", 0) and len(node.input) > 8 and node.input[7]:
            cache = node.input[7]
            dim = 2 * widths[cache] if cache in widths else None
            return LayerWiring(index, True, cache, dim, bool(attributes.get("rotary_interleaved", 0)), sliding, nodes)
    return LayerWiring(index, False, None, None, None, sliding, nodes)


def cache_layer_type(cache: str | None) -> str | None:
    """The layer type a cache's name says it serves (Gemma-3's ``cos_cache_global``/``_local``)."""
    if cache is None:
        return None
    for suffix, layer_type in _CACHE_LAYER_TYPES.items():
        if cache.endswith(f"_{suffix}"):
            return layer_type
    return None


def judge_wiring(model: ModelRope, wiring: Iterable[LayerWiring]) -> list[dict[str, Any]]:
    """One record per layer (``index``, ``layer_type``, ``rotates``, ``cache``, ``rotary_dim``,
    ``interleaved``, ``verdict``, ``reason``): ``mismatch`` where the pack's wiring is not the
    declared per-layer plan, naming the layer and what it does."""
    records = []
    for layer in wiring:
        layer_type = model.layer_types[layer.index] if layer.index < len(model.layer_types) else None
        try:
            declared = model.for_layer(layer.index)
        except (IndexError, LookupError) as error:
            verdict, reason = "unknown", f"the declaration cannot say what layer {layer.index} applies: {error}"
        else:
            verdict, reason = _verdict(model, layer, declared, layer_type)
        records.append({"index": layer.index, "layer_type": layer_type, "rotates": layer.rotates,
                        "cache": layer.cache, "rotary_dim": layer.rotary_dim, "interleaved": layer.interleaved,
                        "verdict": verdict, "reason": reason})
    return records


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
    problems = []
    wired = cache_layer_type(layer.cache)
    if wired is not None and len(model.tables) > 1 and wired != declared.layer_type:
        problems.append(f"it is a {declared.layer_type} layer wired to the {wired} cache {layer.cache}")
    if layer.rotary_dim is not None and layer.rotary_dim != declared.rotary_dim:
        problems.append(f"it rotates {layer.rotary_dim} channels where the model rotates {declared.rotary_dim}")
    if layer.interleaved is not None and layer.interleaved != (declared.layout == "gptj"):
        served, wanted = ("interleaved (gptj)", "rotate-half (neox)") if layer.interleaved else \
            ("rotate-half (neox)", "interleaved (gptj)")
        problems.append(f"it pairs channels {served} where the model pairs them {wanted}")
    if layer.sliding is not None and len(model.tables) > 1 and layer.sliding != (
            declared.layer_type == "sliding_attention") and wired is None:
        problems.append(f"its attention window says {'sliding' if layer.sliding else 'full'} where the declared "
                        f"layer type is {declared.layer_type}")
    if problems:
        return "mismatch", f"layer {index}: " + "; ".join(problems)
    return "match", f"layer {index} rotates with {layer.cache} as declared ({declared.layer_type})"
