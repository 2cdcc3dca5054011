"""Every key of a config that bears on RoPE is read or refused.

:func:`screen_keys` walks the top level, ``text_config`` and any other nested object that is not
a vision, audio or quantisation sub-config. A key ropekit reads passes; a key known to bear on RoPE
that ropekit does not serve is refused with the reason; any other key that looks like RoPE (it
mentions rope, rotary or nope, or is a case, whitespace, Unicode-confusable or few-edits spelling
of a key ropekit reads) is refused with a did-you-mean: with ``strict=False``, a warning. Never
silence: a misspelt ``rope_scaling`` read by nobody is the seed's defect.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import RopeConfigError
from .families import READ_KEYS, REFUSED_KEYS
from .lookalike import canonical, looks_like_rope, near_miss

__all__ = ["UNRELATED_KEYS", "screen_keys"]

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


def screen_keys(config: Mapping[str, Any], *, strict: bool) -> None:
    """Refuse (or, with ``strict=False``, warn about) keys that look like RoPE and are not read."""
    for path, _name, problem in _problems(config):
        refused, text = problem
        if refused or strict:
            raise RopeConfigError(path, text)
        warnings.warn(f"{path}: {text} (ignored: --lenient)", UserWarning, stacklevel=4)


def _problems(config: Mapping[str, Any]) -> Iterator[tuple[str, str, tuple[bool, str]]]:
    """``(json_path, key, (always_refused, message))`` for every key that must not pass silently.

    The top level and ``text_config`` are where ropekit reads; another nested object (not a
    modality or quantisation sub-config) is screened too, where even a key ropekit reads elsewhere
    is unread. A flagged object is not descended into: its own key is the problem.
    """
    for name, value in config.items():
        problem = _problem(name)
        if problem is not None:
            yield name, name, problem
            continue
        if not isinstance(value, Mapping) or name in ("rope_scaling", "rope_parameters"):
            continue
        if name == "text_config":
            for inner in value:
                inner_problem = _problem(inner)
                if inner_problem is not None:
                    yield f"{name}.{inner}", inner, inner_problem
        elif not any(word in canonical(name) for word in _SKIPPED_SUBCONFIG_WORDS):
            for inner in value:
                if isinstance(inner, str) and looks_like_rope(inner):
                    yield f"{name}.{inner}", inner, (
                        False, f"ropekit reads RoPE keys at the top level or in text_config, not inside {name!r}, "
                        "so the table would ignore it")


@functools.lru_cache(maxsize=4096)
def _problem(name: object) -> tuple[bool, str] | None:
    """``(always_refused, message)`` for a key that must not pass silently, else ``None``."""
    if not isinstance(name, str) or name in READ_KEYS or name in UNRELATED_KEYS:
        return None
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
