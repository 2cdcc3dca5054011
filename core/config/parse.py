"""Reading a ``config.json`` into one rope block per layer type, with its geometry and JSON paths.

This module knows the config shapes found in the wild (transformers v4 ``rope_scaling``, v5
``rope_parameters``, per-layer-type nesting, Gemma-3's ``rope_local_base_freq``, multimodal
``text_config``, GPT-NeoX and DeepSeek geometry keys). It knows nothing of any rope_type.

It is the one owner of "where a value comes from": each :class:`RopeBlock` carries the JSON path
of every geometry value it resolved, :meth:`RopeBlock.lookup` reads a scheme key (with its
top-level fallback) and :meth:`RopeBlock.where` names the path of any key a scheme blames, so an
error always points at the key where it really is.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..contract.scheme import RESERVED_KEYS, Geometry, Key
from ..errors import NoRopeError, RopeConfigError
from .classes import facts_for, transformers_version
from .families import (
    ATTENTION_LAYER_TYPES,
    CHATGLM_V1,
    CLASS_LOCAL_THETA,
    CLASS_THETA,
    NO_ROPE_LAYER_TYPES,
    Family,
    Layout,
    family_for,
    layout_of,
)
from .identify import FamilyLookup, identify
from .layers import FLAT_LAYER_TYPE, layer_kind, plan_layers
from .remote import baichuan_rotates, chatglm_code, chatglm_generation
from .screen import NOT_SERVED, judge, screen_keys
from .source import read_config
from .spellings import KeyReading, key_reading
from .view import MAX_HEAD_DIM, MAX_THETA, ConfigView, positive_int, positive_number, required_int

__all__ = ["ConfigView", "ParsedConfig", "RopeBlock", "parse_config", "read_config"]

DEFAULT_THETA = 10_000.0
"""transformers' ``default_theta``: the base used when a config declares none anywhere."""



class RopeBlock(NamedTuple):
    """The rope parameters of one layer type, before its scheme validates them.

    ``values`` is the block as written; ``geometry`` what the loader resolved for it, and
    ``geometry_paths`` the JSON path each geometry value came from (or where it would be declared,
    for a value defaulted because the config states none). ``layout`` is how the family's code
    pairs channels (``gptj``: interleaved).
    """

    layer_type: str
    rope_type: str
    rope_type_path: str
    path: str
    values: Mapping[str, Any]
    geometry: Geometry
    geometry_paths: Mapping[str, str]
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False
    mrope_composition: str | None = None
    """How the model's code composes multimodal positions (see :mod:`ropekit.tables.mrope`);
    ``None``: a text model."""
    layout: Layout = "neox"
    view: ConfigView | None = None
    """The config the block came from, for :meth:`where` and :meth:`lookup`."""

    def key_path(self, name: str) -> str:
        """The JSON path of ``name`` inside this block."""
        return f"{self.path}.{name}" if self.path else name

    def where(self, name: str) -> str:
        """The JSON path of the key ``name`` as the config states it.

        A key of the block is blamed in the block; a geometry value where it was resolved from
        (``rope_theta`` may live at the top level or in ``text_config``); any other config key
        where the config has it; a key stated nowhere, where it belongs in the block.
        """
        if name in self.values:
            return self.key_path(name)
        if name in self.geometry_paths:
            return self.geometry_paths[name]
        if self.view is not None and name in self.view:
            return self.view.path(name)
        return self.key_path(name)

    def lookup(self, key: Key) -> tuple[Any, str]:
        """``key``'s value and JSON path: the block's own value, else its ``config_fallback``
        top-level key, else ``max_position_embeddings`` if the key says so; ``None`` if absent.

        A value in the block and a different one at ``config_fallback`` is a conflict, never
        silently resolved.
        """
        path = self.key_path(key.name)
        value = self.values.get(key.name)
        fallback = key.config_fallback
        if fallback is not None and self.view is not None and self.view.get(fallback) is not None:
            outer, outer_path = self.view[fallback], self.view.path(fallback)
            if value is None:
                return outer, outer_path
            if value != outer:
                raise RopeConfigError(
                    path, f"conflicts with {outer_path} ({value!r} vs {outer!r}); remove one or make them equal"
                )
        if value is None and key.default_from_max_positions and self.geometry.max_position_embeddings is not None:
            return self.geometry.max_position_embeddings, self.geometry_paths["max_position_embeddings"]
        return value, path

    def check_dims(self, table_length: int, *, covers_head: bool) -> None:
        """The dimensions a scheme needs: an even rotary dim of at least 2 (an even head for a
        ``covers_head`` scheme), and ``mrope_section`` summing to the table's ``table_length``."""
        geometry = self.geometry
        if covers_head:
            if geometry.head_dim % 2:
                raise RopeConfigError(
                    self.geometry_paths["head_dim"],
                    f"rope_type {self.rope_type!r} needs an even head_dim, got {geometry.head_dim}",
                )
        else:
            rotary = geometry.rotary_dim
            if rotary < 2 or rotary % 2:
                blamed = "partial_rotary_factor" if geometry.partial_rotary_factor != 1 else "head_dim"
                raise RopeConfigError(
                    self.geometry_paths[blamed],
                    f"rotary dim int(head_dim {geometry.head_dim} * partial_rotary_factor "
                    f"{geometry.partial_rotary_factor}) = {rotary} must be even and >= 2",
                )
        section = self.mrope_section
        if section is not None and self.mrope_composition in ("sections", "paired_hw", "full_width") \
                and sum(section) != table_length:
            raise RopeConfigError(
                self.key_path("mrope_section"),
                f"sections {list(section)} sum to {sum(section)}; they must sum to rotary_dim / 2 = {table_length}",
            )


class ParsedConfig(NamedTuple):
    """Every RoPE layer type's block, the per-layer layer types (empty when unknown), and the layer
    types and per-index layers without RoPE."""

    blocks: tuple[RopeBlock, ...]
    layer_types: tuple[str, ...]
    no_rope_types: frozenset[str] = frozenset()
    no_rope_layers: tuple[int, ...] = ()
    layers_path: str = "num_hidden_layers"
    """Where the number of layers is (or would be) stated, for a refusal that needs it."""

    def check_layers_placed(self) -> None:
        """No crash after load: with more than one table, every layer's must be known (``layer_types``,
        or the class's own plan, needs the number of layers), or the config is refused here rather
        than at the first :meth:`~ropekit.ModelRope.for_layer`."""
        if len(self.blocks) > 1 and not self.layer_types:
            raise RopeConfigError(self.layers_path, "missing: needed, with layer_types or the class's own layer "
                                  "plan, to say which layers use which of the rope parameters given per layer type "
                                  f"({', '.join(block.layer_type for block in self.blocks)})")


