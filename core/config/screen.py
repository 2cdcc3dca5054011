"""Every key of a config that bears on RoPE is read or refused.

:func:`screen_keys` walks the top level, ``text_config`` and every other nested object (at any
depth) that is not a vision, audio or quantisation sub-config. A key ropekit reads passes; any
other key that looks like RoPE (it mentions rope, rotary or nope, is a case, whitespace,
Unicode-confusable or few-edits spelling of a key ropekit reads, or sits where nobody reads it,
``attn_config.rope_theta``) is a :class:`Lookalike`.

A look-alike is judged against the table ropekit serves (:func:`judge`), once the config is
parsed: if its value states what ropekit serves anyway (``rope_interleaved: false`` on a
rotate-half model, ``use_mrope: false`` on a text model), it is accepted with a warning naming
it; if it states something else, it is refused (strict) or warned about (``strict=False``),
since the checkpoint's trainer or the user's engine may act on it. Keys known to bear on RoPE
that ropekit does not serve are refused with the reason, whatever the mode, unless their value
states what ropekit serves. Never silence: a misspelt ``rope_scaling`` read by nobody is the seed's
defect.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from ..errors import RopeConfigError
from .classes import rope_keys
from .families import READ_KEYS, REFUSED_KEYS
from .lookalike import canonical, looks_like_rope, near_miss

__all__ = ["UNRELATED_KEYS", "Lookalike", "judge", "screen_keys"]

UNRELATED_KEYS = frozenset({
    # real keys of other models a few edits from a key ropekit reads (checked against every
    # transformers config class): they mean something else
    "hidden_sizes", "in_channels", "layer_type", "n_layers", "num_labels", "qk_channels", "v_channels",
    "v_head_dim", "position_embeddings_type", "n_heads", "num_key_value_heads", "kv_lora_rank",
    "max_window_layers", "sliding_window", "use_sliding_window", "attn_layer_period", "attn_layer_offset",
})
"""Keys close to a read key that are known not to be misspellings of it."""

_SKIPPED_SUBCONFIG_WORDS = ("vision", "audio", "speech", "image", "video", "visual", "quantization", "encoder",
                            "decoder", "projector", "perceiver", "vq", "codec", "tokenizer", "generation")

MEANS: Mapping[str, str] = {
    "use_mrope": "mrope",
    "mrope_interleaved": "mrope_interleaved",
    "mrope": "mrope",
    "rope_traditional": "rope_interleave",
    "rope_pct": "partial_rotary_factor",
    "use_rope": "rope",
}
"""Unread keys whose meaning ropekit knows: the fact each states (a key ropekit reads, ``mrope``:
whether positions have sections, ``mrope_interleaved``: whether those sections interleave,
``rope``: whether the model rotates)."""


_FACTS = {"mrope": "mrope sections", "mrope_interleaved": "interleaved mrope sections", "rope": "RoPE",
          "rotary_dim": "the rotated width"}

WORD_MEANS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("partial_rotary_factor", ("pct", "percent", "fraction", "frac", "portion", "partial")),
    ("rope_theta", ("theta", "base")),
    ("rotary_dim", ("dim", "dims", "ndims", "width", "channels")),
    ("rope_interleave", ("interleave", "interleaved", "traditional", "gptj")),
)
"""The fact a RoPE-looking key states by the words of its name, whatever the family or spelling
(CodeGeeX2's ``rotary_percent``, llama.cpp's ``rope_freq_base``, ``rotary_ndims``): a name whose words
name exactly one fact states that fact; one naming none, or more than one (``rope_scaling_base_factor``),
states none ropekit can judge, and is refused. Words that change a fact's meaning (``scale``, ``factor``,
``local``, ``global``, ``swa``, ``compress``, ``sliding``, ``vision``, ``audio``) make the name state none."""

_QUALIFIERS = frozenset({"scale", "scaling", "factor", "local", "global", "swa", "compress", "sliding", "vision",
                         "audio", "max", "min", "low", "high", "original", "short", "long", "layer", "layers"})


class Lookalike(NamedTuple):
    """A key that looks like RoPE and is not read where it is. ``means`` is the fact it states,
    when known (a read key's name, ``mrope`` or ``rope``); ``always_refused`` marks keys known to
    bear on RoPE that ropekit does not serve; ``problem`` is the refusal's text."""

    path: str
    key: str
    value: Any
    means: str | None
    always_refused: bool
    problem: str


Served = Callable[[str], Any]
"""The value of a fact in the table ropekit serves (``NOT_SERVED`` where it cannot say)."""
NOT_SERVED = object()


def screen_keys(config: Mapping[str, Any]) -> list[Lookalike]:
    """Every look-alike key of ``config``, for :func:`judge` once the config is parsed."""
    return list(_walk(config, "", reading=True))


def judge(lookalikes: list[Lookalike], served: Served, *, strict: bool) -> None:
    """Accept (with a warning) each look-alike whose value states what ropekit serves; refuse the
    others (``strict``, or keys ropekit knows it does not serve), or warn (``strict=False``)."""
    for item in lookalikes:
        if item.means is not None and _same(item.value, served(item.means)):
            shown = _FACTS.get(item.means, item.means)
            warnings.warn(f"{item.path}: not read by ropekit; its value {item.value!r} states what ropekit serves "
                          f"({shown}), so it is ignored", UserWarning, stacklevel=4)
            continue
        problem = item.problem
        if item.means is not None and item.means in _JUDGED:
            value = served(item.means)
            shown = _FACTS.get(item.means, item.means)
            valid = (f"ropekit serves {value!r} there, from the keys it reads" if value is not NOT_SERVED else
                     "the layer types ropekit serves differ there")
            problem = (f"{problem}. Its value {item.value!r} states {shown}, and {valid}: it is accepted (with a "
                       f"warning) only when it states that value; state {item.means} instead if the checkpoint needs "
                       "another")
        if item.always_refused or strict:
            raise RopeConfigError(item.path, problem)
        warnings.warn(f"{item.path}: {problem} (ignored: --lenient)", UserWarning, stacklevel=4)


_JUDGED = frozenset({"partial_rotary_factor", "rope_theta", "rotary_dim", "rope_interleave", "head_dim"})
"""Facts whose served value a refusal names (the others, sections and switches, are said in the problem)."""


def _same(value: Any, served: Any) -> bool:
    if served is NOT_SERVED:
        return False
    if isinstance(served, Mapping) and not served and value is None:  # no rope block: null states the same
        return True
    if isinstance(served, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(served, bool) and value == served
    if isinstance(served, (int, float)) and isinstance(value, (int, float)):
        return math.isfinite(float(value)) and float(value) == float(served)
    return bool(value == served)


_SCALARS = frozenset((str, int, float, bool, type(None), list))


def _walk(layer: Mapping[str, Any], prefix: str, *, reading: bool) -> Iterator[Lookalike]:
    """Look-alikes in ``layer`` (whose keys ropekit reads when ``reading``), and in every nested
    object below it that is not a modality or quantisation sub-config. A flagged key's object is
    not descended into: its own key is the problem."""
    for name, value in layer.items():
        found = _problem(name) if reading else _unread_here(name, prefix)
        if found is not None:
            always, problem = found
            yield Lookalike(f"{prefix}{name}", str(name), value, _means(name), always, problem)
            continue
        kind = type(value)  # the JSON scalars first: an ABC check per value costs a load its speed
        if kind in _SCALARS or not (kind is dict or isinstance(value, Mapping)) or (
                reading and name in ("rope_scaling", "rope_parameters")):
            continue
        if reading and not prefix and name == "text_config":
            yield from _walk(value, "text_config.", reading=True)
        elif not _skipped_subconfig(str(name)):
            yield from _walk(value, f"{prefix}{name}.", reading=False)


@functools.lru_cache(maxsize=4096)
def _skipped_subconfig(name: str) -> bool:
    """Whether an object under key ``name`` is a modality or quantisation sub-config (not screened)."""
    return any(word in canonical(name) for word in _SKIPPED_SUBCONFIG_WORDS)


def _unread_here(name: object, prefix: str) -> tuple[bool, str] | None:
    if isinstance(name, str) and looks_like_rope(name):
        return False, (f"ropekit reads RoPE keys at the top level or in text_config, not inside {prefix[:-1]!r}, so "
                       "the table would ignore it")
    return None


@functools.lru_cache(maxsize=4096)
def _means(name: object) -> str | None:
    """The fact a look-alike key states: a read key it misspells or ends with, or a known meaning."""
    if not isinstance(name, str):
        return None
    if name in MEANS:
        return MEANS[name]
    if name in READ_KEYS:  # a read key where nobody reads it (attn_config.rope_theta)
        return name
    meant = near_miss(name, READ_KEYS)
    if meant is not None:
        return meant
    suffixed = next((key for key in sorted(READ_KEYS, key=len, reverse=True)
                     if looks_like_rope(key) and name.endswith("_" + key)), None)
    return suffixed if suffixed is not None else _means_by_words(name)


def _means_by_words(name: str) -> str | None:
    """The fact ``name`` states by its words (:data:`WORD_MEANS`), or ``None``."""
    if not looks_like_rope(name):
        return None
    words = set(canonical(name).split("_"))
    if words & _QUALIFIERS:
        return None
    facts = {fact for fact, named in WORD_MEANS if words.intersection(named)}
    return facts.pop() if len(facts) == 1 else None


@functools.lru_cache(maxsize=4096)
def _problem(name: object) -> tuple[bool, str] | None:
    """``(always_refused, message)`` for a key that must not pass silently, else ``None``."""
    if not isinstance(name, str) or name in READ_KEYS or name in UNRELATED_KEYS:
        return None
    if name in rope_keys():  # a spelling some config class converts (ModernBERT's global_rope_theta): the parse
        return None          # reads it where the config's class does, and names it where the class ignores it
    if name in REFUSED_KEYS:
        return True, f"{REFUSED_KEYS[name]}; refusing rather than serving a table without it"
    meant = near_miss(name, READ_KEYS)
    if meant is not None:
        return False, (f"unknown key; did you mean {meant!r}? ropekit reads {meant!r}, and a near miss read by "
                       "nobody would serve the wrong table")
    if looks_like_rope(name):
        return False, ("unknown key that looks like RoPE; ropekit does not read it, so the table would ignore it "
                       f"(keys it reads: {', '.join(sorted(k for k in READ_KEYS if looks_like_rope(k)))})")
    return None
