"""Which JSON files are a model's config: what ``ropekit scan`` counts as a model in a folder, and the
``config.json`` that ``ropekit audit --served DIR`` and ``ropekit repair`` take when no CONFIG is given.

A model config is a JSON object stating ``model_type`` or ``architectures``, and not one of the
files that sit beside a model and state them too: its tokenizer, generation or processor config,
or an engine's own config (onnxruntime-genai's ``genai_config.json``, a Qualcomm Genie
``genie_config.json``, MLC's ``mlc-chat-config.json``, a TensorRT-LLM checkpoint's ``config.json``).
Those are told by name first, then by the keys only they have, whatever their name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigSourceError

__all__ = ["MAX_SCANNED_BYTES", "NOT_MODELS", "model_config_in", "not_a_model", "read_model_config"]

MAX_SCANNED_BYTES = 4 << 20
"""A ``NAME.json`` larger than this is not looked into when a folder is scanned (model configs are a few KB)."""

NOT_MODELS: Mapping[str, str] = {
    "tokenizer_config.json": "a tokenizer config",
    "tokenizer.json": "a tokenizer",
    "special_tokens_map.json": "a tokenizer's special tokens",
    "added_tokens.json": "a tokenizer's added tokens",
    "vocab.json": "a tokenizer vocabulary",
    "chat_template.json": "a chat template",
    "generation_config.json": "a generation config",
    "preprocessor_config.json": "a preprocessor config",
    "processor_config.json": "a processor config",
    "video_preprocessor_config.json": "a video preprocessor config",
    "adapter_config.json": "an adapter (PEFT) config",
    "quantize_config.json": "a quantization config",
    "genai_config.json": "onnxruntime-genai's engine config",
    "genie_config.json": "a Qualcomm Genie engine config",
    "mlc-chat-config.json": "MLC LLM's engine config",
}
"""File names that are never the model's config, and what they are."""

_MARKERS = (b'"model_type"', b'"architectures"')
_MODEL_KEYS = ("hidden_size", "n_embd", "d_model", "head_dim", "num_attention_heads", "text_config")


def not_a_model(document: Any, name: str = "") -> str | None:
    """Why ``document`` (the parsed JSON of a file called ``name``) is not a model's config, or ``None``
    when it may be one. Says nothing about ``model_type``: a config named on purpose may state neither."""
    base = os.path.basename(name)
    if base in NOT_MODELS:
        return NOT_MODELS[base]
    if base.endswith(".index.json"):
        return "a weights index"
    if not isinstance(document, Mapping):
        return f"a JSON {type(document).__name__}, not an object"
    if "architecture" in document and "rotary_base" in document:
        return "a TensorRT-LLM checkpoint config"
    if isinstance(document.get("dialog"), Mapping):
        return "a Qualcomm Genie engine config"
    if isinstance(document.get("model"), Mapping) and "search" in document:
        return "onnxruntime-genai's engine config"
    if "model_config" in document and "conv_template" in document:
        return "MLC LLM's engine config"
    if "_from_model_config" in document:
        return "a generation config"
    if "peft_type" in document:
        return "an adapter (PEFT) config"
    if not any(key in document for key in _MODEL_KEYS):  # a model config may name its tokenizer or processor
        if "tokenizer_class" in document:
            return "a tokenizer config"
        if any(key in document for key in ("image_processor_type", "feature_extractor_type", "processor_class")):
            return "a processor config"
    return None


def _states_a_model(document: Mapping[str, Any]) -> bool:
    return isinstance(document.get("model_type"), str) or isinstance(document.get("architectures"), list)


def read_model_config(path: str) -> Mapping[str, Any] | None:
    """``path``'s parsed JSON when it is a model config (it states ``model_type`` or ``architectures``
    and :func:`not_a_model` finds nothing against it), else ``None``. Files past
    :data:`MAX_SCANNED_BYTES`, unreadable or invalid JSON are ``None`` too: a folder's other JSON files
    are only looked into, never refused."""
    from ..config.source import read_config

    if os.path.basename(path) in NOT_MODELS or path.endswith(".index.json"):
        return None
    try:
        if os.path.getsize(path) > MAX_SCANNED_BYTES:
            return None
        with open(path, "rb") as handle:
            head = handle.read(MAX_SCANNED_BYTES)
    except OSError:
        return None
    if not any(marker in head for marker in _MARKERS):  # most JSON files are rejected without parsing
        return None
    try:
        document, _ = read_config(path)
    except ConfigSourceError:
        return None
    if not_a_model(document, path) is not None or not _states_a_model(document):
        return None
    return document


def model_config_in(folder: str) -> tuple[str | None, str]:
    """The model's ``config.json`` inside ``folder`` and ``""``, or ``None`` and why there is none (to
    complete "FOLDER ..."): absent, or an engine's own config under that name."""
    from ..config.source import read_config

    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        return None, "holds no config.json"
    try:
        document, _ = read_config(path)
    except ConfigSourceError:
        return path, ""  # the model's, unreadable: loading it says why, naming the file
    problem = not_a_model(document, path)
    if problem is not None:
        return None, f"holds a config.json that is {problem}, not the model's"
    return path, ""