def parse_config(
    config: Mapping[str, Any], *, strict: bool = True, plugin_family: FamilyLookup | None = None
) -> ParsedConfig:
    """Split ``config`` into one :class:`RopeBlock` per layer type that uses RoPE, with the layer plan.

    Every key bearing on RoPE is read or refused first (:func:`~ropekit.config.screen.screen_keys`;
    ``strict=False`` turns look-alike keys into warnings), then the code the config runs is
    identified (:func:`~ropekit.config.identify.identify`: unknown code is refused in strict mode,
    code without RoPE always). ``plugin_family`` finds families that installed plugins declare.
    """
    lookalikes = screen_keys(config)
    identity = identify(config, strict=strict, plugin_family=plugin_family)
    view = ConfigView(config, identity.defaults, model_type=identity.model_type, wrapper_keys=identity.wrapper_keys)
    family = identity.family or family_for(view.get("model_type"))
    if view.get("model_type") == "chatglm" and chatglm_generation(view) == 1:  # ChatGLM-6B's own code, 1-D
        family = CHATGLM_V1
    _refuse_unserved(view)
    if view.get("model_type") == "baichuan":
        baichuan_rotates(config, view)
    if family.unserved:
        raise RopeConfigError(view.path("model_type"), f"{view.get('model_type')}: {family.unserved}")
    without_rope = _no_rope_reason(view, family)
    if without_rope is not None:
        raise NoRopeError(*without_rope)
    source_path, source = _rope_source(view)
    if view.get("model_type") == "chatglm" and _chatglm_interpolates(view):
        if source:
            raise RopeConfigError(source_path, "ChatGLM's code reads no rope block; its scaling is rope_ratio")
        source_path, source = "", {"rope_type": "linear", "factor": view["rope_ratio"]}
    nested, source = _per_layer_type(view, source, source_path)
    family_no_rope = family.no_rope_layer_types
    if family.rotates_all_without_window and not _has_window(config):
        family_no_rope = frozenset()
    flat_scaling = _flat_scaling(view, source, source_path) if not nested else None
    if nested:
        raw_blocks = {name: (f"{source_path}.{name}", value) for name, value in source.items()}
    elif flat_scaling is not None:
        raw_blocks = flat_scaling
    elif view.get("rope_local_base_freq") is not None or _gemma_local_default(view):
        # Gemma-3 as transformers v4 wrote it (or as it saves composites: the local base omitted)
        raw_blocks = {FLAT_LAYER_TYPE: (source_path, source), "sliding_attention": ("", {})}
    else:
        flat_type = "sliding_attention" if FLAT_LAYER_TYPE in family_no_rope else FLAT_LAYER_TYPE
        raw_blocks = {flat_type: (source_path, source)}
    plan = plan_layers(view, family, per_type=nested or len(raw_blocks) > 1, block_types=tuple(raw_blocks))
    if plan.layer_types and view.get("layer_types") is None:  # the class's own plan: what per-layer widths index
        view = view.with_default("layer_types", list(plan.layer_types))  # the lookups made so far kept
    model_type = view.get("model_type")
    if (not nested and len(raw_blocks) == 1 and "sliding_attention" in plan.layer_types
            and isinstance(model_type, str) and model_type in CLASS_LOCAL_THETA):
        raise RopeConfigError(
            view.path("layer_types"),
            f"{model_type}'s sliding layers use base {CLASS_LOCAL_THETA[model_type]:g} by its config class's default, "
            "unlike its full layers; state rope_parameters per layer type (full_attention, sliding_attention)",
        )
    no_rope_types = {name for name, (_, value) in raw_blocks.items() if value is None}
    no_rope_types |= {name for name in set(plan.layer_types) if layer_kind(name) in NO_ROPE_LAYER_TYPES}
    no_rope_types |= family_no_rope
    blocks = tuple(
        _block(view, family, name, path, value)
        for name, (path, value) in raw_blocks.items()
        if name not in no_rope_types
    )
    if not nested and blocks and plan.layer_types:
        attention = set(plan.layer_types) - no_rope_types  # the distinct types: one pass in C, not one per layer
        if len(attention) == 1 and blocks[0].layer_type not in attention:
            blocks = (blocks[0]._replace(layer_type=next(iter(attention))),)  # name the one table as its layers do
    if nested:
        _check_nested_types(plan.layer_types, raw_blocks, no_rope_types, source_path)
    elif len(blocks) > 1 and plan.layer_types:
        _check_blocks_placed(view, plan.layer_types, blocks, no_rope_types)
    if family.rope_types is not None or family.refused_types or family.schemes:
        blocks = _family_rope_types(view, family, blocks)

    _warn_ignored(view, family)
    _warn_widthless(view, blocks)
    if family.inert_keys:  # keys its code reads without changing the table, as its declaration says
        lookalikes = [item for item in lookalikes if item.key not in family.inert_keys]
    judge(lookalikes, functools.partial(_served, view, blocks, source), strict=strict)
    return ParsedConfig(blocks, plan.layer_types, frozenset(no_rope_types), plan.no_rope_layers,
                        view.path("num_hidden_layers"))


def _family_rope_types(view: ConfigView, family: Family, blocks: tuple[RopeBlock, ...]) -> tuple[RopeBlock, ...]:
    """A family declaration's rope_types: the ones its code applies (a config declaring another would
    be served a table its model never computes: its code raises, or ignores the block), the ones it
    refuses with a reason, and the ones its code computes its own way (served by the scheme named)."""
    applied = family.rope_types
    code = f" ({family.code})" if family.code else ""
    model_type = view.get("model_type")
    served = []
    for block in blocks:
        kind = block.rope_type
        if kind in family.refused_types:
            raise RopeConfigError(block.rope_type_path, f"{kind!r} in {model_type}'s code{code}: "
                                  f"{family.refused_types[kind]}")
        if applied is not None and kind not in applied and kind != "default":
            raise RopeConfigError(block.rope_type_path, (
                f"{kind!r} is not a rope_type {model_type}'s code{code} applies as ropekit has checked it; it "
                f"applies {', '.join(sorted(applied | {'default'}))}. Refused rather than served a table that code "
                "never computes"))
        served.append(block._replace(rope_type=family.schemes[kind]) if kind in family.schemes else block)
    return tuple(served)


