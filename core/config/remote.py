"""Remote-code families whose one ``model_type`` covers checkpoints that run different RoPE code:
which code a config runs is decided from evidence the config itself carries, or refused with the
evidence that would decide it. Never guessed.

- ``chatglm``: ChatGLM2-6B-32k's code divides positions by ``rope_ratio`` (position
  interpolation: a ``linear`` table, base 10000); ChatGLM3's and GLM-4's multiply the base by it.
  The two read the same keys. Evidence: ``_name_or_path`` naming ``chatglm2`` (interpolation) or
  ``chatglm3`` / ``glm-4`` (base), or GLM-4's vocabulary (``padded_vocab_size`` 151552). A
  ``rope_ratio`` of 1 (or none) means the same table in both.
- ``chatglm`` (which code): THUDM's ChatGLM-6B (v1) and ChatGLM2/3, GLM-4 ship different
  ``modeling_chatglm.py`` under the same ``model_type`` and ``architectures``. v1 rotates each head's
  two halves by two position streams when ``position_encoding_2d`` is true (its config class's
  default): refused by name; with it false, rotate-half over the whole head at base 10000. Evidence:
  the keys each code's config class writes (v1: ``position_encoding_2d``, ``max_sequence_length``,
  ``inner_hidden_size``, ``gmask_token_id``; v2 on: ``kv_channels``, ``seq_length``,
  ``padded_vocab_size``, ``multi_query_attention``, ...). A config carrying both, or neither, is
  refused naming the ambiguity.
- ``internlm``: the code each Hugging Face Hub repository ships (internlm-7b, internlm-chat-7b,
  internlm-20b) reads ``rotary = {"base", "type": "origin" | "dynamic", "scaling_factor"}`` and
  defaults it to ``{"base": 10000, "type": "dynamic"}``; the InternLM GitHub repository's later code
  (InternLM/InternLM@09a2b5b ``tools/transformers``) reads ``rope_theta`` and ``rope_scaling``. Each
  code's config class writes its own keys into every config it saves, so: ``rotary`` stated is the
  Hub code, read as it reads it (``origin`` plain RoPE at ``base``; ``dynamic`` the NTK base growth
  with ``scaling_factor``, default 1.0); ``rope_theta``/``rope_scaling`` stated (even null) is the
  GitHub code; neither, in a config a repository saved (``transformers_version`` or ``auto_map``),
  is internlm-7b's first config, which its repository's code now runs with the default ``rotary``
  (dynamic NTK, factor 1: past ``max_position_embeddings`` the base grows). A config with no such
  evidence is refused naming the ambiguity.
- ``baichuan``: Baichuan-7B and Baichuan2-7B rotate (base 10000, hard-coded, rotate-half);
  Baichuan-13B and Baichuan2-13B use ALiBi. Evidence: ``architectures`` ``BaiChuanForCausalLM``
  (Baichuan-7B's class name), or the 7B shape (``hidden_size`` 4096, 32 layers) against the 13B one
  (5120, 40 layers), which is how the families' code is chosen by engines that serve both.

The code quoted for each decision is in ``tests/data/configs/published/REMOTE_CODE.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from ..errors import NoRopeError, RopeConfigError

__all__ = ["ARCHITECTURES", "ChatGLMCode", "baichuan_rotates", "chatglm_code", "chatglm_generation", "internlm_code",
           "internlm_rotary"]

ChatGLMCode = Literal["interpolation", "base"]

ARCHITECTURES: Mapping[str, str] = {
    "ChatGLMModel": "chatglm",
    "ChatGLMForConditionalGeneration": "chatglm",
    "BaiChuanForCausalLM": "baichuan",
    "BaichuanForCausalLM": "baichuan",
    "QWenLMHeadModel": "qwen",
}
"""Remote-code classes a config may name in ``architectures`` without stating its model_type
(ChatGLM2-6B's first configs state none): the family they belong to."""

_GLM4_VOCAB = 151552


def chatglm_code(view: Mapping[str, Any], ratio: float, ratio_path: str) -> ChatGLMCode:
    """How a ChatGLM config's ``rope_ratio`` (``ratio``, not 1) is applied by the code it runs."""
    name = view.get("_name_or_path")
    lowered = name.lower().replace("_", "-") if isinstance(name, str) else ""
    if "chatglm2" in lowered:
        return "interpolation"
    if "chatglm3" in lowered or "glm-4" in lowered or "glm4" in lowered or view.get("padded_vocab_size") == _GLM4_VOCAB:
        return "base"
    raise RopeConfigError(
        ratio_path,
        f"{ratio:g} means two different tables in ChatGLM's code: ChatGLM2-6B-32k divides positions by it "
        "(base 10000), ChatGLM3 and GLM-4 multiply the base by it, and this config does not say which code it runs. "
        "Evidence that decides: _name_or_path naming the checkpoint (chatglm2-..., chatglm3-..., glm-4-...), or "
        f"GLM-4's padded_vocab_size {_GLM4_VOCAB}",
    )


CHATGLM_V1_KEYS = ("position_encoding_2d", "max_sequence_length", "inner_hidden_size", "gmask_token_id",
                   "mask_token_id")
"""Keys only ChatGLM-6B (v1)'s config class writes (THUDM/chatglm-6b ``configuration_chatglm.py``)."""
CHATGLM_V2_KEYS = ("kv_channels", "seq_length", "padded_vocab_size", "multi_query_attention", "multi_query_group_num",
                   "ffn_hidden_size", "rope_ratio", "original_rope", "apply_query_key_layer_scaling")
"""Keys only ChatGLM2/3's and GLM-4's config class writes (THUDM/chatglm2-6b ``configuration_chatglm.py`` on)."""


def chatglm_generation(view: Mapping[str, Any]) -> int:
    """``1`` for ChatGLM-6B's code (one position stream: ``position_encoding_2d`` stated false), ``2`` for
    ChatGLM2/3's and GLM-4's. Raises for v1's 2-D positions (two streams), or when the config's keys name
    both codes or neither."""
    first = [key for key in CHATGLM_V1_KEYS if key in view]
    later = [key for key in CHATGLM_V2_KEYS if key in view]
    if (first and later) or (not first and not later):
        said = (f"it states {', '.join(first)} (ChatGLM-6B's) and {', '.join(later)} (ChatGLM2's on)" if first else
                "it states none of the keys that tell them apart")
        raise RopeConfigError(
            "model_type",
            f"'chatglm' covers two codes whose RoPE differs, and this config does not say which it runs: {said}. "
            "ChatGLM-6B (v1) rotates each head's halves by two position streams (position_encoding_2d, default true); "
            "ChatGLM2/3 and GLM-4 rotate half of kv_channels in interleaved pairs. Evidence that decides: the keys "
            f"only v1 writes ({', '.join(CHATGLM_V1_KEYS)}) or only ChatGLM2 on writes ({', '.join(CHATGLM_V2_KEYS)})")
    if later:
        return 2
    two_d = view.get("position_encoding_2d", True)
    if two_d is False:
        return 1
    where = "position_encoding_2d"
    stated = f"{two_d!r}" if "position_encoding_2d" in view else \
        "missing (ChatGLM-6B's config class defaults it to true)"
    if not isinstance(two_d, bool):
        raise RopeConfigError(where, f"expected true or false, got {two_d!r}")
    raise RopeConfigError(
        where,
        f"{stated}: ChatGLM-6B's code (THUDM/chatglm-6b modeling_chatglm.py) then rotates each head's two halves by "
        "two position streams, the first by position_ids and the second by block_position_ids (GLM's 2-D positions "
        "for blank infilling), each rotate-half over hidden_size // (2 * num_attention_heads) channels at base 10000. "
        "A RoPE table rotates by one position stream, so none serves it; valid: false (its code then rotates the "
        "whole head by position_ids)")


def baichuan_rotates(config: Mapping[str, Any], view: Mapping[str, Any]) -> None:
    """Return if the Baichuan checkpoint runs the RoPE code (7B); raise :class:`~ropekit.NoRopeError`
    for the ALiBi code (13B), or a config error naming the evidence when the config carries none."""
    architectures = config.get("architectures")
    names = set(architectures) if isinstance(architectures, list) else set()
    if "BaiChuanForCausalLM" in names:
        return
    shape = (view.get("hidden_size"), view.get("num_hidden_layers"))
    if shape == (4096, 32):
        return
    if shape == (5120, 40):
        raise NoRopeError("hidden_size", "5120 with 40 layers is Baichuan-13B / Baichuan2-13B, whose code uses ALiBi, "
                          "not RoPE; there is no RoPE table to serve")
    raise RopeConfigError(
        "model_type",
        f"'baichuan' covers RoPE code (7B) and ALiBi code (13B), and this config (hidden_size {shape[0]}, "
        f"num_hidden_layers {shape[1]}) matches neither; evidence that decides: architectures "
        "['BaiChuanForCausalLM'] (Baichuan-7B's code), or the 7B shape (hidden_size 4096, 32 layers)",
    )


_ROTARY_KEYS = ("base", "type", "scaling_factor")

INTERNLM_HUB_ROTARY: Mapping[str, Any] = MappingProxyType({"base": 10000, "type": "dynamic"})
"""``rotary``'s default in the Hub repositories' ``configuration_internlm.py`` (internlm/internlm-7b)."""
_INTERNLM_GITHUB_KEYS = ("rope_theta", "rope_scaling", "rope_parameters")
_SAVED_KEYS = ("transformers_version", "auto_map")


def internlm_code(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """An InternLM config read as the code its repository ships (see the module docstring): the Hub
    code's ``rotary`` (stated, or its default in a saved config that states neither spelling) as
    :func:`internlm_rotary` reads it, or the GitHub code's keys as they are; refused when the config
    carries no evidence of which code runs it."""
    if "rotary" in config:
        if not isinstance(config["rotary"], Mapping):
            raise RopeConfigError("rotary", f"expected InternLM's rotary object {{base, type, scaling_factor}}, got "
                                  f"{config['rotary']!r} (its code indexes rotary['type'])")
        return internlm_rotary(config)
    if any(key in config for key in _INTERNLM_GITHUB_KEYS):
        return config
    if any(config.get(key) is not None for key in _SAVED_KEYS):
        warnings.warn("rotary: missing; the code InternLM's Hugging Face Hub repositories ship "
                      f"(configuration_internlm.py) defaults it to {dict(INTERNLM_HUB_ROTARY)}, so ropekit serves "
                      "dynamic NTK (factor 1: past max_position_embeddings the base grows), as that code runs it",
                      UserWarning, stacklevel=3)
        return internlm_rotary({**config, "rotary": INTERNLM_HUB_ROTARY})
    raise RopeConfigError(
        "rotary",
        "missing, and so are rope_theta and rope_scaling: InternLM's Hub repositories' code defaults rotary to "
        f"{dict(INTERNLM_HUB_ROTARY)} (dynamic NTK past max_position_embeddings), the InternLM GitHub code reads "
        "rope_theta (default 10000, plain RoPE), and this config carries no evidence of which it runs (no "
        "transformers_version or auto_map of a saved config). State rotary (Hub code) or rope_theta (GitHub code)")


def internlm_rotary(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """An InternLM config with its 2023 ``rotary`` object read as that code reads it: ``rope_theta``
    from ``rotary.base`` and, for ``"type": "dynamic"``, a dynamic block with ``rotary.scaling_factor``
    (its code's default 1.0: the base grows past ``max_position_embeddings`` even so). Anything else
    in the object is refused naming its ``rotary.*`` path; so is the object beside the 2024 keys."""
    rotary = config["rotary"]
    assert isinstance(rotary, Mapping)
    for key in rotary:
        if key not in _ROTARY_KEYS:
            raise RopeConfigError(f"rotary.{key}", f"not read by InternLM's code, which reads rotary's "
                                  f"{', '.join(_ROTARY_KEYS)}; remove it")
    for key in ("rope_theta", "rope_scaling", "rope_parameters"):
        if config.get(key) is not None:
            raise RopeConfigError("rotary", f"stated beside {key}: InternLM's 2023 code reads rotary, its 2024 code "
                                  f"{key}; keep the one the checkpoint's code reads")
    kind = rotary.get("type")
    if kind not in ("origin", "dynamic"):
        raise RopeConfigError("rotary.type", f"{kind!r}: InternLM's code applies 'origin' (plain RoPE) or 'dynamic' "
                              "(NTK base growth) and raises ValueError for anything else")
    base = rotary.get("base")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
        raise RopeConfigError("rotary.base", f"expected the RoPE base, a number above 1, got {base!r}")
    factor = rotary.get("scaling_factor", 1.0)
    if kind == "dynamic" and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                              or not 1 <= factor <= 1e6):
        raise RopeConfigError("rotary.scaling_factor", f"expected a number from 1 to 1e6, got {factor!r}")
    read = {key: value for key, value in config.items() if key != "rotary"}
    read["rope_theta"] = float(base)
    if kind == "dynamic":
        read["rope_scaling"] = {"rope_type": "dynamic", "factor": float(factor)}
    return MappingProxyType(read)
