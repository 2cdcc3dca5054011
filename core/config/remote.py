"""Remote-code families whose one ``model_type`` covers checkpoints that run different RoPE code:
which code a config runs is decided from evidence the config itself carries, or refused with the
evidence that would decide it. Never guessed.

- ``chatglm``: ChatGLM2-6B-32k's code divides positions by ``rope_ratio`` (position
  interpolation: a ``linear`` table, base 10000); ChatGLM3's and GLM-4's multiply the base by it.
  The two read the same keys. Evidence: ``_name_or_path`` naming ``chatglm2`` (interpolation) or
  ``chatglm3`` / ``glm-4`` (base), or GLM-4's vocabulary (``padded_vocab_size`` 151552). A
  ``rope_ratio`` of 1 (or none) means the same table in both.
- ``internlm``: InternLM's 2023 code (internlm-20b, InternLM/InternLM@095ebff) reads
  ``rotary = {"base", "type": "origin" | "dynamic", "scaling_factor"}`` where its 2024 code reads
  ``rope_theta`` and ``rope_scaling``: the object is read as its code reads it (``origin`` is plain
  RoPE at ``base``; ``dynamic`` the NTK base growth with ``scaling_factor``, default 1.0).
- ``baichuan``: Baichuan-7B and Baichuan2-7B rotate (base 10000, hard-coded, rotate-half);
  Baichuan-13B and Baichuan2-13B use ALiBi. Evidence: ``architectures`` ``BaiChuanForCausalLM``
  (Baichuan-7B's class name), or the 7B shape (``hidden_size`` 4096, 32 layers) against the 13B one
  (5120, 40 layers), which is how the families' code is chosen by engines that serve both.

The code quoted for each decision is in ``tests/data/configs/published/REMOTE_CODE.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from ..errors import NoRopeError, RopeConfigError

__all__ = ["ARCHITECTURES", "ChatGLMCode", "baichuan_rotates", "chatglm_code", "internlm_rotary"]

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