def _served(view: ConfigView, blocks: tuple[RopeBlock, ...], source: Mapping[str, Any], fact: str) -> Any:
    """The value of ``fact`` (a read key, ``mrope``, ``mrope_interleaved`` or ``rope``) in the tables
    ropekit serves, for judging a look-alike key; ``NOT_SERVED`` where the layer types disagree or it
    cannot say."""
    per_block: dict[str, Any] = {
        "rope": lambda block: True,
        "mrope": lambda block: block.mrope_section is not None,
        "mrope_interleaved": lambda block: block.mrope_section is not None and block.mrope_interleaved,
        "rope_interleave": lambda block: block.layout == "gptj",
        "rope_theta": lambda block: block.geometry.theta,
        "partial_rotary_factor": lambda block: block.geometry.partial_rotary_factor,
        "head_dim": lambda block: block.geometry.head_dim,
        "rotary_dim": lambda block: block.geometry.rotary_dim,
    }
    if fact in ("rope_scaling", "rope_parameters"):
        return source if source else {}
    if fact in per_block:
        values = {per_block[fact](block) for block in blocks}
        if fact == "rope" and not blocks:
            return False
        return values.pop() if len(values) == 1 else NOT_SERVED
    return view.get(fact, NOT_SERVED)


def _check_blocks_placed(
    view: ConfigView, layer_types: tuple[str, ...], blocks: tuple[RopeBlock, ...], no_rope: set[str]
) -> None:
    """Every layer of the plan finds its block: a class whose default blocks are keyed by labels its layers
    are not named by (DeepSeek-V4's ``main`` and ``compress``, each chosen per layer by its code) is refused
    here, naming why, rather than loaded and failing at the first layer looked up."""
    named = {block.layer_type for block in blocks}
    unplaced = sorted({name for name in layer_types if name not in named and name not in no_rope})
    if not unplaced:
        return
    model_type = view.get("model_type")
    raise RopeConfigError(view.path("rope_parameters"), (
        f"missing: {model_type}'s config class keys its default rope parameters by {', '.join(sorted(named))}, which "
        f"are not the layer types of its layers ({', '.join(unplaced)}): its modeling code chooses one of them per "
        "layer by a rule of its own, which ropekit has not derived, so no table can be placed on its layers. Valid: "
        "rope_parameters keyed by the layer types the config's layers have"))


def _check_nested_types(
    layer_types: tuple[str, ...], raw_blocks: Mapping[str, Any], no_rope: set[str], source_path: str
) -> None:
    for index, name in enumerate(layer_types):
        if name not in raw_blocks and name not in no_rope:
            raise RopeConfigError(
                f"{source_path}.{name}",
                f"missing: layer_types[{index}] is {name!r}, which has no rope parameters here "
                f"(the block names {sorted(raw_blocks)}); add them, or null for a layer type without RoPE",
            )


def _flat_scaling(
    view: ConfigView, source: Mapping[str, Any], source_path: str
) -> dict[str, tuple[str, Mapping[str, Any] | None]] | None:
    """A flat (transformers v4) rope block stated for a class whose rope parameters are per layer
    type: the block per layer type as the class's config class applies it (derived: Gemma-3 and
    OLMo-3 scale their full-attention layers, ModernBERT both). ``None``: not such a config. A
    legacy ``type`` key the class does not read is refused: transformers would serve that layer
    type plain RoPE while the config declares a scheme."""
    model_type = view.get("model_type")
    facts = facts_for(view)
    types = [] if facts is None else list(facts.rope_blocks) if facts.rope_blocks else \
        list(facts.theta) if isinstance(facts.theta, Mapping) else []
    if facts is not None and isinstance(facts.theta, Mapping) and len(types) > 1 and not source:
        # no rope block stated: every layer type as the class fills it in (its base, its block, its plan)
        return {name: ("", _class_type_block(view, facts.rope_blocks, name)) for name in types}
    if facts is None or facts.flat_scaling is None or not source_path:
        return None
    scaled = tuple(facts.flat_scaling["layer_types"])
    if not isinstance(facts.theta, Mapping):  # one block, and the class drops a flat rope_scaling (Cohere2-MoE)
        kind = source.get("rope_type", source.get("type", "default"))
        if source_path.endswith("rope_scaling") and kind != "default":
            raise RopeConfigError(source_path, (
                f"{model_type}'s config class (transformers {transformers_version()}) drops a flat rope_scaling "
                f"block, so it would serve plain RoPE although the config declares {kind!r}; state the block as "
                "rope_parameters if the checkpoint was trained with it, else remove it"))
        return None
    kind = source.get("type")
    if source.get("rope_type") is None and kind not in (None, "default") and not facts.flat_scaling["reads_type"]:
        raise RopeConfigError(_join(source_path, "type"), (
            f"{model_type}'s config class (transformers {transformers_version()}) reads only rope_type in a flat "
            f"block, so it would serve {', '.join(scaled)} layers plain RoPE although the config declares "
            f"{kind!r}; spell it rope_type if the checkpoint was trained with {kind!r}, else remove the block"))
    return {name: ((source_path, source) if name in scaled else ("", {})) for name in facts.theta}


def _class_type_block(
    view: ConfigView, blocks: Mapping[str, Mapping[str, Any] | None] | None, layer_type: str
) -> Mapping[str, Any] | None:
    """One layer type's block as the class fills it in (Gemma-4's proportional full layers), without
    the fields the config states under a spelling the class reads into them; ``None``: no RoPE."""
    if blocks is None or layer_type not in blocks:
        return {}
    block = blocks[layer_type]
    if block is None:
        return None
    reading = key_reading(view)

    def stated(key: str) -> bool:
        spellings = reading.keys_for(key, layer_type) if reading is not None else (key,)
        return any(view.get(name) is not None and not view.defaulted(name) for name in spellings)

    return {key: value for key, value in block.items() if not stated(key)}


def _has_window(config: Mapping[str, Any]) -> bool:
    """Whether the config has a sliding window: ``sliding_window`` stated as a number, or not stated
    (the class default of the families that ask: 4096 for EXAONE-4, 513 for Kolibri-1). A stated
    ``null`` is no window, unlike :class:`ConfigView`, which reads null as absent."""
    text = config.get("text_config")
    for layer in (text if isinstance(text, Mapping) else {}, config):
        if "sliding_window" in layer:
            return layer["sliding_window"] is not None
    return True


