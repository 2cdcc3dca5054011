"""Derive, from transformers' own config classes and modeling code, what ropekit must know of every
``model_type`` transformers has: whether its code applies RoPE, and the class defaults a saved
config leaves out.

Writes ``core/config/transformers_classes.json``, which the loader reads lazily. Needs the
``reference`` extra at its pinned version (``pip install -e ".[reference]"``); run
``python scripts/transformers_classes.py`` (``--check`` compares with the committed file instead of
writing it, exit 1 on a difference).

Per model_type:

- ``kind``: ``rope`` (its config class declares RoPE parameters, or its modeling code rotates
  queries and keys), ``no_rope`` (neither: learned, ALiBi or relative positions, or no attention),
  or ``composite`` (a wrapper whose language model is a sub-config: ``text`` names the key and
  ``text_type`` the model_type its class builds there by default).
- ``reason`` (``no_rope``): what the modeling code uses instead, read from the code.
- ``defaults``: the class's dataclass defaults for every key ropekit reads (``null`` defaults are
  derived by the class from other keys and are left out).
- ``theta``: the base a default instance of the class carries in its ``rope_parameters`` (a
  number, or one per layer type), what a config stating no base gets.
- ``rope_block``: the rest of that ``rope_parameters`` when it is more than a plain base (a scheme
  such as Ministral-3's yarn, a partial rotary factor), what a config stating no rope block gets.
- ``rope_blocks``: for a class whose rope parameters are nested per layer type, each type's default
  block without its base, where one is more than plain RoPE (``null``: a type without RoPE).
- ``mrope`` (classes whose rotary module composes multimodal positions): observed, not read: the
  class's own rotary module is run on one position axis at a time, and each cos/sin column's axis
  and frequency are matched against the compositions of ``ropekit.tables.mrope``. ``composition``
  and ``layout`` name the one that fits, ``section`` is the module's own section when the config
  states none (``null``: it has none). A module no composition fits is ``"composition":
  "unknown"`` (ropekit then refuses its multimodal positions by name).
- ``renames`` (``composite``): text ``model_type`` names the wrapper builds as another class
  (EXAONE-4.5's ``exaone4_5_text`` is ``exaone4``), observed by stating each; ``"*"``: any name
  transformers does not know is built as that class.
- ``text_defaults`` (``composite``): the keys ropekit reads that the wrapper's own defaults set in the
  language model it builds when the config has no ``text_config``, where they differ from the text
  class's defaults, and the head widths it sets (Voxtral, Mistral-3); ``text_defaults_merged``: those
  it lays under a stated ``text_config`` too (Voxtral).
- ``own_keys`` (``composite``): keys a wrapper whose own code rotates no query or key sets for a
  rotary module of its own (MusicFlamingo's audio time embedding): they are not its text model's.
- ``flat_scaling``: for classes with rope parameters per layer type, the ``layer_types`` a v4 flat
  ``rope_scaling`` block is applied to, and whether its legacy ``type`` key is read (``reads_type``);
  for a class with one block that drops a flat ``rope_scaling`` (Cohere2-MoE), no layer types.
- ``last_layer``: the layer type the class forces on its last layer whatever ``layer_types`` says
  (Gemma-4: ``full_attention``), observed on the config class.
- ``folds``: a block name whose ``layer_types`` entries the class folds into the layer before
  (Dory: ``attention, "mlp"`` pairs are one decoder layer), observed on the config class.
- ``layer_plan``: the layer plan the class builds when a config states no ``layer_types``: a
  ``pattern`` repeated over the layers (``null``: none was found), and the config ``keys`` that
  change it (each with its ``default`` and the ``patterns`` per value), observed by building the
  class at many layer counts with each candidate key changed.
- ``pairing``: ``gptj`` where an MLA class's code rotates interleaved pairs of the rope sub-head its
  projection writes whatever the config's ``rope_interleave`` says (observed by the probe in the
  projection's frame, on the default config and with ``rope_interleave`` flipped).
- ``nope_default``: the layers a class leaves without RoPE when a config states no list (every
  ``every``-th, ``counted_from`` the first or the last layer), observed at several layer counts.
- ``unread``: geometry keys the class's config declares but its own rotary module is observed not
  to follow (``rotary_dim`` of MiniMax-M3-VL's text model): ropekit does not read them either.
- ``spellings``: which top-level keys (of ``rope_keys``: every key some config class's
  ``convert_rope_params_to_dict`` takes, the 4.x spellings ``rotary_pct``, ``rotary_emb_base``,
  ``rope_local_base_freq``, ``global_rope_theta``, ...) the config class converts into which field
  of its rope parameters, per layer type (``""``: its one block), winner first; observed by building
  the class from a config stating them (``from_dict``). Absent: the class keeps no rope parameters.
  ``spellings_beside_block``: the same when the config also states a flat rope block, where that
  differs (a class whose default block is a scheme keeps its own base unless a block is stated).
- ``attending``: for a class whose config rewrites ``num_hidden_layers`` (HRM's text model counts one
  cache slot per recurrent invocation of its layers), the config key whose value is the number of
  layers its code builds and attends with (``num_layers_per_stack``): the layers past it never call
  attention. Observed by the probe (``ropekit.engines.probe.observe``) at three sizes.
- ``layer_type_renames`` (top level): the legacy layer-type names transformers' ``PreTrainedConfig``
  renames in every class (``deepseek_sparse_attention`` is ``indexed_attention``), observed by
  handing each name its ``configuration_utils`` module spells to ``remap_legacy_layer_types``.
- ``reads``: the rope keys the modeling code reads as config attributes (``config.rotary_dim``).
  A rope key neither converted nor read is ignored by the model: ropekit serves what the code
  applies and warns naming the key.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "config" / "transformers_classes.json"

ROPE_FIELDS = frozenset({"rope_parameters", "rope_scaling", "rope_theta", "rotary_dim", "rotary_pct",
                         "rotary_emb_base", "qk_rope_head_dim", "partial_rotary_factor"})
"""A config class declaring any of these fields carries RoPE parameters."""
ROTATES = re.compile(
    r"\b(apply_rotary_pos_emb\w*|rotate_half|rotate_every_two|\w*RotaryEmbedding|apply_rotary_emb\w*|"
    r"apply_rotary_position_embeddings)\b"  # the last: RoFormer's own (sinusoidal tables, rotated interleaved)
)
ROTATES_QUERIES = re.compile(r"\bapply_rotary_pos_emb\b")
"""The function every transformers attention that rotates its queries and keys calls."""
TEXT_KEYS = ("text_config", "language_config", "llm_config", "thinker_config", "decoder_config", "text_encoder",
             "vlm_config")  # the last: retrieval wrappers (ColPali, ColQwen2) around a whole VLM
"""Sub-config keys that hold a wrapper's language model, in the order they are looked for."""
NO_ROPE_REASONS = (
    (re.compile(r"\balibi\b", re.I), "ALiBi attention biases"),
    (re.compile(r"relative_attention_bias|relative_attention_num_buckets"), "relative position buckets"),
    (re.compile(r"nn\.Embedding\(\s*config\.(max_position_embeddings|n_positions|max_source_positions|"
                r"max_target_positions|max_length)|LearnedPositionalEmbedding|self\.wpe\b"),
     "learned absolute position embeddings"),
    (re.compile(r"SinusoidalPositionalEmbedding|sinusoidal", re.I), "sinusoidal position embeddings"),
    (re.compile(r"selective_scan|ssm_state|MambaMixer|\bRwkv", re.I), "state-space or recurrent layers"),
)


