"""The declaration of a model family ropekit does not know: what a third party's plugin returns
from its ``ropekit_family`` hook, registered in the ``ropekit.families`` entry-point group under the
family's ``model_type``.

A family declaration says what the family's code does that its config does not state: whether it
applies RoPE at all, how it pairs channels, the fraction of the head it rotates by default, which
layer types it does not rotate, and the class defaults a saved config leaves out. The rope block
itself is read as for any config and served by the rope_type plugins. A declaration is checked
where it is constructed (:class:`~ropekit.DeclarationError`), and by the conformance suite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs

from ..errors import DeclarationError
from .scheme import Example

__all__ = ["ModelFamily"]

Layout = Literal["neox", "gptj"]


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise DeclarationError(f"defaults must be a mapping of config keys to values, got {type(value).__name__}")
    return MappingProxyType(dict(value))


def _frozen_nested(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    outer = _frozen_mapping(value)
    return MappingProxyType({key: _frozen_mapping(inner) if isinstance(inner, Mapping) else inner
                             for key, inner in outer.items()})


def _names(value: Any) -> frozenset[str]:
    return frozenset(value)


def _examples(value: Iterable[Example]) -> tuple[Example, ...]:
    return tuple(value)


def _optional_names(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset((value,)) if isinstance(value, str) else frozenset(_iterable(value, "rope_types"))


def _name_tuple(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(_iterable(value, "architectures"))


def _iterable(value: Any, field: str) -> Any:
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise DeclarationError(f"{field} must be a list of names, got {value!r}")
    return value


_SAME_AS_FIELDS = frozenset({"model_type", "doc", "code", "architectures", "examples", "same_as"})

_KIND_KEYS = frozenset({"rope_theta", "head_dim", "partial_rotary_factor"})

_UNREADABLE = frozenset({"head_dim", "partial_rotary_factor", "rotary_dim", "rope_scaling"})


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and value.isprintable() and not any(c.isspace() for c in value)


@attrs.frozen
class ModelFamily:
    """What a family's code does beyond its config, for a ``model_type`` ropekit does not know.

    ``model_type`` must equal the entry-point name it is registered under. ``doc`` is one line for
    ``ropekit list``. ``no_rope`` (non-empty: the reason) declares code that applies no RoPE at
    all: its configs are refused by name. ``layout`` is how the code pairs channels (``gptj``:
    interleaved); ``partial_rotary_factor`` the fraction of the head it rotates when the config
    states none; ``no_rope_layer_types`` the layer types it does not rotate; ``defaults`` the class
    defaults for config keys ropekit reads (``hidden_size``, ``rope_theta``, ...), used where a
    config leaves them out. ``examples`` are configs of the family with the table they must give.

    The family's own code, when it does more than a config says:

    - ``code``: the code the declaration was checked against (``owner/repo@commit path``), shown by
      ``ropekit list`` and in errors;
    - ``architectures``: the class names in a config's ``architectures`` that identify the family
      when the config states no ``model_type`` (as engines choose code: vLLM by ``architectures``);
    - ``rope_types``: the rope_types its code applies (``None``: any ropekit serves); a config
      declaring another is refused naming this family, since its code would raise or ignore it;
      ``refused_types`` says why for a rope_type its code means differently from ropekit's scheme;
    - ``schemes``: a rope_type its code computes its own way, and the rope_type (scheme) that serves
      it that way (MiniCPM4's ``longrope`` is ``minicpm_longrope``);
    - ``fixed_theta``: a base its code hard-codes (a config stating another is refused);
    - ``unserved``: what its code applies that no rope_type expresses (every config is refused with it);
    - ``language_model``: the key under which a wrapper keeps its language model's config
      (InternVL's ``llm_config``): that sub-config is served, as the wrapper's code builds it;
    - ``unread_keys``: width keys its code does not read (``head_dim``, ``partial_rotary_factor``,
      ``rotary_dim``: InternLM2 rotates ``hidden_size // num_attention_heads`` whatever they say), or
      ``rope_scaling`` when its code never reads a scaling block (openPangu-Ultra); a config stating
      one is served as the code runs, without it, with a warning naming it;
    - ``inert_keys``: keys that look like RoPE which its code reads without changing the table (phi-2's
      ``flash_rotary`` picks a fused kernel of the same rotation), each with why: accepted, not refused;
    - ``layer_configs`` and ``no_rope_if``: a per-layer list of objects (DeciLM's ``block_configs``)
      and the values inside an entry (dotted paths, ``{"attention.no_op": true}``) that mean the
      layer applies no RoPE;
    - ``variants``: for a ``model_type`` whose published configs run two codes (Ling 2.0 configs
      state Ling v1's ``bailing_moe``), the classes in ``architectures`` that name the other code and
      the family (model_type) that serves it; a config naming none of this family's
      ``architectures`` nor a variant's is refused, naming the evidence that decides;
    - ``width_key``: the config key holding the number of channels its code rotates, the table's
      head (openPangu-Ultra's MLA rope sub-head ``attention_qk_rope_dim``);
    - ``same_as``: the model_type of a transformers class whose config reading its code shares (vLLM's
      LongCat-Flash n-gram model reads transformers' ``LongcatFlashConfig`` and runs LongCat-Flash's
      attention): its configs are read as that class's, and no other field may say more;
    - ``language_model_type``: for a wrapper whose language model's config states no model_type, the
      model_type its code builds it as (Unlimited-OCR's ``language_config`` runs Llama's attention);
    - ``layer_pattern``, ``layer_pattern_types`` and ``layer_keys``: layer kinds its code tells apart by
      keys of its own: the per-layer list naming each layer's kind (MiMo-V2's ``hybrid_layer_pattern``),
      the layer type each of its values means (``{"0": "full_attention", "1": "sliding_attention"}``), and
      per layer type the keys its rotary reads in place of ``rope_theta``, ``head_dim`` or
      ``partial_rotary_factor`` (``{"sliding_attention": {"rope_theta": "swa_rope_theta"}}``), each falling
      back to the usual key when a config leaves it out; ``layer_pattern_from``: keys its code derives the list
      from when a config states none (MiMo-V2's ``hybrid_block_size``): a config stating one without the list
      is refused, since ropekit does not derive it;
    - ``equal_keys``: keys its code reads that ropekit serves only when they equal another key's value
      (K2-Horizon's ``rope_head_dim`` must equal ``head_dim``: a narrower rope head rotates channel pairs
      ``(i, head_dim / 2 + i)``, which no table's layout expresses); a config stating another value is
      refused naming the key, one stating the same is served.
    """

    model_type: str
    doc: str
    layout: Layout = "neox"
    partial_rotary_factor: float | None = None
    no_rope: str = ""
    no_rope_layer_types: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    defaults: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    examples: tuple[Example, ...] = attrs.field(default=(), converter=_examples)
    code: str = ""
    architectures: tuple[str, ...] = attrs.field(default=(), converter=_name_tuple)
    rope_types: frozenset[str] | None = attrs.field(default=None, converter=_optional_names)
    refused_types: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    schemes: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    inert_keys: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    unread_keys: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    fixed_theta: float | None = None
    unserved: str = ""
    language_model: str = ""
    layer_configs: str = ""
    no_rope_if: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    variants: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    width_key: str = ""
    same_as: str = ""
    language_model_type: str = ""
    layer_pattern: str = ""
    layer_pattern_types: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    layer_keys: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict, converter=_frozen_nested)
    layer_pattern_from: tuple[str, ...] = attrs.field(default=(), converter=_name_tuple)
    equal_keys: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.model_type, str) or not self.model_type or not self.model_type.isprintable() \
                or any(char.isspace() for char in self.model_type):
            raise DeclarationError(f"model_type must be a non-empty name without spaces, got {self.model_type!r}")
        if not isinstance(self.doc, str) or not self.doc.strip():
            raise DeclarationError(f"family {self.model_type!r}: doc must be a non-empty line")
        if self.layout not in ("neox", "gptj"):
            raise DeclarationError(f"family {self.model_type!r}: layout must be 'neox' or 'gptj', got {self.layout!r}")
        factor = self.partial_rotary_factor
        if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                                   or not math.isfinite(factor) or not 0 < factor <= 1):
            raise DeclarationError(f"family {self.model_type!r}: partial_rotary_factor must be in (0, 1], "
                                   f"got {factor!r}")
        if not isinstance(self.no_rope, str):
            raise DeclarationError(f"family {self.model_type!r}: no_rope must be a reason (a string), got "
                                   f"{self.no_rope!r}")
        if not all(isinstance(name, str) and name for name in self.no_rope_layer_types):
            raise DeclarationError(f"family {self.model_type!r}: no_rope_layer_types must name layer types")
        for key, value in self.defaults.items():
            if not isinstance(key, str) or value is None or not _is_json(value):
                raise DeclarationError(f"family {self.model_type!r}: defaults[{key!r}] must be a JSON value, got "
                                       f"{value!r}")
        if not all(isinstance(example, Example) for example in self.examples):
            raise DeclarationError(f"family {self.model_type!r}: examples must be ropekit.Example values")
        self._check_code_facts()

    def _check_code_facts(self) -> None:
        name = self.model_type
        for field in ("code", "unserved"):
            if not isinstance(getattr(self, field), str):
                raise DeclarationError(f"family {name!r}: {field} must be a string, got {getattr(self, field)!r}")
        if not all(_is_name(arch) for arch in self.architectures):
            raise DeclarationError(f"family {name!r}: architectures must be class names, got {self.architectures!r}")
        if self.rope_types is not None and not all(_is_name(kind) for kind in self.rope_types):
            raise DeclarationError(f"family {name!r}: rope_types must name rope_types, got {sorted(self.rope_types)!r}")
        for field in ("refused_types", "schemes", "inert_keys"):
            for kind, value in getattr(self, field).items():
                if not _is_name(kind) or not isinstance(value, str) or not value.strip() \
                        or (field == "schemes" and not _is_name(value)):
                    raise DeclarationError(f"family {name!r}: {field} must map rope_type names to "
                                           f"{'rope_type names' if field == 'schemes' else 'reasons'}, "
                                           f"got {kind!r}: {value!r}")
        theta = self.fixed_theta
        if theta is not None and (isinstance(theta, bool) or not isinstance(theta, (int, float))
                                  or not math.isfinite(theta) or theta <= 1):
            raise DeclarationError(f"family {name!r}: fixed_theta must be a base above 1, got {theta!r}")
        for arch, variant in self.variants.items():
            if not _is_name(arch) or not _is_name(variant) or variant == name or arch in self.architectures:
                raise DeclarationError(f"family {name!r}: variants must map class names (not this family's own "
                                       f"architectures) to another family's model_type, got {arch!r}: {variant!r}")
        if self.variants and not self.architectures:
            raise DeclarationError(f"family {name!r}: a family with variants must name its own architectures (the "
                                   "evidence that a config runs this family's code)")
        for field in ("language_model", "layer_configs", "width_key", "same_as", "language_model_type",
                      "layer_pattern"):
            value = getattr(self, field)
            if not isinstance(value, str) or (value and not _is_name(value)):
                raise DeclarationError(f"family {name!r}: {field} must be a config key, got {value!r}")
        if self.language_model and (self.rope_types is not None or self.fixed_theta is not None or self.layer_configs
                                    or self.unread_keys or self.schemes or self.partial_rotary_factor is not None
                                    or self.width_key or self.layer_pattern):
            raise DeclarationError(f"family {name!r}: a wrapper (language_model) applies no RoPE of its own; declare "
                                   "what its language model's code does in that model's family instead")
        if self.language_model_type and not self.language_model:
            raise DeclarationError(f"family {name!r}: language_model_type names the class of a wrapper's language "
                                   "model: declare language_model (its key) too")
        if self.same_as:
            blank = ModelFamily(model_type=name, doc=self.doc)
            said = [field.name for field in attrs.fields(ModelFamily) if field.name not in _SAME_AS_FIELDS
                    and getattr(self, field.name) != getattr(blank, field.name)]
            if said or self.same_as == name:
                raise DeclarationError(f"family {name!r}: same_as reads its configs as {self.same_as!r}'s class, so "
                                       f"it may not also declare {said or 'itself'}")
        self._check_layer_kinds()
        for key, other in self.equal_keys.items():
            if not _is_name(key) or not isinstance(other, str) or not _is_name(other) or key == other:
                raise DeclarationError(f"family {name!r}: equal_keys must map a config key to another config key, got "
                                       f"{key!r}: {other!r}")
        unknown_unread = sorted(self.unread_keys - _UNREADABLE)
        if unknown_unread:
            raise DeclarationError(f"family {name!r}: unread_keys may name {sorted(_UNREADABLE)}, got {unknown_unread}")
        if bool(self.layer_configs) != bool(self.no_rope_if):
            raise DeclarationError(f"family {name!r}: layer_configs and no_rope_if go together (the per-layer list, "
                                   "and the values in an entry that mean the layer applies no RoPE)")
        for path, value in self.no_rope_if.items():
            if not isinstance(path, str) or not all(_is_name(part) for part in path.split(".")) \
                    or not _is_json(value):
                raise DeclarationError(f"family {name!r}: no_rope_if[{path!r}] must map a dotted key path to a "
                                       f"JSON value, got {value!r}")


    def _check_layer_kinds(self) -> None:
        name = self.model_type
        if self.layer_pattern_from and not self.layer_pattern:
            raise DeclarationError(f"family {name!r}: layer_pattern_from names keys a layer_pattern is derived from; "
                                   "declare layer_pattern too")
        if bool(self.layer_pattern) != bool(self.layer_pattern_types):
            raise DeclarationError(f"family {name!r}: layer_pattern and layer_pattern_types go together (the per-layer "
                                   "list, and the layer type each of its values means)")
        kinds = set(self.layer_pattern_types.values())
        for value, kind in self.layer_pattern_types.items():
            if not isinstance(value, str) or not _is_name(kind):
                raise DeclarationError(f"family {name!r}: layer_pattern_types must map values (as strings) to layer "
                                       f"types, got {value!r}: {kind!r}")
        for kind, keys in self.layer_keys.items():
            if kind not in kinds or not isinstance(keys, Mapping) or not keys \
                    or not all(read in _KIND_KEYS and _is_name(own) for read, own in keys.items()):
                raise DeclarationError(f"family {name!r}: layer_keys must map a layer type of layer_pattern_types to "
                                       f"{{read key: its own key}} for read keys among {sorted(_KIND_KEYS)}, got "
                                       f"{kind!r}: {keys!r}")


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