def _no_rope_reason(view: ConfigView, family: Family) -> tuple[str, str] | None:
    """``(json path, why)`` when the model applies no RoPE at all, else ``None``."""
    if family.no_rope:
        return view.path("model_type"), f"{family.no_rope}; there is no RoPE table to serve"
    if view.get("alibi") is True:
        return view.path("alibi"), "true: the model uses ALiBi, not RoPE; there is no RoPE table to serve"
    if view.get("alibi") not in (None, False):
        raise RopeConfigError(view.path("alibi"), f"expected true or false, got {view.get('alibi')!r}")
    kind = view.get("position_embedding_type")
    if kind is None and view.get("model_type") == "granitemoehybrid":
        return view.path("position_embedding_type"), ("granitemoehybrid without position_embedding_type 'rope' "
                                                       "builds no rotary embedding; there is no RoPE table to serve")
    if kind is not None and kind not in ("rope", "rotary"):
        if not isinstance(kind, str):
            raise RopeConfigError(view.path("position_embedding_type"), f"expected a string, got {kind!r}")
        return view.path("position_embedding_type"), f"{kind!r}, not rope: the model applies no RoPE"
    if _mla(view) and view.get("qk_rope_head_dim") == 0 and not isinstance(view.get("qk_rope_head_dim"), bool):
        # MLA whose query and key carry no rope sub-head (GLM-5-next's text model): nothing rotates
        return view.path("qk_rope_head_dim"), ("0: the attention's query and key have no rope sub-head, so no layer "
                                               "rotates; there is no RoPE table to serve")
    if view.get("model_type") == "zamba2" and not view.get("use_mem_rope"):
        return view.path("use_mem_rope"), "zamba2 without use_mem_rope applies no rotary embedding"
    return None


_UNSERVED: Mapping[str, tuple[object, str]] = {
    # key: (the value ropekit can serve, why another value is refused)
    "use_dynamic_ntk": (False, "Qwen v1 dynamic NTK (alpha 2**ceil(log2(len / seq_length) + 1) - 1, chosen at "
                        "prefill) is not served by any installed plugin"),
    "use_logn_attn": (False, "Qwen v1 scales queries by log_seq_length(position) past seq_length; ropekit's tables "
                      "carry no query scaling"),
    "original_rope": (True, "ChatGLM's code implements only original_rope true"),
    "rotary": (True, "GPT-J's code always rotates; false is not a configuration its code has"),
    "position_encoding_2d": (False, "RoPE over two position streams (GLM's 2-D positions: each head's halves rotated "
                             "by position_ids and block_position_ids) is not expressed by a table, which rotates by "
                             "one; valid: false"),
    "rope_position_scale": (1.0, "Phi-3-small's position scale other than 1 is not served by ropekit"),
    "rotary_value": (False, "RoFormer's code then rotates the attention values too (apply_rotary_position_embeddings "
                     "with value_layer); a table says what rotates queries and keys, so a forward would miss it"),
}


def _refuse_unserved(view: ConfigView) -> None:
    rotary = view.get("rotary")
    if rotary is not None and isinstance(rotary, Mapping):  # (model_type internlm's is read before: config.remote)
        raise RopeConfigError(view.path("rotary"), (
            f"{view.get('rotary')!r}: an object here is InternLM's 2023 spelling ({{base, type, scaling_factor}}), "
            f"read for model_type 'internlm' only; its meaning for model_type {view.get('model_type')!r} is unknown "
            "to ropekit"))
    for key, (served, why) in _UNSERVED.items():
        value = view.get(key)
        if value is not None and (value != served or isinstance(value, bool) != isinstance(served, bool)):
            raise RopeConfigError(view.path(key), f"{value!r}: {why}")
    model_type = view.get("model_type")
    if view.get("rope_ratio") is not None and model_type != "chatglm":
        raise RopeConfigError(view.path("rope_ratio"), f"read for ChatGLM/GLM-4 (model_type 'chatglm') only; its "
                              f"meaning for model_type {model_type!r} is unknown to ropekit")


def _rope_source(view: ConfigView) -> tuple[str, Mapping[str, Any]]:
    reading = key_reading(view)
    if reading is not None and not reading.block_read:  # GPT-J, CodeGen: their code reads no rope block
        return view.path("rope_parameters"), {}  # (a stated one is named as ignored by _warn_ignored)
    found: list[tuple[str, Mapping[str, Any]]] = []
    for name in ("rope_parameters", "rope_scaling"):
        value = view.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise RopeConfigError(view.path(name), f"expected an object or null, got {value!r}")
        if value:
            found.append((view.path(name), value))
    if not found:
        path = view.path("rope_parameters") if "rope_parameters" in view else view.path("rope_scaling")
        if view.get("rope_parameters") is None and view.get("rope_scaling") is None:
            block = _class_block(view)
            return (view.path("rope_parameters") if block else path), block
        return path, {}
    if len(found) == 2:
        (new_path, new), (old_path, old) = found
        clashes = sorted(k for k in old if k in new and new[k] != old[k] and k not in ("type", "rope_type"))
        if clashes or _declared_type(new) != _declared_type(old):
            raise RopeConfigError(
                old_path,
                f"conflicts with {new_path} (differing keys: {clashes or ['rope_type']}); "
                "a config should carry one of them",
            )
        merged = {**old, **new}
        return new_path, merged
    return found[0]


def _class_block(view: ConfigView) -> Mapping[str, Any]:
    """The rope block the model's class fills in when a config states none (Ministral-3's yarn,
    Apertus' llama3, Moonshine's partial rotary factor), without what the config states itself."""
    facts = facts_for(view)
    if facts is None or facts.rope_block is None:
        return {}
    reading = key_reading(view)

    def stated(key: str) -> bool:  # under any spelling the class reads into it (GPT-NeoX's rotary_pct)
        spellings = reading.keys_for(key, "") if reading is not None else (key,)
        return any(view.get(name) is not None and not view.defaulted(name) for name in spellings)

    return {key: value for key, value in facts.rope_block.items() if not stated(key)}


def _declared_type(block: Mapping[str, Any]) -> object:
    return block.get("rope_type", block.get("type"))


def _is_nested(source: Mapping[str, Any]) -> bool:
    return bool(source) and RESERVED_KEYS.isdisjoint(source) and all(
        isinstance(v, Mapping) or v is None for v in source.values()
    )


_LAYER_LABELS = ATTENTION_LAYER_TYPES | NO_ROPE_LAYER_TYPES
"""The layer type names a rope block's keys may be, besides those a config's ``layer_types`` lists."""


def _per_layer_type(view: ConfigView, source: Mapping[str, Any], path: str) -> tuple[bool, Mapping[str, Any]]:
    """Whether the rope block is nested per layer type, and the block as read.

    Nested when its keys are layer types, or when some are and hold a block (or null), as
    transformers decides; other keys beside them are ignored, as transformers ignores them, with a
    warning naming each.
    """
    if _is_nested(source):
        return True, source
    declared = view.get("layer_types")
    labels = _LAYER_LABELS
    if isinstance(declared, list):
        labels = labels.union(name for name in declared if isinstance(name, str))
    typed = {name: value for name, value in source.items() if name in labels}
    if not any(isinstance(value, Mapping) or value is None for value in typed.values()):
        return False, source
    for name in source:
        if name not in typed:
            warnings.warn(f"{_join(path, name)}: beside rope parameters given per layer type "
                          f"({', '.join(sorted(typed))}); transformers ignores it there, and so does ropekit",
                          UserWarning, stacklevel=4)
    return True, typed