def _modeling_sources(config_class: type) -> str:
    module = sys.modules[config_class.__module__]
    folder = Path(module.__file__ or "").parent
    texts = [path.read_text(encoding="utf-8") for path in sorted(folder.glob("modeling_*.py"))
             if not path.name.startswith(("modeling_tf_", "modeling_flax_"))]
    return "\n".join(texts)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _defaults(config_class: type, read_keys: frozenset[str], aliases: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    wanted = set(read_keys) | {alias for names in aliases.values() for alias in names}
    found: dict[str, Any] = {}
    if dataclasses.is_dataclass(config_class):
        for field in dataclasses.fields(config_class):
            if field.name in wanted and field.name not in ("model_type", "text_config", "layer_types"):
                default = field.default
                if default is not dataclasses.MISSING and default is not None and _jsonable(default):
                    found[field.name] = default
    return dict(sorted(found.items()))


def _describe(model_type: str, config_class: type, read_keys: frozenset[str],
              aliases: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    fields = {field.name for field in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) \
        else set()
    sub_configs = getattr(config_class, "sub_configs", None) or {}
    text_key = next((key for key in TEXT_KEYS if key in sub_configs), None)
    source = _modeling_sources(config_class)
    if text_key is not None and (not (fields & ROPE_FIELDS) or not ROTATES_QUERIES.search(source)):
        # a wrapper; one whose own code rotates no query or key (MusicFlamingo's rope block drives a
        # time embedding added to audio features) is one too: its text model's table is the one served
        entry: dict[str, Any] = {"kind": "composite", "text": text_key}
        try:
            built = config_class()
            inner = getattr(built, text_key, None)
            if inner is not None and getattr(inner, "model_type", None):
                entry["text_type"] = inner.model_type
                entry.update(_text_defaults(config_class, text_key, inner, read_keys))
                renames = _renames(config_class, text_key)
                if renames:
                    entry["renames"] = renames
            if fields & ROPE_FIELDS:  # the wrapper's own rope (a time embedding of audio features)
                entry["own_keys"] = sorted(key for key in read_keys if key not in ("model_type", text_key)
                                           and getattr(built, key, None) is not None)
        except Exception:  # a wrapper that cannot be built with defaults names no default text model
            pass
        return entry
    if ROTATES.search(source) or (fields & ROPE_FIELDS and not source):
        entry = {"kind": "rope", "defaults": {**_defaults(config_class, read_keys, aliases),
                                              **_global_head_dim(config_class)}}
        observed = {"theta": _class_theta(config_class), "rope_block": _class_rope_block(config_class),
                    "rope_blocks": _class_rope_blocks(config_class),
                    "flat_scaling": _flat_scaling(config_class), "folds": _folds(config_class),
                    "last_layer": _last_layer(config_class), "unread": _unread(config_class),
                    "pairing": _pairing(model_type, config_class), "nope_default": _nope_default(config_class),
                    "attending": _attending(model_type, config_class)}
        entry.update((name, fact) for name, fact in observed.items() if fact)  # a base is never 0
        entry.update(_key_facts(config_class))  # an empty spelling list is a fact too: nothing converted
        plan = _layer_plan(config_class, observed["last_layer"])
        if plan is not None:
            entry["layer_plan"] = plan
        if observed["unread"]:
            entry["defaults"] = {key: value for key, value in entry["defaults"].items()
                                 if key not in observed["unread"]}
        mrope = _mrope(config_class) if "recomposition_frequencies" in source else None
        if mrope is not None:
            entry["mrope"] = mrope
        return entry
    reason = next((why for pattern, why in NO_ROPE_REASONS if pattern.search(source)), None)
    if reason is None:
        reason = "its modeling code applies no rotary embedding"
        if fields & ROPE_FIELDS:
            reason += " (its config class declares RoPE parameters that no layer applies)"
    return {"kind": "no_rope", "reason": reason}


def _global_head_dim(config_class: type) -> dict[str, int]:
    """``{"global_head_dim": width}`` for a class that widens its full-attention layers' heads by a
    default of its own code rather than of a dataclass field (Gemma-4's ``kwargs.pop("global_head_dim",
    512)`` into ``per_layer_config``): observed on default instances of two sizes, where every
    ``full_attention`` layer gets the same head width, other than ``head_dim``, whatever the size."""
    if dataclasses.is_dataclass(config_class) and any(
            field.name == "global_head_dim" for field in dataclasses.fields(config_class)):
        return {}  # a field: _defaults has it
    widths = set()
    for sizes in ({}, {"hidden_size": 1024, "num_attention_heads": 4, "num_hidden_layers": 12}):
        try:
            saved = config_class(**sizes).to_dict()
        except Exception:
            return {}
        per_layer, types = saved.get("per_layer_config"), saved.get("layer_types")
        if not isinstance(per_layer, dict) or not isinstance(types, list):
            return {}
        by_index = {int(key): value for key, value in per_layer.items()
                    if str(key).isdigit() and isinstance(value, dict)}
        full = {by_index.get(index, {}).get("head_dim") for index, name in enumerate(types) if name == "full_attention"}
        width = next(iter(full)) if len(full) == 1 else None
        if not isinstance(width, int) or width == saved.get("head_dim"):
            return {}
        widths.add(width)
    return {"global_head_dim": widths.pop()} if len(widths) == 1 else {}


def _renames(config_class: type, text_key: str) -> dict[str, str]:
    """The language-model ``model_type`` names a wrapper replaces by another when a config states
    them (EXAONE-4.5 first released its text model as ``exaone4_5_text``, which its class now builds as
    ``exaone4``). Observed: each name-like string of the configuration module that is no model_type
    of this transformers is stated as the text config's ``model_type``, and the class's built one kept
    where it differs."""
    import inspect

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    try:
        source = inspect.getsource(sys.modules[config_class.__module__])
    except (OSError, TypeError, KeyError):
        return {}
    def built_as(name: str) -> str | None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                built = getattr(config_class(**{text_key: {"model_type": name}}), text_key)
        except Exception:
            return None
        kind = getattr(built, "model_type", name)
        return kind if kind != name else None

    anything = built_as("ropekit_no_such_model_type")
    if anything is not None:  # the wrapper builds its one text class whatever an unknown name says (Step-3.5)
        return {"*": anything}
    found: dict[str, str] = {}
    for name in sorted(set(re.findall(r"[\"']([a-z][a-z0-9_]*_[a-z0-9_]+)[\"']", source)) - set(CONFIG_MAPPING_NAMES)):
        kind = built_as(name)
        if kind is not None:
            found[name] = kind
    return found


def _text_defaults(config_class: type, text_key: str, inner: Any, read_keys: frozenset[str]) -> dict[str, Any]:
    """What a wrapper's own defaults put into the language model it builds, where ropekit would not
    find them from the text class alone: ``text_defaults``, the keys ropekit reads as the wrapper builds
    its default language model (no ``text_config``), where they differ from the text class's own
    defaults, and every head width it sets (Voxtral's text model has base 1e8, head_dim 128 and 30
    layers; Mistral-3's base 1e9); ``text_defaults_merged``, those of them the wrapper also lays under
    a ``text_config`` the config states (Voxtral does, for old configs; most wrappers do not): observed
    by stating one that names only its model_type and a doubled ``hidden_size``, so a width derived from
    the hidden size is not taken for a constant."""
    try:
        plain = type(inner)().to_dict()
        mine = inner.to_dict()
    except Exception:
        return {}
    wanted = read_keys - {"model_type", "text_config", "layer_types", "rope_scaling"}
    widths = {"head_dim", "global_head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "kv_channels"}
    found = {key: mine[key] for key in sorted(wanted)
             if mine.get(key) is not None and _jsonable(mine[key])
             and (mine.get(key) != plain.get(key) or key in widths)}
    block = found.pop("rope_parameters", None)
    if isinstance(block, dict):
        if set(block) <= {"rope_theta", "rope_type"} and block.get("rope_type", "default") == "default":
            found["rope_theta"] = block["rope_theta"]
        else:
            found["rope_parameters"] = block
    if not found or all(key in widths and mine.get(key) == plain.get(key) for key in found):
        return {}
    facts: dict[str, Any] = {"text_defaults": found}
    hidden = mine.get("hidden_size")
    try:
        stated = {"model_type": inner.model_type, **({"hidden_size": 2 * hidden} if isinstance(hidden, int) else {})}
        again = getattr(config_class(**{text_key: stated}), text_key).to_dict()
    except Exception:
        return facts
    again_block = again.get("rope_parameters")
    if isinstance(again_block, dict) and set(again_block) <= {"rope_theta", "rope_type"}:
        again = {**again, "rope_theta": again_block.get("rope_theta")}
    merged = {key: value for key, value in found.items() if key != "hidden_size" and again.get(key) == value
              and (key in widths or plain.get(key) != value)
              and (key != "rope_theta" or plain.get("rope_parameters", {}).get("rope_theta") != value)}
    if "hidden_size" in found:  # the hidden size itself: stated a text_config naming only its model_type
        try:
            alone = getattr(config_class(**{text_key: {"model_type": inner.model_type}}), text_key).to_dict()
        except Exception:
            alone = {}
        if alone.get("hidden_size") == found["hidden_size"] != plain.get("hidden_size"):
            merged["hidden_size"] = found["hidden_size"]
    if merged:
        facts["text_defaults_merged"] = merged
    return facts


def _default_rope_parameters(config_class: type) -> dict[str, Any] | None:
    """A default instance's ``rope_parameters`` (``None``: it cannot be built, or has none)."""
    try:
        parameters = config_class().rope_parameters
    except Exception:
        return None
    return parameters if isinstance(parameters, dict) and parameters else None


def _class_theta(config_class: type) -> float | dict[str, float] | None:
    """The base the class uses when a config states none: its default instance's rope_parameters
    (per layer type when they are nested), as transformers' standardisation fills them in."""
    parameters = _default_rope_parameters(config_class)
    if parameters is None:
        return None
    if "rope_theta" in parameters:
        value = parameters["rope_theta"]
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    nested = {name: float(block["rope_theta"]) for name, block in parameters.items()
              if isinstance(block, dict) and isinstance(block.get("rope_theta"), (int, float))}
    return dict(sorted(nested.items())) or None


def _class_rope_block(config_class: type) -> dict[str, Any] | None:
    """The rope block a default instance of the class carries when it is more than a plain base
    (a scheme, or a partial rotary factor), without its base (``theta`` has it): what a config
    stating no rope block gets. Nested per-layer-type blocks are left out."""
    try:
        parameters = config_class().rope_parameters
    except Exception:
        return None
    if not isinstance(parameters, dict) or not ("rope_type" in parameters or "rope_theta" in parameters):
        return None
    block = {key: value for key, value in parameters.items() if key != "rope_theta" and _jsonable(value)}
    if block.get("rope_type", "default") == "default" and not set(block) - {"rope_type"}:
        return None
    return dict(sorted(block.items()))


def _class_rope_blocks(config_class: type) -> dict[str, Any] | None:
    """For a class whose default rope parameters are nested per layer type, each type's block without
    its base (``theta`` has it) where some type's is more than plain RoPE (Gemma-4's proportional
    full layers, Laguna's partial rotary factor 0.5 on them) or is null (a type without RoPE):
    what a config stating no rope block gets per layer type."""
    parameters = _default_rope_parameters(config_class)
    if parameters is None or not all(isinstance(block, dict) or block is None for block in parameters.values()):
        return None
    if "rope_type" in parameters or "rope_theta" in parameters:
        return None
    blocks = {name: None if block is None else
              dict(sorted((key, value) for key, value in block.items() if key != "rope_theta" and _jsonable(value)))
              for name, block in parameters.items()}
    plain = all(block is not None and set(block) <= {"rope_type"} and block.get("rope_type", "default") == "default"
                for block in blocks.values())
    return None if plain else dict(sorted(blocks.items()))


def _rotary_modules(config_class: type, *, multimodal: bool = True) -> list[type]:
    """The rotary classes (text, not vision/audio) that ``config_class``'s own model classes build:
    those of its modeling module (multimodal: with ``recomposition_frequencies``; else any
    ``...RotaryEmbedding``) that a model class declaring ``config_class`` names in its ``__init__``
    (all of them if none says)."""
    import importlib
    import inspect

    package = config_class.__module__.rsplit(".", 1)[0]
    try:
        module = importlib.import_module(f"{package}.modeling_{package.rsplit('.', 1)[1]}")
    except ImportError:  # a class run by another's code (EXAONE by LlamaModel): that code's module
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

        model_class = getattr(transformers, MODEL_MAPPING_NAMES.get(getattr(config_class, "model_type", ""), ""), None)
        if model_class is None or multimodal:
            return []
        module = sys.modules[model_class.__module__]
    members = [member for _, member in inspect.getmembers(module, inspect.isclass)
               if member.__module__ == module.__name__]

    def text_rotary(member: type) -> bool:
        """Not an encoder's: an encoder word right before ``RotaryEmbedding`` makes one
        (``Qwen2VLVisionRotaryEmbedding``; an encoder model's own rotary is its text rotary); a family name
        holding such a word does not (``GlmImageTextRotaryEmbedding``,
        ``Granite4VisionTextRotaryEmbedding``, ``HiggsAudioV2RotaryEmbedding``)."""
        return not re.search(r"(Vision|Visual|Audio|Image|DiT)RotaryEmbedding$", member.__name__)

    rotary = [member for member in members
              if (hasattr(member, "recomposition_frequencies") if multimodal else
                  member.__name__.endswith("RotaryEmbedding"))
              and text_rotary(member)]
    builders = "\n".join(inspect.getsource(member.__init__) for member in members
                         if getattr(member, "config_class", None) is config_class and "__init__" in vars(member))
    named = [member for member in rotary if re.search(rf"\b{member.__name__}\(", builders)]
    if not multimodal:  # a text rotary built inside attention (Moshi) is named by no model class
        return named or rotary
    return named if builders else rotary


def _observe(module: Any, layer_type: str | None) -> tuple[Any, Any] | None:
    """Per cos/sin column: the axis whose position moves it and its angle per unit position."""
    import numpy as np
    import torch

    x = torch.zeros(1, dtype=torch.float32)
    for axes in (3, 2, 4, 5):
        try:
            axis_of, angle = None, None
            for axis in range(axes):
                positions = torch.zeros(axes, 1, 1, dtype=torch.long)
                positions[axis] = 1
                with torch.no_grad():
                    cos, sin = module(x, positions) if layer_type is None else module(x, positions, layer_type)
                cos, sin = cos.double().reshape(-1).numpy(), sin.double().reshape(-1).numpy()
                if axis_of is None:
                    axis_of, angle = np.full(cos.shape, -1), np.zeros(cos.shape)
                moved = np.abs(sin) > 0
                axis_of[moved] = axis
                angle[moved] = np.arctan2(sin[moved], cos[moved])
            return axis_of, angle
        except Exception:  # a module that reads another number of axes
            continue
    return None


def _flat_scaling(config_class: type) -> dict[str, Any] | None:
    """For a class whose rope parameters are per layer type: the layer types a transformers v4
    flat ``rope_scaling`` block is applied to, and whether its legacy ``type`` key is read (Gemma-3's
    config class merges the block into its full-attention parameters after setting ``rope_type``
    default, so ``{"type": "linear"}`` scales nothing where ``{"rope_type": "linear"}`` does).
    Observed by building the class with each spelling and reading its ``rope_parameters``."""
    def scaled(spelling: str) -> list[str] | None:
        try:
            built = config_class(rope_scaling={spelling: "linear", "factor": 2.0})
        except Exception:
            return None
        block = getattr(built, "rope_parameters", None)
        if not isinstance(block, dict) or not all(isinstance(value, dict) for value in block.values()):
            return None
        return sorted(name for name, value in block.items()
                      if value.get("rope_type") == "linear" and value.get("factor") == 2.0)

    default = _default_rope_parameters(config_class)
    if default is None:
        return None
    if not all(isinstance(value, dict) for value in default.values()):  # one block: is a flat rope_scaling kept?
        try:
            kept = config_class(rope_scaling={"rope_type": "linear", "factor": 2.0}).rope_parameters
        except Exception:
            return None
        dropped = kept.get("rope_type") != "linear" or kept.get("factor") != 2.0
        return {"layer_types": [], "reads_type": False} if dropped else None  # Cohere2-MoE drops it
    layer_types = scaled("rope_type")
    if layer_types is None:
        return None
    return {"layer_types": layer_types, "reads_type": scaled("type") == layer_types}


SPELLING_VALUES: dict[str, tuple[float, ...]] = {"rotary_pct": (0.375, 0.625), "partial_rotary_factor": (0.625, 0.375)}
"""Two values to state a fraction-like key with (one differs from any class default); a base-like
key is stated with a base of its own (:func:`_spelling_value`)."""
BLOCK = "rope_parameters"
"""The name a spelling list gives the rope block's own value."""


@functools.cache
def candidate_keys() -> tuple[str, ...]:
    """Every top-level key some config class of transformers converts into its rope parameters,
    read from the classes' own ``convert_rope_params_to_dict`` (the keys it takes out of the
    config's ``kwargs``: ``rotary_pct``, ``rope_local_base_freq``, ``global_rope_theta``, ...),
    beside the rope fields a config class may declare."""
    import inspect

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    found = {"rope_theta", "partial_rotary_factor", "rotary_pct", "rotary_emb_base", "rotary_dim"}
    for model_type in CONFIG_MAPPING_NAMES:
        try:
            source = inspect.getsource(CONFIG_MAPPING[model_type].convert_rope_params_to_dict)
        except Exception:
            continue
        found.update(re.findall(r'kwargs\.(?:pop|get)\(\s*"(\w+)"', source))
    return tuple(sorted(found - {"rope_scaling", "rope_parameters", "per_layer_config"}))


def _spelling_value(key: str, index: int, head_dim: int | None) -> float | int | None:
    if key in SPELLING_VALUES:
        return SPELLING_VALUES[key][index]
    if key == "rotary_dim":
        return None if head_dim is None or head_dim < 8 else (head_dim // 4 * 2 if index == 0 else head_dim // 2 + 2)
    return 12_345.0 + 1_000.0 * candidate_keys().index(key) + 100_000.0 * index


def _leaves(parameters: Any) -> dict[tuple[str, str], Any]:
    """``{(layer type or "", field): value}`` of a rope_parameters dict (flat or nested)."""
    if not isinstance(parameters, dict):
        return {}
    if all(isinstance(value, dict) or value is None for value in parameters.values()) and parameters:
        return {(name, field): value for name, block in parameters.items() if isinstance(block, dict)
                for field, value in block.items() if field != "rope_type"}
    return {("", field): value for field, value in parameters.items() if field != "rope_type"}


def _spellings(config_class: type, beside: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Which top-level keys the class's config converts into which field of its rope parameters,
    for which layer types, and which spelling wins when a config states several: observed by
    building the class from a config stating each key of :func:`candidate_keys` (``from_dict``, as
    ``from_pretrained`` does) and reading the ``rope_parameters`` it keeps. ``{field: {layer type
    ("" for a class with one block): [spellings, the winner first]}}``, where the rope block's own
    value is :data:`BLOCK` (it always wins in transformers 5.24; recorded, not assumed). ``None``:
    the class keeps no rope parameters (GPT-J, CodeGen: their code reads its own keys). ``beside``:
    a flat rope block the config states too (a class whose default block is a scheme, Apertus'
    llama3, keeps its own base unless the config states a block: then a top-level base is read)."""
    def built(**stated: Any) -> dict[tuple[str, str], Any] | None:
        if beside is not None and "rope_parameters" not in stated:
            stated = {**stated, "rope_scaling": dict(beside)}
        try:
            return _leaves(config_class.from_dict(dict(stated)).rope_parameters)
        except Exception:
            return None

    default = built()
    if not default:
        return None
    try:
        instance = config_class()
        head_dim = getattr(instance, "head_dim", None) or instance.hidden_size // instance.num_attention_heads
    except Exception:
        head_dim = None
    landing: dict[tuple[str, str], list[str]] = {}
    values: dict[str, Any] = {}
    for key in candidate_keys():
        for index in (0, 1):
            value = _spelling_value(key, index, head_dim if isinstance(head_dim, int) else None)
            seen = built(**{key: value}) if value is not None else None
            changed = [leaf for leaf, now in (seen or {}).items() if default.get(leaf) != now]
            if changed:
                values[key] = value
                for leaf in changed:
                    landing.setdefault(leaf, []).append(key)
                break
    found: dict[str, dict[str, list[str]]] = {}
    for (layer_type, field), keys in sorted(landing.items()):
        order = _precedence(built, layer_type, field, keys, values, default)
        found.setdefault(field, {})[layer_type] = order
    return found


def _precedence(built: Any, layer_type: str, field: str, keys: list[str], values: dict[str, Any],
                default: dict[tuple[str, str], Any]) -> list[str]:
    """``keys`` (and the rope block, :data:`BLOCK`) in the order in which they win when a config
    states them together, each with its own value."""
    block_value = 0.125 if field == "partial_rotary_factor" else 987_654.0
    remaining = [*keys, BLOCK]
    order: list[str] = []
    while len(remaining) > 1:
        stated: dict[str, Any] = {key: values[key] for key in remaining if key != BLOCK}
        if BLOCK in remaining:
            parameters: dict[str, Any] = {}
            for (name, leaf_field), value in default.items():
                target = parameters.setdefault(name, {}) if name else parameters
                target[leaf_field] = value
            (parameters.setdefault(layer_type, {}) if layer_type else parameters)[field] = block_value
            if layer_type:
                for block in parameters.values():
                    block.setdefault("rope_type", "default")
            else:
                parameters.setdefault("rope_type", "default")
            stated["rope_parameters"] = parameters
            stated.pop("rope_scaling", None)
        seen = (built(**stated) or {}).get((layer_type, field))
        winner = next((key for key in remaining if (block_value if key == BLOCK else values[key]) == seen), None)
        if winner is None:  # a converted value (rotary_dim into a factor): the one spelling that is not the block
            winner = next(key for key in remaining if key != BLOCK) if seen != block_value else BLOCK
        order.append(winner)
        remaining.remove(winner)
    return order + remaining


def _reads(config_class: type) -> list[str]:
    """The rope keys (:func:`candidate_keys`, ``rope_scaling``, ``rope_parameters``) the class's
    modeling code reads as attributes of its config (``config.rotary_dim`` in GPT-J's attention),
    beside what its config class converts into its rope parameters."""
    source = _modeling_sources(config_class)
    return [key for key in (*candidate_keys(), "rope_scaling", "rope_parameters")
            if re.search(rf"\bconfig\.{key}\b|getattr\(\s*[\w.]*config\s*,\s*[\"']{key}[\"']", source)]


def _key_facts(config_class: type) -> dict[str, Any]:
    """``spellings`` (:func:`_spellings` with the rope block's own value, which always wins, left
    out; absent for a class that keeps no rope parameters), ``spellings_beside_block`` (the same
    with a flat rope block stated, where that differs) and ``reads`` (:func:`_reads`)."""
    def without_block(found: dict[str, Any] | None) -> dict[str, Any] | None:
        if found is None:
            return None
        for field, per_type in found.items():
            for layer_type, order in per_type.items():
                if order[0] != BLOCK:  # transformers 5.24 lets the block win everywhere; a release that does not
                    raise AssertionError(f"{config_class.__name__}: {field} of {layer_type or 'the block'} is won by "
                                         f"{order[0]} over the rope block; ropekit's parse assumes the block wins")
                per_type[layer_type] = order[1:]
        return found

    alone = without_block(_spellings(config_class))
    facts: dict[str, Any] = {}
    if alone is not None:
        facts["spellings"] = alone
    default = _default_rope_parameters(config_class)
    if alone is not None and default is not None and "rope_theta" in default:  # one block: and beside a stated one?
        beside = without_block(_spellings(config_class, {"rope_type": "default"}))
        if beside is not None and beside != alone:
            facts["spellings_beside_block"] = beside
    reads = _reads(config_class)
    if reads:
        facts["reads"] = reads
    return facts


PLAN_LENGTHS = (*range(1, 13), 16, 24, 36, 48, 64)
"""The layer counts a class's default layer plan is observed at."""
LONGEST_PERIOD = 16
"""A pattern longer than this is not taken for a repetition (it would be seen fewer than four times)."""
PLAN_VALUES = range(1, 9)
"""The values of an integer plan key (ModernBERT's ``global_attn_every_n_layers``) a plan is observed at."""


def _plan_at(config_class: type, layers: int, **stated: Any) -> list[str] | None:
    try:
        built = config_class.from_dict({"num_hidden_layers": layers, **stated})
    except Exception:
        return None
    types = getattr(built, "layer_types", None)
    return [str(name) for name in types] if isinstance(types, (list, tuple)) and len(types) == layers else None


def _periodic(config_class: type, last: str | None, **stated: Any) -> dict[str, Any] | None:
    """The plan the class builds over any number of layers, as a ``pattern`` (layer ``i`` is
    ``pattern[i % len(pattern)]``) with its ``first`` and ``last`` layers forced where the class
    forces them (FLINT's first layer, OLMo-hybrid's and Gemma-4's last), observed at
    :data:`PLAN_LENGTHS`; ``None``: no such plan fits (or the class builds none)."""
    plans = {layers: _plan_at(config_class, layers, **stated) for layers in PLAN_LENGTHS}
    longest = plans[PLAN_LENGTHS[-1]]
    if longest is None:
        return None
    candidates: list[tuple[list[str], str | None]] = [([], last), ([], longest[-1]), (longest[:1], last),
                                                       (longest[:1], longest[-1]), (longest[:2], None),
                                                       (longest[:2], longest[-1])]
    for head, end in candidates:
        body = range(len(head), len(longest) - (1 if end is not None else 0))
        period = next((size for size in range(1, LONGEST_PERIOD + 1)
                       if all(longest[index] == longest[body[0] + (index - body[0]) % size] for index in body)), None)
        if period is None:
            continue
        pattern = [longest[next(index for index in body if index % period == phase)] for phase in range(period)]
        if len(head) > 1 and head[1:] == [pattern[index % period] for index in range(1, len(head))]:
            continue  # a head the pattern gives anyway is the shorter candidate's
        misfits = [layers for layers, plan in plans.items() if plan != _expected(pattern, head, end, layers)]
        # the class may build its first lengths its own way (OLMo-hybrid forces a full layer into 2 or 3, and
        # builds no 1-layer model): kept as observed, below the shortest length from which the pattern holds
        shortest = max(misfits, default=0) + 1
        if shortest > min(2 * period + len(head) + 1, PLAN_LENGTHS[11]) or any(
                layers not in plans for layers in range(1, shortest)):
            continue
        plan: dict[str, Any] = {"pattern": pattern, "first": head[0] if len(head) == 1 else None, "last": end}
        if len(head) > 1:
            plan["head"] = head
        if shortest > 1:
            plan["short"] = {str(layers): plans[layers] for layers in range(1, shortest)}
        return plan
    return None


def _expected(pattern: list[str], head: list[str], end: str | None, layers: int) -> list[str]:
    expected = [pattern[index % len(pattern)] for index in range(layers)]
    expected[: len(head)] = head[:layers]
    if end is not None and layers:
        expected[-1] = end
    return expected[:layers]


def _plan_keys(config_class: type) -> list[tuple[str, Any]]:
    """Keys that may steer a class's default layer plan, each with its default (``None``: the class
    takes it from the config's ``kwargs``): its dataclass fields of int, bool or no default, and
    every key its own code takes from ``kwargs``."""
    import inspect

    found: dict[str, Any] = {}
    for field in dataclasses.fields(config_class):
        default = field.default
        if field.name in ("num_hidden_layers", "layer_types") or default is dataclasses.MISSING:
            continue
        if default is None or isinstance(default, (bool, int)):
            found[field.name] = default
    try:
        source = inspect.getsource(config_class)
    except Exception:
        source = ""
    for name in re.findall(r'kwargs\.(?:pop|get)\(\s*"(\w+)"', source):
        found.setdefault(name, None)
    return sorted(found.items())


def _layer_plan(config_class: type, last: str | None) -> dict[str, Any] | None:
    """The layer plan a class builds when a config states no ``layer_types``: ``pattern`` repeated
    over the layers with its forced ``first`` and ``last`` layers (:func:`_periodic`; ``null``: it
    builds no such plan), the layer ``types`` it uses at any length, and ``keys``, the config keys
    that change it, each with its ``default``
    and the plan (pattern, first, last) the class builds at each value
    (``patterns``, per value of :data:`PLAN_VALUES` for an integer key, ``true``/``false`` for a
    flag; a value whose plan is no pattern is left out). Found by building the class with each key
    of :func:`_plan_keys` changed and comparing the plans; ``None`` for a class without
    ``layer_types``."""
    if not dataclasses.is_dataclass(config_class) or "layer_types" not in {
            field.name for field in dataclasses.fields(config_class)}:
        return None
    base = _plan_at(config_class, 12)
    if base is None:
        return None
    keys: dict[str, Any] = {}
    for key, default in _plan_keys(config_class):
        tries = [not default] if isinstance(default, bool) else [default + 1] if isinstance(default, int) else [2, 3]
        if not any((plan := _plan_at(config_class, 12, **{key: value})) is not None and plan != base
                   for value in tries):
            continue
        values: list[Any] = [True, False] if isinstance(default, bool) else list(PLAN_VALUES)
        patterns = {json.dumps(value): _periodic(config_class, last, **{key: value}) for value in values}
        keys[key] = {"default": default, "patterns": {value: plan for value, plan in patterns.items()
                                                       if plan is not None}}
    plan = _periodic(config_class, last) or {"pattern": None, "first": None, "last": None}
    types = sorted({name for layers in PLAN_LENGTHS for name in (_plan_at(config_class, layers) or ())})
    return {**plan, "types": types, "keys": keys}


def _last_layer(config_class: type) -> str | None:
    """The layer type the class forces on its last layer whatever ``layer_types`` says (Gemma-4:
    ``full_attention``): observed by building it on a list of sliding layers only."""
    if not dataclasses.is_dataclass(config_class) or "layer_types" not in {
            field.name for field in dataclasses.fields(config_class)}:
        return None
    stated = ["sliding_attention"] * 4
    try:
        kept = list(getattr(config_class(num_hidden_layers=len(stated), layer_types=list(stated)), "layer_types", []))
    except Exception:
        return None
    forced = len(kept) == len(stated) and kept[:-1] == stated[:-1] and kept[-1] != stated[-1]
    return str(kept[-1]) if forced else None


def _folds(config_class: type) -> str | None:
    """The block name whose ``layer_types`` entries the class folds into the layer before (Dory's
    released configs list ``attention, "mlp"`` pairs, one decoder layer each): observed by building
    the class on such a list and reading the ``layer_types`` and ``num_hidden_layers`` it keeps."""
    if not dataclasses.is_dataclass(config_class) or "layer_types" not in {
            field.name for field in dataclasses.fields(config_class)}:
        return None
    paired = ["sliding_attention", "mlp", "full_attention", "mlp"] * 2
    try:
        built = config_class(num_hidden_layers=len(paired), layer_types=paired)
    except Exception:
        return None
    folded = list(getattr(built, "layer_types", None) or []) == paired[::2]
    return "mlp" if folded and getattr(built, "num_hidden_layers", None) == len(paired) // 2 else None


def _attending(model_type: str, config_class: type) -> dict[str, Any] | None:
    """For a class whose config rewrites the ``num_hidden_layers`` it is given (HRM's text model: one
    cache slot per recurrent invocation, ``num_layers_per_stack * H_cycles * (L_cycles + 1)``), the
    config key holding the number of layers its code builds and attends with, ``{"key": name}``: the
    probe (:func:`ropekit.engines.probe.observe`) runs the class stating 1, 2 and 3 layers and counts the
    layers that call attention; the key is the one integer field of the built config equal to that count
    every time. ``None``: the class keeps the count it is given (or the probe cannot run it)."""
    sizes = (1, 2, 3)
    built = []
    for layers in sizes:
        try:
            built.append(config_class.from_dict({"num_hidden_layers": layers}))
        except Exception:
            return None
    if all(getattr(config, "num_hidden_layers", layers) == layers for config, layers in zip(built, sizes, strict=True)):
        return None
    from ropekit.engines.probe import observe

    counts = []
    for layers in sizes:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, _, seen = observe({"model_type": model_type, "num_hidden_layers": layers}, seq_lens=[4096])
        except Exception:
            return None
        attending = [layer.index for layer in seen if layer.kind != "no_attention"]
        if attending != list(range(len(attending))):
            return None
        counts.append(len(attending))
    keys = [field.name for field in dataclasses.fields(config_class) if field.name != "num_hidden_layers"
            and all(getattr(config, field.name, None) == count and config.num_hidden_layers != count
                    for config, count in zip(built, counts, strict=True))]
    return {"key": keys[0]} if len(keys) == 1 else None


def layer_type_renames() -> dict[str, str]:
    """The legacy layer-type names every config class renames (``PreTrainedConfig.__post_init__`` calls
    ``remap_legacy_layer_types``): each word its module spells as a string literal, handed to that function."""
    import inspect

    from transformers import configuration_utils

    remap = getattr(configuration_utils, "remap_legacy_layer_types", None)
    if remap is None:
        return {}
    names = sorted(set(re.findall(r'"([a-z_]+)"', inspect.getsource(configuration_utils))))
    return {name: renamed[0] for name in names if (renamed := remap([name])) != [name]}


def _unread(config_class: type) -> list[str]:
    """Fields of ``config_class`` that look like RoPE geometry but that its own text rotary module is
    observed not to follow: today ``rotary_dim`` (MiniMax-M3-VL's text config declares 64 while its
    rotary module rotates the whole head). Observed by building the module with the field's default
    and with half of it: the same number of frequencies means the field is not read. A class
    without a module to build (GPT-J, CodeGen rotate inside attention) keeps the field read."""
    if not dataclasses.is_dataclass(config_class):
        return []
    unread = ["partial_rotary_factor"] if _ignores_partial(config_class) else []
    unread += ["head_dim"] if _ignores_head_dim(config_class) else []
    default = next((field.default for field in dataclasses.fields(config_class) if field.name == "rotary_dim"), None)
    if not isinstance(default, int) or default < 4:
        return unread
    widths: set[tuple[int, int]] = set()
    for rotary in _rotary_modules(config_class, multimodal=False):
        try:
            sizes = [rotary(config=config_class(rotary_dim=dim)).inv_freq.shape[-1] for dim in (default, default // 2)]
        except Exception:
            continue
        widths.add((sizes[0], sizes[1]))
    return unread + (["rotary_dim"] if widths and all(first == second for first, second in widths) else [])


def _pairing(model_type: str, config_class: type) -> str | None:
    """``gptj`` for an MLA class (one whose default config has a ``qk_rope_head_dim``) whose code
    rotates interleaved pairs ``(2j, 2j+1)`` of the rope sub-head its projection writes, whatever the
    config's ``rope_interleave`` says (DeepSeek-V3.2, GLM-5: ``apply_rotary_pos_emb_interleave``, which
    writes them half-split). Observed, not read: ``ropekit.engines.probe.observe`` runs the class on its
    default config, and on it with ``rope_interleave`` flipped, and traces each rotated query channel
    back to the projection that produced it; one layout seen both times, in that input frame, is the
    fact. ``None``: not MLA, the config decides (DeepSeek-V3 reads ``rope_interleave``), or not observed."""
    from ropekit.engines.probe import observe

    if "interleave" not in _modeling_sources(config_class):
        return None  # no interleaving code at all: the config's rope_interleave (or the family) decides
    try:
        built = config_class()
    except Exception:
        return None
    if not isinstance(getattr(built, "qk_rope_head_dim", None), int):
        return None
    seen: set[str] = set()
    default = getattr(built, "rope_interleave", None)
    for interleave in (None, not default if isinstance(default, bool) else False):
        config = {"model_type": model_type, **({} if interleave is None else {"rope_interleave": interleave})}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, _, layers = observe(config, seq_lens=[4096])
        except Exception:
            return None
        rotating = [layer for layer in layers if layer.kind == "rotates"]
        if not rotating or any(layer.frame != "input" for layer in rotating):
            return None
        seen.update(layer.layout for layer in rotating)
    return "gptj" if seen == {"gptj"} else None


def _nope_default(config_class: type) -> dict[str, Any] | None:
    """The layers a class leaves without RoPE when a config states no list: every ``every``-th layer
    counted from the first (Llama-4, SmolLM3, Mistral-Large-4: ``no_rope_layers`` built from an interval
    of its code) or from the last (Muse: ``layer_rope_theta`` 0 there, the global base elsewhere).
    Observed by building the class at several layer counts; ``None`` when it builds no such list."""
    found: set[tuple[int, str]] | None = None
    for layers in (8, 9, 12, 13):
        try:
            saved = config_class(num_hidden_layers=layers).to_dict()
        except Exception:
            return None
        uses = saved.get("no_rope_layers")
        thetas = saved.get("layer_rope_theta")
        if isinstance(uses, list) and len(uses) == layers and set(uses) <= {0, 1}:
            nope = [index for index, value in enumerate(uses) if value == 0]
        elif isinstance(thetas, list) and len(thetas) == layers:
            base = (saved.get("rope_parameters") or {}).get("rope_theta")
            if any(value not in (0, base) for value in thetas):
                return None  # bases that differ by layer: not a NoPE plan
            nope = [index for index, value in enumerate(thetas) if value == 0]
        else:
            return None
        if not nope:
            return None
        fits = {(every, start) for every in range(2, 9) for start in ("first", "last")
                if nope == [index for index in range(layers)
                            if ((index + 1) if start == "first" else (layers - 1 - index)) % every == 0]}
        found = fits if found is None else found & fits  # the counts tell first from last apart
    if found is None or len(found) != 1:
        return None
    every, start = found.pop()
    return {"every": every, "counted_from": start}


def _ignores_head_dim(config_class: type) -> bool:
    """Whether the class's text rotary module builds as many frequencies with ``head_dim`` doubled as
    without: it derives its width from ``hidden_size // num_attention_heads`` whatever ``head_dim`` says
    (Unlimited-OCR's text model). A class with no ``head_dim`` field, or no module to build, reads it."""
    if not dataclasses.is_dataclass(config_class) or not any(
            field.name == "head_dim" for field in dataclasses.fields(config_class)):
        return False
    if any(field.name == "qk_rope_head_dim" for field in dataclasses.fields(config_class)):
        return False  # MLA: the rope sub-head's width is qk_rope_head_dim, read as such
    widths: set[tuple[int, int]] = set()
    for rotary in _rotary_modules(config_class, multimodal=False):
        try:
            base = config_class()
            hidden, heads = int(base.hidden_size), int(base.num_attention_heads)
            sizes = [int(rotary(config=config_class(head_dim=width)).inv_freq.shape[-1])
                     for width in (hidden // heads, 2 * (hidden // heads))]
        except Exception:
            continue
        widths.add((sizes[0], sizes[1]))
    return bool(widths) and all(first == second for first, second in widths)


def _ignores_partial(config_class: type) -> bool:
    """Whether the class's text rotary module, given plain RoPE (``rope_type`` default) with a
    ``partial_rotary_factor`` of 0.5 and of 1, builds the same number of frequencies: Llama's and
    the many classes copied from it compute their default frequencies over the whole head and never
    read the factor (the scaled schemes of ``modeling_rope_utils`` do read it)."""
    widths: set[tuple[int, int]] = set()
    for rotary in _rotary_modules(config_class, multimodal=False):
        try:
            sizes = []
            for factor in (1.0, 0.5):
                config = config_class()
                block = config.rope_parameters
                if not isinstance(block, dict) or "rope_theta" not in block:
                    return False  # nested per layer type: not probed here
                config.rope_parameters = {**block, "rope_type": "default", "partial_rotary_factor": factor}
                sizes.append(int(rotary(config=config).inv_freq.shape[-1]))
        except Exception:
            continue
        widths.add((sizes[0], sizes[1]))
    return bool(widths) and all(first == second for first, second in widths)


def _mrope(config_class: type) -> dict[str, Any] | None:
    """The ``mrope`` fact of one class, observed on its own rotary module (``None``: the class
    builds none). The module is built on the class's default config and run as built; where those
    sections cannot run on its own head (a default config can be inconsistent), with sections of
    three, then four, near-equal parts that fit it."""
    modules = _rotary_modules(config_class)
    if not modules:
        return None
    default_section: list[int] | None = None
    for rotary in modules:
        built = _built(rotary, config_class)
        if built is None:
            continue
        module, layer_type = built
        declared = getattr(module, "mrope_section", None)
        section = declared.get(layer_type) if isinstance(declared, dict) else declared
        default_section = [int(size) for size in section] if isinstance(section, (list, tuple)) else None
        pairs = getattr(module, "inv_freq" if layer_type is None else f"{layer_type}_inv_freq").shape[-1]
        for parts in (None, 3, 4):
            if parts is not None:
                fitted = [pairs // parts] * parts
                fitted[0] += pairs - sum(fitted)
                if isinstance(declared, dict):
                    declared[layer_type] = fitted
                else:
                    module.mrope_section = fitted
            found = _classify(module, layer_type)
            if found is not None:
                return {**found, "section": default_section}
    return {"composition": "unknown", "layout": None, "section": default_section,
            "reason": "no composition of ropekit.tables.mrope fits what the class's rotary module computes"}


def _built(rotary: type, config_class: type) -> tuple[Any, str | None] | None:
    """The rotary module built on the class's default config, and the layer type to call it with."""
    try:
        config = config_class()
        layer_types = getattr(config, "layer_types", None)
        if not config.rope_parameters and isinstance(layer_types, list):
            config.rope_parameters = {name: {"rope_type": "default", "rope_theta": 10000.0} for name in layer_types}
        module = rotary(config=config)
    except Exception:
        return None
    names = [name for name, _ in module.named_buffers(recurse=False)
             if name.endswith("inv_freq") and "original" not in name]
    if not names:
        return None
    layer_type = names[0][: -len("inv_freq")].rstrip("_") or None
    return module, layer_type


def _classify(module: Any, layer_type: str | None) -> dict[str, Any] | None:
    """The composition and layout of ropekit that reproduce ``module`` (``None``: none does)."""
    import numpy as np

    from ropekit.tables.mrope import COMPOSITIONS, MropeMap

    seen = _observe(module, layer_type)
    if seen is None:
        return None
    axis_of, angle = seen
    buffer = getattr(module, "inv_freq" if layer_type is None else f"{layer_type}_inv_freq")
    inv_freq = np.sort(buffer.double().numpy())[::-1]  # the usual order (ERNIE stores its buffer pre-permuted)
    section = getattr(module, "mrope_section", None)
    if isinstance(section, dict):
        section = section.get(layer_type)
    for composition in COMPOSITIONS:
        for layout in ("neox", "gptj"):
            try:
                mapping = MropeMap(composition, tuple(section or ()), len(inv_freq), layout)
            except Exception:
                continue
            if mapping.freq.shape != angle.shape:
                continue
            expected = inv_freq[mapping.freq]
            live = expected > 0
            if np.array_equal(mapping.axis[live], axis_of[live]) and np.allclose(angle, expected, rtol=1e-6):
                return {"composition": composition, "layout": layout}
    return None


def build() -> dict[str, Any]:
    """The document :data:`OUT` holds, from the installed transformers."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    from ropekit.config.families import READ_KEYS
    from ropekit.config.view import ALIASES

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    classes: dict[str, Any] = {}
    for model_type in sorted(CONFIG_MAPPING_NAMES):
        try:
            config_class = CONFIG_MAPPING[model_type]
        except Exception as error:
            classes[model_type] = {"kind": "unreadable", "reason": f"transformers cannot import its config: {error}"}
            continue
        classes[model_type] = _describe(model_type, config_class, READ_KEYS, dict(ALIASES))
    return {"transformers": transformers.__version__,
            "command": "python scripts/transformers_classes.py",
            "rope_keys": list(candidate_keys()),
            "layer_type_renames": layer_type_renames(),
            "classes": classes}


def catalogue_text(document: dict[str, Any]) -> str:
    """The document as compact JSON with one class a line: the loader reads only the line of the
    model_type at hand (``ropekit.config.classes``), never the whole catalogue."""
    head = {key: value for key, value in document.items() if key != "classes"}
    lines = [json.dumps(head, separators=(",", ":"))[:-1] + ',"classes":{']
    records = [json.dumps(name) + ":" + json.dumps(entry, separators=(",", ":"), sort_keys=False)
               for name, entry in document["classes"].items()]
    lines.append(",\n".join(records))
    return "\n".join(lines) + "\n}}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare with the committed file; exit 1 if they differ")
    args = parser.parse_args()
    document = build()
    text = catalogue_text(document)
    if args.check:
        same = OUT.read_text(encoding="utf-8") == text
        print("the committed file matches" if same else f"{OUT} differs from transformers {document['transformers']}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    kinds: dict[str, int] = {}
    for entry in document["classes"].values():
        kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
    print(f"wrote {OUT}: {len(document['classes'])} model_types of transformers {document['transformers']}: {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
