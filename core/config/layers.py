"""Which layers rotate: layer types, layers without RoPE, and the keys families use to say so.

Read from ``layer_types`` when the config states it, else derived the way each family's config
class derives it (Gemma-3 and Cohere-2 ``sliding_window_pattern``, Qwen3-Next
``full_attention_interval``, LFM2 ``full_attn_idxs``, Bamba ``attn_layer_indices``, MiniMax
``attn_type_list``). Per-index NoPE layers come from ``no_rope_layers`` (Llama-4, SmolLM3: 1 means
the layer *uses* RoPE) or its ``no_rope_layer_interval``.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import RopeConfigError
from .classes import facts_for, layer_type_renames, transformers_version
from .families import ATTENTION_LAYER_TYPES, CLASS_LOCAL_THETA, NO_ROPE_LAYER_TYPES, Family
from .view import ConfigView, positive_int

__all__ = ["LayerPlan", "plan_layers"]

FLAT_LAYER_TYPE = "full_attention"

class LayerPlan(NamedTuple):
    """``layer_types`` (one per layer; empty when the config does not say) and the per-index
    layers that apply no RoPE whatever their type."""

    layer_types: tuple[str, ...]
    no_rope_layers: tuple[int, ...] = ()


def plan_layers(view: ConfigView, family: Family, *, per_type: bool, block_types: Sequence[str]) -> LayerPlan:
    """The layer plan of a config. ``per_type``: the rope parameters are per layer type
    (``block_types`` names them); otherwise one table serves every attention layer."""
    layers = positive_int(view, "num_hidden_layers")
    declared = view.get("layer_types")
    types = _declared(view, declared, layers) if declared is not None else _derived(view, family, layers, per_type)
    known = ATTENTION_LAYER_TYPES | NO_ROPE_LAYER_TYPES | set(block_types)
    if not known.issuperset(types):  # one C-level pass; only a refusal walks the layers to name the first
        renamed = {name: kind for name, kind in layer_type_renames().items() if kind in known}
        for index, name in enumerate(types):
            if name in known:
                continue
            if name in renamed:  # transformers' own legacy name: served as that kind, named as the config names it
                _note_alias(view, declared is not None, index, name, renamed[name])  # once, at its first layer
                known = known | {name}
                continue
            where = view.path("layer_types") if declared is not None else view.path("num_hidden_layers")
            raise RopeConfigError(  # a name neither ropekit nor transformers knows
                f"{where}[{index}]" if declared is not None else where,
                f"unknown layer type {name!r}; ropekit knows {', '.join(sorted(known))}, and transformers "
                f"{transformers_version()} renames {_renames_text()} (a layer type it cannot place is refused "
                "rather than guessed)",
            )
    return LayerPlan(types, _no_rope_layers(view, family, len(types) or layers))


def layer_kind(name: str) -> str:
    """The kind a layer type name means: itself, or the name transformers renames it to
    (``deepseek_sparse_attention`` is ``indexed_attention``)."""
    return layer_type_renames().get(name, name)


def _renames_text() -> str:
    return ", ".join(f"{old!r} as {new!r}" for old, new in sorted(layer_type_renames().items()))


def _note_alias(view: ConfigView, declared: bool, index: int, name: str, kind: str) -> None:
    where = f"{view.path('layer_types')}[{index}]" if declared else view.path("layer_types")
    warnings.warn(f"{where}: {name!r} is transformers' legacy name of {kind!r} (its config classes rename it, "
                  f"transformers {transformers_version()}); served as {kind!r} layers, named {name!r} as the config "
                  "names them", UserWarning, stacklevel=5)


def _from_block_types(view: ConfigView, layers: int) -> tuple[str, ...]:
    """RecurrentGemma: ``block_types`` (default recurrent, recurrent, attention) repeated over the
    layers; recurrent blocks are linear-recurrence layers without RoPE, attention blocks use local
    (sliding) attention with the one table."""
    blocks = view.get("block_types")
    if blocks is None:
        blocks = ["recurrent", "recurrent", "attention"]
    if not isinstance(blocks, (list, tuple)) or not blocks or any(b not in ("recurrent", "attention") for b in blocks):
        raise RopeConfigError(view.path("block_types"),
                              f"expected a list of 'recurrent' and 'attention', got {blocks!r}")
    return tuple("linear_attention" if block == "recurrent" else "sliding_attention"
                 for block in (list(blocks) * layers)[:layers])


def _declared(view: ConfigView, declared: Any, layers: int | None) -> tuple[str, ...]:
    path = view.path("layer_types")
    if not isinstance(declared, list) or not all(isinstance(name, str) for name in declared):
        raise RopeConfigError(path, "expected a list of layer type names")
    if layers is not None and len(declared) != layers:
        raise RopeConfigError(path, f"lists {len(declared)} layers, but num_hidden_layers is {layers}; they must agree")
    model_type = view.get("model_type")
    facts = facts_for(view)
    folds = facts.folds if facts is not None else None
    if folds is not None and folds in declared:  # Dory: (attention, "mlp") pairs, one decoder layer each
        if len(declared) % 2 or any((name == folds) != (index % 2 == 1) for index, name in enumerate(declared)):
            raise RopeConfigError(path, f"{model_type}'s config class folds each {folds!r} entry into the layer "
                                  f"before it, so the list must alternate a layer type and {folds!r}; got {declared!r}")
        return tuple(declared[::2])
    last = facts.last_layer if facts is not None else None
    if last is not None and declared and declared[-1] != last:  # Gemma-4's config class forces it
        warnings.warn(f"{path}[{len(declared) - 1}]: {model_type}'s config class makes the last layer {last} whatever "
                      f"the list says ({declared[-1]!r} here); ropekit serves that layer as its code runs it",
                      UserWarning, stacklevel=6)
        return (*declared[:-1], last)
    return tuple(declared)


def _derived(view: ConfigView, family: Family, layers: int | None, per_type: bool) -> tuple[str, ...]:
    if layers is None:
        return ()
    for key, build in (("attn_type_list", _from_attn_type_list), ("full_attention_interval", _from_interval),
                       ("full_attn_idxs", _from_indices), ("attn_layer_indices", _from_indices)):
        if view.get(key) is not None:
            return build(view, key, layers)
    if view.get("model_type") == "bamba":  # configuration_bamba.py: no attn_layer_indices, every layer is mamba
        return ("mamba",) * layers
    if view.get("model_type") == "recurrent_gemma":  # configuration_recurrent_gemma.py: layers_block_type
        return _from_block_types(view, layers)
    if view.get("model_type") == "qwen3_next":  # configuration_qwen3_next.py: interval 4 by default
        return tuple("linear_attention" if (i + 1) % 4 else "full_attention" for i in range(layers))
    facts = facts_for(view)
    if facts is not None and facts.layer_plan is not None and (per_type or _plan_matters(facts.layer_plan, family)):
        return _class_plan(view, layers)  # the plan the class's own code builds (derived), or refused by name
    pattern_key = "sliding_window_pattern"
    if view.get(pattern_key) is None:
        pattern_key = "_sliding_window_pattern"  # how transformers' Gemma-3 class saves it
    pattern = view.get(pattern_key)
    model_type = view.get("model_type")
    gemma_default = isinstance(model_type, str) and model_type.startswith("gemma") and model_type in CLASS_LOCAL_THETA
    if pattern is None and ("rope_local_base_freq" in view or gemma_default):
        pattern = 6  # Gemma-3's default
    if pattern is None and model_type == "cohere2":
        pattern = 4  # Cohere-2's default (other classes state theirs, or carry it as a class default)
    if pattern is not None:
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern <= 0:
            raise RopeConfigError(view.path(pattern_key), f"expected a positive integer, got {pattern!r}")
        return tuple("sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers))
    if per_type:
        return _class_plan(view, layers)
    return (FLAT_LAYER_TYPE,) * layers


def _plan_matters(plan: Mapping[str, Any], family: Family) -> bool:
    """Whether the plan a class builds itself changes what a flat config's layers get: it has layers
    without RoPE (linear attention, convolutions, a type the family's code does not rotate). Then a
    config leaving the plan to the class gets that plan, or is refused where it was not derived;
    otherwise every attention layer gets the one table whatever its type."""
    return bool(set(plan.get("types", ())) & (NO_ROPE_LAYER_TYPES | family.no_rope_layer_types))


def _class_plan(view: ConfigView, layers: int) -> tuple[str, ...]:
    """The layer plan the config's class builds when the config states no ``layer_types``
    (``layer_plan`` of ``transformers_classes.json``: a pattern repeated over the layers, chosen by
    the plan keys the config states), or a refusal naming ``layer_types``: rope parameters per layer
    type without a plan would load and then fail at the first layer looked up."""
    facts = facts_for(view)
    model_type = view.get("model_type")
    plan = facts.layer_plan if facts is not None else None
    where = view.path("layer_types")
    if plan is None:
        raise RopeConfigError(where, f"missing: the config gives rope parameters per layer type, and which layer "
                              f"uses which is unknown without layer_types ({model_type!r} has no class plan ropekit "
                              "derived); state layer_types")
    chosen: Mapping[str, Any] = plan
    for key, known in sorted(plan.get("keys", {}).items()):
        if view.get(key) is None and view.get(f"_{key}") is not None:
            key = f"_{key}"  # how transformers' Gemma-3 class saves sliding_window_pattern
        value = view.get(key)
        if value is None or view.defaulted(key) or value == known.get("default"):
            continue
        found = known.get("patterns", {}).get(json.dumps(value))
        if found is None:
            raise RopeConfigError(view.path(key), f"{value!r}: {model_type}'s config class builds its layer plan from "
                                  "it in a way ropekit has not derived for this value; state layer_types")
        chosen = found
        break
    pattern = chosen.get("pattern")
    if not pattern:
        raise RopeConfigError(where, f"missing: {model_type}'s config class builds its layer plan in a way ropekit "
                              "has not derived (no repeated pattern); state layer_types")
    short = chosen.get("short") or {}
    if str(layers) in short:  # a length the class builds its own way (OLMo-hybrid's 2 or 3 layers)
        built = short[str(layers)]
        if built is None:
            raise RopeConfigError(view.path("num_hidden_layers"), f"{layers}: {model_type}'s config class builds no "
                                  f"model of {layers} layers (it raises); valid: {len(short) + 1} or more")
        return tuple(str(name) for name in built)
    types = [str(pattern[index % len(pattern)]) for index in range(layers)]
    head = chosen.get("head") or ([chosen["first"]] if chosen.get("first") is not None else [])
    types[: len(head)] = [str(name) for name in head][:layers]
    if types and chosen.get("last") is not None:
        types[-1] = str(chosen["last"])
    return tuple(types)


def _int_list(view: ConfigView, key: str, allowed: range | None = None) -> list[int]:
    value = view[key]
    path = view.path(key)
    if not isinstance(value, list):
        raise RopeConfigError(path, f"expected a list of integers, got {value!r}")
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or (allowed is not None and item not in allowed):
            valid = f" in {allowed.start}..{allowed.stop - 1}" if allowed is not None else ""
            raise RopeConfigError(f"{path}[{index}]", f"expected an integer{valid}, got {item!r}")
    return value


def _from_attn_type_list(view: ConfigView, key: str, layers: int) -> tuple[str, ...]:
    """MiniMax: 1 is softmax attention with RoPE, 0 is lightning (linear) attention without."""
    values = _int_list(view, key, range(2))
    if len(values) != layers:
        raise RopeConfigError(view.path(key), f"lists {len(values)} layers, but num_hidden_layers is {layers}")
    return tuple("full_attention" if value else "linear_attention" for value in values)


def _from_interval(view: ConfigView, key: str, layers: int) -> tuple[str, ...]:
    interval = positive_int(view, key)
    assert interval is not None
    return tuple("linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers))


def _from_indices(view: ConfigView, key: str, layers: int) -> tuple[str, ...]:
    """LFM2 (full attention, else convolution) and Bamba (attention, else mamba)."""
    indices = set(_int_list(view, key, range(layers)))
    other = "conv" if key == "full_attn_idxs" else "linear_attention"
    return tuple("full_attention" if i in indices else other for i in range(layers))


def _cross_attention_layers(view: ConfigView, layers: int | None) -> tuple[int, ...]:
    """Mllama: ``cross_attention_layers`` attend to the image without rotation (default as its
    config class sets it: 3, 8, 13, ... 38)."""
    listed = view.get("cross_attention_layers")
    if listed is None:
        listed = [3, 8, 13, 18, 23, 28, 33, 38]
    values = listed if isinstance(listed, list) else None
    if values is None or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise RopeConfigError(view.path("cross_attention_layers"), f"expected a list of layer indices, got {listed!r}")
    return tuple(sorted(v for v in set(values) if layers is None or v < layers))


def _no_rope_layers(view: ConfigView, family: Family, layers: int | None) -> tuple[int, ...]:
    """Indices of layers that apply no RoPE, from ``no_rope_layers`` (1 = uses RoPE) or the interval."""
    if family.layer_configs:
        return _no_rope_from_layer_configs(view, family, layers)
    listed = view.get("no_rope_layers")
    model_type = view.get("model_type")
    if model_type == "mllama_text_model" and listed is None:
        return _cross_attention_layers(view, layers)
    if listed == [] and model_type in ("llama4", "llama4_text"):
        listed = None  # Llama-4's config replaces an empty list by the default (a truthiness test)
    if listed is not None:
        path = view.path("no_rope_layers")
        values = _int_list(view, "no_rope_layers", range(2))
        if layers is not None and len(values) != layers:
            raise RopeConfigError(path, f"lists {len(values)} layers, but the model has {layers}; "
                                  "they must agree (1 = the layer uses RoPE, 0 = it does not)")
        return tuple(index for index, uses in enumerate(values) if not uses)
    facts = facts_for(view)
    if facts is not None and facts.attending is not None and layers is not None:
        return _never_attending(view, str(facts.attending["key"]), layers)
    interval = positive_int(view, "no_rope_layer_interval")
    plan = facts.nope_default if facts is not None and facts.kind == "rope" else None
    if interval is None and plan is None:
        return ()
    if layers is None:
        raise RopeConfigError(view.path("num_hidden_layers"), "missing: needed to place the NoPE layers "
                              "(every no_rope_layer_interval-th layer)")
    if interval is not None:  # a stated interval counts from the first layer (Llama-4's convention)
        return tuple(index for index in range(layers) if (index + 1) % interval == 0)
    assert plan is not None  # the class's own plan, derived from its code (transformers_classes.json)
    every, last = int(plan["every"]), plan["counted_from"] == "last"
    return tuple(index for index in range(layers) if ((layers - 1 - index) if last else (index + 1)) % every == 0)


def _never_attending(view: ConfigView, key: str, layers: int) -> tuple[int, ...]:
    """The layer indices past ``key`` (the number of layers the class's code builds, ``attending`` of
    its class facts: HRM's ``num_layers_per_stack``): its ``num_hidden_layers`` counts more (cache slots
    of recurrent invocations), and those never call attention, so they get no table. A config stating
    no ``key`` has its class count ``num_hidden_layers`` layers, every one attending."""
    count = positive_int(view, key)
    if count is None or view.defaulted(key):
        return ()
    if count > layers:
        raise RopeConfigError(view.path(key), f"{count}: {view.get('model_type')}'s code builds that many layers, more "
                              f"than num_hidden_layers ({layers}); valid: at most {layers}")
    return tuple(range(count, layers))


def _no_rope_from_layer_configs(view: ConfigView, family: Family, layers: int | None) -> tuple[int, ...]:
    """Layers a family's per-layer list marks as applying no RoPE (DeciLM's ``block_configs``: an
    attention that is ``no_op`` or ``replace_with_linear`` has no rotary). The list is required and
    must have one object per layer, so that no layer is rotated or skipped by a guess."""
    key = family.layer_configs
    entries = view.get(key)
    path = view.path(key)
    if not isinstance(entries, list) or not entries:
        raise RopeConfigError(path, f"missing or not a list: {view.get('model_type')}'s code builds each layer from "
                              f"it ({family.code or 'its modeling code'}), so ropekit cannot tell which layers rotate")
    if layers is not None and len(entries) != layers:
        raise RopeConfigError(path, f"lists {len(entries)} layers, but the model has {layers}; they must agree")
    rules = tuple(family.no_rope_if.items())
    found = []
    for index, entry in enumerate(entries):
        if type(entry) is not dict and not isinstance(entry, Mapping):  # a JSON object skips the ABC check
            raise RopeConfigError(f"{path}[{index}]", f"expected an object, got {type(entry).__name__}")
        for dotted, value in rules:  # the first rule that holds marks the layer; the later ones are not read
            if _dotted(entry, dotted, value, path, index) == value:
                found.append(index)
                break
    return tuple(found)


def _dotted(entry: Mapping[str, Any], dotted: str, like: Any, path: str, index: int) -> Any:
    """The value at ``dotted`` in ``entry`` (``None``: absent), of ``like``'s type, else refused naming its path
    (``path[index].dotted``): a ``"true"`` string or a null attention object is not what the family's code reads."""
    value: Any = entry
    parts = _parts(dotted)
    for depth, part in enumerate(parts):
        if type(value) is not dict and not isinstance(value, Mapping):  # a JSON object skips the ABC check
            raise RopeConfigError(f"{path}[{index}].{'.'.join(parts[:depth])}", f"expected an object, got {value!r}")
        if part not in value:
            return None
        value = value[part]
    if type(value) is not type(like):
        raise RopeConfigError(f"{path}[{index}].{dotted}", f"expected {type(like).__name__}, got {value!r}")
    return value


@functools.lru_cache(maxsize=256)
def _parts(dotted: str) -> tuple[str, ...]:
    """``dotted`` split at its dots (a family's static ``no_rope_if`` key, split once, not once per layer)."""
    return tuple(dotted.split("."))