def _block(view: ConfigView, family: Family, layer_type: str, path: str, block: Any) -> RopeBlock:
    if type(block) is not dict and not isinstance(block, Mapping):  # a JSON object skips the ABC check
        raise RopeConfigError(path, f"expected an object (or null: no RoPE for this layer type), got {block!r}")
    rope_type, rope_type_path = _rope_type(block, path)
    theta, theta_path = _theta(view, family, layer_type, block, path)
    (head_dim, head_path), (factor, factor_path) = _head_dim_and_factor(view, family, layer_type, block, path)
    max_positions = positive_int(view, "max_position_embeddings")
    geometry = Geometry(
        head_dim=head_dim, theta=theta, partial_rotary_factor=factor, max_position_embeddings=max_positions
    )
    paths = {
        "rope_theta": theta_path,
        "head_dim": head_path,
        "partial_rotary_factor": factor_path,
        "max_position_embeddings": view.path("max_position_embeddings"),
    }
    section, interleaved, composition = _mrope(view, block, path)
    return RopeBlock(
        layer_type,
        rope_type,
        rope_type_path,
        path,
        block,
        geometry,
        paths,
        section,
        interleaved,
        composition,
        _layout(view, family),
        view=view,
    )


_WIDTH_KEYS = ("head_dim", "global_head_dim", "hidden_size", "num_attention_heads", "qk_rope_head_dim",
               "qk_nope_head_dim", "kv_channels")
"""Keys a head's width is read from; a config stating none of them is served its class's default widths."""


def _warn_widthless(view: ConfigView, blocks: tuple[RopeBlock, ...]) -> None:
    """A config that states no width at all is served the widths its class defaults to, as the class
    runs it; since nothing in the config confirms them, a warning names ``head_dim`` and the values taken."""
    if not blocks or any(view.get(key) is not None and not view.defaulted(key) for key in _WIDTH_KEYS):
        return
    taken = ", ".join(f"{block.layer_type} head_dim {block.geometry.head_dim} rotating {block.geometry.rotary_dim}"
                      for block in blocks)
    warnings.warn(f"{view.path('head_dim')}: the config states no width (head_dim, hidden_size, num_attention_heads); "
                  f"served as {view.get('model_type')}'s class defaults give it: {taken}", UserWarning, stacklevel=4)


def _layout(view: ConfigView, family: Family) -> Layout:
    """How the config's code pairs channels: a class observed to interleave its rope sub-head whatever
    ``rope_interleave`` says (DeepSeek-V3.2, GLM-5) is served so, and a stated ``rope_interleave`` that
    says otherwise is named in a warning (its code does not read it); else ``rope_interleave`` over the
    family's layout."""
    if not _mla(view) and view.get("qk_rope_head_dim") is not None:
        return "neox"  # use_mla false: DeepSeek-V2's remote code runs LlamaAttention, rotate_half over the whole head
    facts = facts_for(view)
    if facts is not None and facts.pairing in ("neox", "gptj"):
        pairing: Layout = "gptj" if facts.pairing == "gptj" else "neox"
        stated = None if view.defaulted("rope_interleave") else view.get("rope_interleave")
        if stated is not None and layout_of(family, stated) != pairing:
            warnings.warn(f"{view.path('rope_interleave')}: {stated!r} is not read by {view.get('model_type')}'s "
                          f"code, which rotates {'interleaved' if pairing == 'gptj' else 'rotate-half'} pairs of its "
                          f"rope sub-head whatever it says (observed on transformers {transformers_version()}); "
                          f"ropekit serves {pairing}", UserWarning, stacklevel=6)
        return pairing
    return layout_of(family, view.get("rope_interleave"))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _rope_type(block: Mapping[str, Any], path: str) -> tuple[str, str]:
    new, old = block.get("rope_type"), block.get("type")
    for name, value in (("rope_type", new), ("type", old)):
        if value is not None and not isinstance(value, str):
            raise RopeConfigError(f"{path}.{name}", f"expected a string naming a rope_type, got {value!r}")
    if new is not None and old is not None and new != old:
        raise RopeConfigError(f"{path}.type", f"conflicts with rope_type ({old!r} vs {new!r}); keep one")
    if new is not None:
        return new, f"{path}.rope_type"
    if old is not None:
        return old, f"{path}.type"
    scaling_keys = sorted(set(block) - RESERVED_KEYS)
    if scaling_keys:
        raise RopeConfigError(
            f"{path}.rope_type",
            f"missing: the block declares {scaling_keys} but no rope_type; ropekit does not guess a scheme "
            "from which keys are present (add \"rope_type\")",
        )
    return "default", f"{path}.rope_type"


def _gemma_local_default(view: ConfigView) -> bool:
    model_type = view.get("model_type")
    gemma = ("gemma", "t5gemma", "embedding_gemma", "diffusion_gemma")
    return isinstance(model_type, str) and model_type.startswith(gemma) and model_type in CLASS_LOCAL_THETA


def _theta(view: ConfigView, family: Family, layer_type: str, block: Mapping[str, Any], path: str) -> tuple[float, str]:
    """The base and where it was declared; a config declaring none gets its transformers class's
    default (10000 for most; :data:`~ropekit.families.CLASS_THETA`), at ``rope_theta``."""
    if family.fixed_theta is not None or view.get("model_type") == "chatglm":
        return _family_theta(view, family, block, path)
    candidates = [(_join(path, "rope_theta"), block.get("rope_theta"))]
    reading = key_reading(view)
    if reading is not None:  # the spellings the class converts for this layer type, winner first
        names: tuple[str, ...] = reading.keys_for("rope_theta", layer_type)
    else:
        names = ("rope_theta", "rotary_emb_base", "rope_embedding_base")
        if layer_type == "sliding_attention" and not path:
            names = ("rope_local_base_freq", *names)
    model_type = view.get("model_type")
    facts = facts_for(view)
    per_type = facts is not None and isinstance(facts.theta, Mapping) and layer_type in facts.theta
    for name in names:
        if not (per_type and view.defaulted(name)):  # a class default base is its main layers'; per type wins
            candidates.append((view.path(name), view.get(name)))
    for where, value in candidates:
        if value is not None:
            return positive_number(value, where, above=1.0, most=MAX_THETA), where
    if layer_type == "sliding_attention" and not path and isinstance(model_type, str):
        local = CLASS_LOCAL_THETA.get(model_type)
        if local is not None:
            return local, view.path("rope_local_base_freq")
    if facts is not None and facts.theta is not None:  # derived from the class: what its default instance carries
        theta = facts.theta
        if not isinstance(theta, Mapping):
            return float(theta), view.path("rope_theta")
        if layer_type in theta:
            return float(theta[layer_type]), _join(path, "rope_theta") if path else view.path("rope_theta")
    if isinstance(model_type, str) and model_type in CLASS_THETA:
        return CLASS_THETA[model_type], view.path("rope_theta")
    return DEFAULT_THETA, view.path("rope_theta")


def _family_theta(view: ConfigView, family: Family, block: Mapping[str, Any], path: str) -> tuple[float, str]:
    """GPT-J/CodeGen/Baichuan hard-code 10000; ChatGLM uses 10000 * rope_ratio. A theta key is
    ignored by their code: one stating another base is refused rather than believed, one stating
    that very base is ignored with a warning."""
    model_type = view.get("model_type")
    if model_type == "chatglm":
        base_text = "10000 * rope_ratio"
        if view.get("rope_ratio") is None or _chatglm_interpolates(view):
            base, where = DEFAULT_THETA, view.path("rope_ratio")
        else:
            base, where = DEFAULT_THETA * _rope_ratio(view), view.path("rope_ratio")
    else:
        assert family.fixed_theta is not None
        base, where, base_text = family.fixed_theta, view.path("model_type"), f"{family.fixed_theta:g}"
    stated = [(_join(path, "rope_theta"), block.get("rope_theta"))]
    stated += [(view.path(name), view.get(name)) for name in ("rope_theta", "rotary_emb_base")
               if not view.defaulted(name)]
    for key_path, value in stated:
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value) == base:
            warnings.warn(f"{key_path}: {model_type}'s code ignores it; its value {value!r} is the base the code "
                          f"uses ({base_text}), so it is ignored", UserWarning, stacklevel=5)
            continue
        raise RopeConfigError(key_path, f"{model_type}'s code ignores it (its base is {base_text} = {base:g}); "
                              "remove it")
    return base, where


def _rope_ratio(view: ConfigView) -> float:
    return positive_number(view["rope_ratio"], view.path("rope_ratio"), above=1e-4, most=MAX_THETA / DEFAULT_THETA)


def _chatglm_interpolates(view: ConfigView) -> bool:
    """Whether a ChatGLM config's code divides positions by ``rope_ratio`` (ChatGLM2-6B-32k) rather
    than multiplying the base (ChatGLM3, GLM-4); a ratio of 1 (or none) is the same table either way."""
    if view.get("rope_ratio") is None:
        return False
    ratio = _rope_ratio(view)
    return ratio != 1 and chatglm_code(view, ratio, view.path("rope_ratio")) == "interpolation"


def _partial_rotary_factor(
    view: ConfigView, family: Family, head_dim: int, block: Mapping[str, Any], path: str,
    layer_type: str = FLAT_LAYER_TYPE,
) -> tuple[float, str | None]:
    """The factor and where it was declared (``None``: not declared: the family's default, else 1.0).

    Precedence: the rope block, the top level (``partial_rotary_factor``, GPT-NeoX/Qwen
    ``rotary_pct``), an absolute ``rotary_dim`` (GPT-J, CodeGen, MiniMax: must agree with a stated
    factor), the family code's default (transformers' GLM 0.5, GPT-NeoX 0.25, ...).
    """
    in_block = block.get("partial_rotary_factor")
    if in_block is not None:
        where = _join(path, "partial_rotary_factor")
        return positive_number(in_block, where, above=0.0, most=1.0), where
    if family.forced_partial_rotary_factor is not None:
        forced = family.forced_partial_rotary_factor
        top = view.get("partial_rotary_factor")
        if top is not None and top != forced:
            raise RopeConfigError(view.path("partial_rotary_factor"), f"{view.get('model_type')}'s config class "
                                  f"overwrites it with {forced}; state it inside the rope block to change it")
        return forced, view.path("model_type")
    reading = key_reading(view)
    if reading is not None:
        return _read_factor(view, family, reading, head_dim, layer_type)
    found: tuple[float, str] | None = None
    for name in ("partial_rotary_factor", "rotary_pct"):
        if view.get(name) is not None:
            found = positive_number(view[name], view.path(name), above=0.0, most=1.0), view.path(name)
            break
    facts = facts_for(view)
    rotary_dim = None if facts is not None and "rotary_dim" in facts.unread else view.get("rotary_dim")
    if rotary_dim is not None:  # (a class whose rotary module is observed to ignore it: not read)
        where = view.path("rotary_dim")
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or not 0 < rotary_dim <= head_dim:
            raise RopeConfigError(where, f"expected an integer in (0, head_dim {head_dim}], got {rotary_dim!r}")
        if found is not None and int(head_dim * found[0]) != rotary_dim:
            raise RopeConfigError(where, f"{rotary_dim} conflicts with {found[1]} = {found[0]} (int({head_dim} * "
                                  f"{found[0]}) = {int(head_dim * found[0])}); keep one")
        if found is None:
            return _factor_for(rotary_dim, head_dim), where
    if found is not None:
        return found
    if family.partial_rotary_factor is not None:
        return family.partial_rotary_factor, None
    return 1.0, None


def _read_factor(
    view: ConfigView, family: Family, reading: KeyReading, head_dim: int, layer_type: str
) -> tuple[float, str | None]:
    """The top-level factor as the config's class reads it: the first spelling it converts for this
    layer type that the config states (GPT-NeoX: ``rotary_pct``; MiniMax-M2: ``partial_rotary_factor``
    before ``rotary_dim``), else the family's default. A stated spelling that loses to another is
    named in a warning; one the class does not read at all, by :func:`_warn_ignored`."""
    facts = facts_for(view)
    stated = [name for name in reading.keys_for("partial_rotary_factor", layer_type)
              if view.get(name) is not None and not view.defaulted(name)
              and not (name == "rotary_dim" and facts is not None and "rotary_dim" in facts.unread)]
    if not stated:  # the class's default for the first spelling it reads (CodeGen's rotary_dim 64); else the family's
        stated = [name for name in reading.keys_for("partial_rotary_factor", layer_type)
                  if view.get(name) is not None and not (name == "rotary_dim" and facts is not None
                                                         and "rotary_dim" in facts.unread)][:1]
    if not stated:
        return (family.partial_rotary_factor, None) if family.partial_rotary_factor is not None else (1.0, None)
    name, where = stated[0], view.path(stated[0])
    if name == "rotary_dim":
        rotary_dim = view.get(name)
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or not 0 < rotary_dim <= head_dim:
            raise RopeConfigError(where, f"expected an integer in (0, head_dim {head_dim}], got {rotary_dim!r}")
        factor = _factor_for(rotary_dim, head_dim)
    else:
        factor = positive_number(view.get(name), where, above=0.0, most=1.0)
    for loser in stated[1:]:
        warnings.warn(f"{view.path(loser)}: {reading.model_type}'s config class (transformers "
                      f"{transformers_version()}) reads {name} first ({where} = {view.get(name)!r}), so it ignores "
                      "this key; ropekit serves what the class applies", UserWarning, stacklevel=7)
    return factor, where


def _warn_ignored(view: ConfigView, family: Family) -> None:
    """Name every rope key the config states that its class neither converts nor reads (GPT-J's
    code reads no rope block; GPT-NeoX's config class drops a top-level ``partial_rotary_factor``):
    the table is what the code applies without it, as for ``partial_rotary_factor`` in Llama."""
    reading = key_reading(view)
    if reading is None:
        return
    for key in reading.ignored(view):
        if family.fixed_theta is not None and key in ("rope_theta", "rotary_emb_base"):
            continue  # judged against the base the code hard-codes (_family_theta)
        how = ("converts no such key into the rope parameters its model reads" if reading.block_read else
               "keeps no rope parameters")
        warnings.warn(f"{view.path(key)}: {reading.model_type}'s code ignores it (its config class, transformers "
                      f"{transformers_version()}, {how}, and its modeling code does not read it); ropekit serves what "
                      "the code applies without it", UserWarning, stacklevel=4)


def _factor_for(rotary_dim: int, head_dim: int) -> float:
    """The factor whose ``int(head_dim * factor)`` is exactly ``rotary_dim``."""
    factor = rotary_dim / head_dim
    while int(head_dim * factor) < rotary_dim:
        factor = math.nextafter(factor, math.inf)
    return factor


def _mla(view: ConfigView) -> bool:
    """Whether the attention is MLA, whose rope sub-head is ``qk_rope_head_dim``. ``use_mla: false`` is DeepSeek-V2's
    remote-code switch to ``LlamaAttention`` over the whole head, the ``qk_*`` keys unread (Unlimited-OCR's language
    config); it counts only where the code that runs reads no MLA fields (transformers' ``unlimited_ocr_text``,
    Unlimited-OCR's text model). An MLA class (DeepSeek-V3, Kimi-K2, GLM-4-MoE-lite...), and code ropekit knows
    from no class, run MLA whatever the key says."""
    if view.get("use_mla") is not False:
        return True
    facts = facts_for(view)
    return facts is None or "qk_rope_head_dim" in facts.defaults


def _head_dim_and_factor(
    view: ConfigView, family: Family, layer_type: str, block: Mapping[str, Any], path: str
) -> tuple[tuple[int, str], tuple[float, str]]:
    """``((head_dim, its path), (partial_rotary_factor, its path))`` for one layer type.

    MLA models (DeepSeek, Mistral-4) rotate ``qk_rope_head_dim`` channels, a sub-head after the
    ``qk_nope_head_dim`` unrotated ones: the table's head is that sub-head. DeepSeek states no
    partial_rotary_factor. Mistral-4 states one over the whole head (``qk_nope_head_dim +
    qk_rope_head_dim``); it must then give ``qk_rope_head_dim``.
    """
    default_factor_path = view.path("partial_rotary_factor")
    if view.get("qk_rope_head_dim") is None or not _mla(view):
        head_dim, head_path = _raw_head_dim(view, layer_type)
        head_dim = _bounded(head_path, head_dim)
        factor, factor_path = _partial_rotary_factor(view, family, head_dim, block, path, layer_type)
        if factor != 1.0 and _rotates_whole_head(view, block):
            _warn_unread_factor(view, factor_path or default_factor_path)
            return (head_dim, head_path), (1.0, default_factor_path)
        return (head_dim, head_path), (factor, factor_path or default_factor_path)
    rope_path = view.path("qk_rope_head_dim")
    rope = _bounded(rope_path, required_int(view, "qk_rope_head_dim"))
    nope = positive_int(view, "qk_nope_head_dim")
    declared = positive_int(view, "head_dim")
    whole_path = view.path("head_dim") if declared is not None else rope_path
    whole = _bounded(whole_path, declared or (nope + rope if nope is not None else rope))
    factor, factor_path = _partial_rotary_factor(view, family, whole, block, path, layer_type)
    if factor_path is None:
        return (rope, rope_path), (1.0, default_factor_path)
    if int(whole * factor) != rope and _rotates_whole_head(view, block):  # the class rotates its rope sub-head
        _warn_unread_factor(view, factor_path)
        return (rope, rope_path), (1.0, default_factor_path)
    if int(whole * factor) != rope:
        raise RopeConfigError(
            factor_path,
            f"int(head_dim {whole} * {factor}) = {int(whole * factor)} rotated channels, but qk_rope_head_dim "
            f"is {rope}; they must agree",
        )
    # the factor over the whole head names the rope sub-head (Mistral-4): the class rotates that sub-head,
    # which follows the unrotated one, with frequencies over its width; ropekit serves the sub-head as the
    # table's head, as for DeepSeek (a table over the whole head would put the rotated block first)
    return (rope, rope_path), (1.0, default_factor_path)


def _warn_unread_factor(view: ConfigView, where: str) -> None:
    warnings.warn(f"{where}: {view.get('model_type')}'s rotary module does not apply it to plain RoPE (rope_type "
                  f"'default'): it rotates the whole head (observed on transformers {transformers_version()}), so "
                  "ropekit serves the whole head too", UserWarning, stacklevel=7)


def _rotates_whole_head(view: ConfigView, block: Mapping[str, Any]) -> bool:
    """Whether the config's class is observed to ignore ``partial_rotary_factor`` for this block:
    plain RoPE in a class (Llama and its copies) whose default frequencies span the whole head."""
    facts = facts_for(view)
    kind = block.get("rope_type", block.get("type", "default"))
    return facts is not None and "partial_rotary_factor" in facts.unread and kind in ("default", None)


def _bounded(path: str, value: int) -> int:
    if value > MAX_HEAD_DIM:
        raise RopeConfigError(path, f"head dim {value} exceeds {MAX_HEAD_DIM}; is the config right?")
    return value


_PER_LAYER_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", "qk_rope_head_dim",
                        "rotary_dim")


def _per_layer_head_dim(view: ConfigView, layer_type: str) -> tuple[int, str] | None:
    """The ``head_dim`` a heterogeneous config (transformers' ``per_layer_config``, keyed by layer index)
    declares for every layer of ``layer_type`` (Gemma-4's and EmbeddingGemma-2's 512-wide global layers,
    observed by ``ropekit probe``), or ``None`` where it declares none for them. A width that differs
    within one layer type, or a rope key declared per layer, is refused: one table per layer type
    cannot express it."""
    overrides = view.get("per_layer_config")
    if overrides is None or not isinstance(overrides, Mapping) or not overrides:  # None first: no ABC check
        return None
    path = view.path("per_layer_config")
    declared: dict[int, tuple[object, str]] = {}
    for key, override in overrides.items():
        if not isinstance(override, Mapping):
            continue
        for name in _PER_LAYER_ROPE_KEYS:
            if name in override:
                raise RopeConfigError(f"{path}.{key}.{name}", "a rope key declared per layer: one table per layer "
                                      "type cannot express it")
        if "head_dim" in override:
            try:
                declared[int(key)] = (override["head_dim"], f"{path}.{key}.head_dim")
            except (TypeError, ValueError):
                raise RopeConfigError(f"{path}.{key}", "expected a layer index") from None
    if not declared:
        return None
    types = view.get("layer_types")
    if not isinstance(types, list):
        raise RopeConfigError(path, "declares head_dim per layer without layer_types: which table each layer "
                              "gets is unknown")
    widths = {declared.get(index, (None, ""))[0] for index, kind in enumerate(types) if kind == layer_type}
    if widths <= {None}:
        return None
    if len(widths) > 1:
        raise RopeConfigError(path, f"the {layer_type} layers declare different head_dim ({sorted(map(str, widths))}): "
                              "one table per layer type cannot express it")
    index = next(index for index, kind in enumerate(types) if kind == layer_type and index in declared)
    value, value_path = declared[index]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise RopeConfigError(value_path, f"expected a positive integer, got {value!r}")
    return value, value_path


def _raw_head_dim(view: ConfigView, layer_type: str) -> tuple[int, str]:
    per_layer = _per_layer_head_dim(view, layer_type)
    if per_layer is not None:
        return per_layer
    if layer_type == FLAT_LAYER_TYPE and view.get("global_head_dim") is not None:  # Gemma-4 global layers
        return required_int(view, "global_head_dim"), view.path("global_head_dim")
    facts = facts_for(view)
    if view.get("head_dim") is not None and (facts is None or "head_dim" not in facts.unread):
        return required_int(view, "head_dim"), view.path("head_dim")
    if view.get("head_dim") is not None and not view.defaulted("head_dim"):  # a width the class does not follow
        warnings.warn(f"{view.path('head_dim')}: {view.get('model_type')}'s rotary module does not read it: it "
                      f"rotates hidden_size // num_attention_heads channels (observed on transformers "
                      f"{transformers_version()}), and ropekit serves that", UserWarning, stacklevel=7)
    if view.get("kv_channels") is not None and view.get("model_type") in ("chatglm", "qwen", "jetmoe"):
        return required_int(view, "kv_channels"), view.path("kv_channels")  # their rotary is over kv_channels
    hidden = positive_int(view, "hidden_size")
    heads = positive_int(view, "num_attention_heads")
    if hidden is None or heads is None:
        raise RopeConfigError(
            view.path("head_dim"), "missing: declare head_dim, or hidden_size and num_attention_heads"
        )
    return hidden // heads, view.path("hidden_size")


def _mrope(view: ConfigView, block: Mapping[str, Any], path: str) -> tuple[tuple[int, ...] | None, bool, str | None]:
    """``(mrope_section, mrope_interleaved, composition)`` as the model's code applies them.

    A transformers class with a multimodal rotary module decides the composition whatever the
    config's ``mrope_interleaved`` says (a differing flag is reported, not followed), and supplies
    its own section when the config states none. A class without one ignores ``mrope_section``
    (reported). Code ropekit knows only from the config (remote code) follows the config: sections
    with ``mrope_interleaved`` interleave, otherwise they are consecutive.
    """
    section_path = _join(path, "mrope_section")
    section = _mrope_section(block.get("mrope_section"), section_path)
    stated = _mrope_interleaved_stated(block, path)
    model_type = view.get("model_type")
    facts = facts_for(view)
    if facts is None or facts.kind != "rope":
        if section is None:
            return None, False, None
        return section, bool(stated), "interleaved" if stated else "sections"
    if facts.mrope is None:
        if section is not None or stated:
            warnings.warn(f"{section_path if section is not None else _join(path, 'mrope_interleaved')}: "
                          f"{model_type}'s code builds no multimodal rotary module and does not read it; the table "
                          "is a text table, as the model runs it", UserWarning, stacklevel=5)
        return None, False, None
    composition = str(facts.mrope["composition"])
    if composition == "unknown":
        raise RopeConfigError(view.path("model_type"), f"{model_type}'s rotary module composes multimodal positions in "
                              f"a way ropekit has not identified ({facts.mrope.get('reason', '')}); its table is "
                              "not served")
    if section is None:
        default = facts.mrope.get("section")
        if default is None and composition != "row_col":
            raise RopeConfigError(section_path, f"missing: {model_type}'s rotary module needs mrope_section and its "
                                  "class has no default; state the sections (sizes summing to rotary_dim / 2)")
        section = tuple(int(size) for size in default) if default is not None else None
    interleaved = composition == "interleaved"
    if stated is not None and stated != interleaved:
        warnings.warn(f"{_join(path, 'mrope_interleaved')}: {stated} is not read by {model_type}'s code, which "
                      f"composes its sections as {composition!r}; the table follows the code", UserWarning,
                      stacklevel=5)
    return section, interleaved, composition


def _mrope_interleaved_stated(block: Mapping[str, Any], path: str) -> bool | None:
    """The block's ``mrope_interleaved`` (or ``interleaved``), ``None`` when it states neither."""
    if block.get("mrope_interleaved") is None and block.get("interleaved") is None:
        return None
    return _mrope_interleaved(block, path)


def _mrope_interleaved(block: Mapping[str, Any], path: str) -> bool:
    """``mrope_interleaved`` (Qwen3-VL), or its synonym ``interleaved`` (Qwen3-Omni); they must agree."""
    found = {}
    for name in ("mrope_interleaved", "interleaved"):
        value = block.get(name)
        if value is not None:
            if not isinstance(value, bool):
                raise RopeConfigError(f"{path}.{name}", f"expected true or false, got {value!r}")
            found[name] = value
    if len(set(found.values())) > 1:
        raise RopeConfigError(f"{path}.interleaved", f"conflicts with mrope_interleaved ({found}); keep one")
    return any(found.values())


def _mrope_section(value: object, path: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not value:
        raise RopeConfigError(path, f"expected a non-empty list of positive integers, got {value!r}")
    for index, item in enumerate(value):
        if not isinstance(item, int) or isinstance(item, bool) or item <= 0:
            raise RopeConfigError(f"{path}[{index}]", f"expected a positive integer, got {item!r}")
    return tuple(value)


