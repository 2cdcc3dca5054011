"""ropekit in torch forwards: cos/sin tensors, a drop-in rotary module, a transformers bridge, and
an audit of a live model (``pip install "ropekit[torch]"``).

- :func:`cos_sin`: ``(cos, sin)`` tensors from a :class:`~ropekit.RopeTable`. Angles and their
  cos/sin are formed in float64 and rounded once to the output dtype: within one rounding of the
  exact value (float32: at most ``6e-8 * attention_factor``) at every position below ``2**32``
  radians, where transformers' float32 angles are ~4e-3 off by position 131072.
- :class:`RotaryEmbedding`: a drop-in for transformers' ``*RotaryEmbedding`` modules
  (``forward(x, position_ids, layer_type=None) -> (cos, sin)``), and :func:`patch`, which swaps it
  into a loaded model.
- :func:`register_with_transformers`: teaches transformers every installed ropekit rope_type it
  does not know, so ``from_pretrained`` loads a config naming one.
- :func:`audit_module`: every rotary table a torch model holds, checked against the declaration
  with the verdicts of ``ropekit audit``.

The ropekit core never imports this module.
"""

from __future__ import annotations

import inspect
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from ..artifacts.audit import audit_artifact, module_verdicts
from ..artifacts.served import ServedArtifact, ServedTable
from ..config.classes import class_facts
from ..config.source import read_config
from ..errors import ArgumentError, ArgumentTypeError, MissingDependencyError, NoRopeError, PluginError, RopekitError
from ..host.registry import Registry, default_registry
from ..loader import load
from ..tables.plan import max_position
from ..tables.rotary import LAYOUTS, Layout
from ..tables.table import ModelRope, RopeTable
from .torch_positions import audit_position_ids, rope_index_owner

try:
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    raise MissingDependencyError(
        'ropekit.torch needs torch: pip install "ropekit[torch]" (for the CPU build, install torch from '
        "https://download.pytorch.org/whl/cpu first)"
    ) from None

__all__ = [
    "SUPPORTED_TRANSFORMERS",
    "RotaryEmbedding",
    "TransformersBridge",
    "TransformersBridgeError",
    "audit_module",
    "audit_position_ids",
    "cos_sin",
    "patch",
    "register_with_transformers",
]

SUPPORTED_TRANSFORMERS = (5,)
"""transformers major versions whose rope internals the bridge knows (checked, never assumed)."""

ConfigLike = ModelRope | Mapping[str, Any] | str | os.PathLike[str] | Any


class TransformersBridgeError(RopekitError, RuntimeError):
    """The installed transformers' rope internals are not the ones the bridge was written for."""


# ---------------------------------------------------------------------------------------------
# cos / sin


def _positions_tensor(positions: Any, limit: int, device: torch.device | str | None) -> torch.Tensor:
    """Integer positions as an int64 tensor (a count ``N`` means ``0..N-1``), each in ``[0, limit]``."""
    if isinstance(positions, bool):
        raise ArgumentTypeError("positions", f"expected a count, a range or integer positions, got {positions!r}")
    if isinstance(positions, (int, np.integer)):
        if not 0 <= int(positions) <= limit + 1:
            raise ArgumentError("positions", f"expected a count in [0, {limit + 1}], got {positions}")
        return torch.arange(int(positions), dtype=torch.int64, device=device)
    if isinstance(positions, range):
        tensor = torch.arange(positions.start, positions.stop, positions.step, dtype=torch.int64, device=device)
    elif isinstance(positions, torch.Tensor):
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise ArgumentTypeError("positions", f"expected integer positions, got a {positions.dtype} tensor")
        tensor = positions.to(device=device, dtype=torch.int64)
    else:
        array = np.asarray(positions)
        if not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
            raise ArgumentTypeError("positions", f"expected integer positions, got dtype {array.dtype}")
        if array.size and (array.min() < 0 or array.max() > limit):  # before the cast: uint64 cannot wrap
            raise ArgumentError("positions", f"positions must lie in [0, {limit}], got {array.min()}..{array.max()}")
        tensor = torch.as_tensor(array.astype(np.int64), device=device)
    if tensor.numel() and (int(tensor.min()) < 0 or int(tensor.max()) > limit):
        raise ArgumentError("positions", f"positions must lie in [0, {limit}], got {int(tensor.min())}.."
                            f"{int(tensor.max())}")
    return tensor


def _float64_device(device: torch.device) -> torch.device:
    """Where float64 math runs: the device itself, or the CPU for one without float64 (MPS)."""
    return torch.device("cpu") if device.type == "mps" else device


def _cos_sin(
    inv_freq: torch.Tensor, factor: float, positions: torch.Tensor, dtype: torch.dtype, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The one computation: float64 angles, float64 cos/sin times ``factor``, one rounding to ``dtype``."""
    target = positions.device
    work = _float64_device(target)
    angles = positions.to(device=work, dtype=torch.float64)[..., None] * inv_freq.to(work)
    halves = [(torch.cos(angles) * factor).to(dtype), (torch.sin(angles) * factor).to(dtype)]
    del angles
    out = []
    for half in halves:
        full = torch.cat((half, half), dim=-1) if layout == "neox" else torch.repeat_interleave(half, 2, dim=-1)
        out.append(full.to(target))
    return out[0], out[1]


def _mrope_cos_sin(
    table: RopeTable, inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of a multimodal table: ``positions`` ``(axes, ...)`` (or text positions, the same on
    every axis); column ``c`` is ``positions[axis[c]] * inv_freq[freq[c]]``, in float64, rounded once."""
    mapping = table.mrope_map(layout)
    target = positions.device
    work = _float64_device(target)
    axes = table.mrope_axes
    if positions.ndim == 0 or positions.shape[0] != axes or positions.ndim < 2:
        positions = positions.unsqueeze(0).expand(axes, *positions.shape)
    where = positions.to(device=work, dtype=torch.float64).movedim(0, -1)  # (..., axes)
    axis = torch.as_tensor(mapping.axis, device=work)
    frequencies = inv_freq.to(work)[torch.as_tensor(mapping.freq, device=work)]
    angles = where[..., axis] * frequencies
    factor = table.attention_factor
    cos = (torch.cos(angles) * factor).to(dtype).to(target)
    sin = (torch.sin(angles) * factor).to(dtype).to(target)
    return cos, sin


def _multimodal_rows(table: RopeTable, positions: torch.Tensor) -> bool:
    """Whether ``positions`` holds one row per axis (transformers' ``(axes, batch, seq)`` ids)."""
    return table.mrope_composition is not None and positions.ndim == 3 and positions.shape[0] == table.mrope_axes


def cos_sin(
    table: RopeTable,
    positions: Any,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    layout: Layout | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` tensors for ``table`` at ``positions``, attention factor applied.

    ``positions`` is a count ``N`` (``0..N-1``), a ``range``, integers, or an integer tensor of any
    shape; the result has shape ``positions.shape + (rotary_dim,)`` on ``device`` (default: the
    tensor's, else the CPU). For a multimodal table, ``(axes, batch, seq)`` positions (as
    transformers' multimodal models pass them) give ``(batch, seq, rotary_dim)`` with each column
    taken from its axis; any other shape is text positions, the same on every axis. Angles, cos
    and sin are computed in float64 and rounded once to
    ``dtype``: at most one rounding (``6e-8 * attention_factor`` in float32) from the exact value at
    every position ropekit serves (``position * max(inv_freq) < 2**32``). ``layout`` defaults to
    the table's own (``neox`` rotate-half, ``gptj`` interleaved). For a seq-len-dependent table,
    take :meth:`~ropekit.RopeTable.at` first.
    """
    if not isinstance(table, RopeTable):
        raise ArgumentTypeError("table", f"expected a ropekit.RopeTable, got {type(table).__name__}")
    chosen = table.layout if layout is None else layout
    if chosen not in LAYOUTS:
        raise ArgumentError("layout", f"unknown layout {chosen!r}; valid: {', '.join(LAYOUTS)}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ArgumentTypeError("dtype", f"expected a floating torch dtype, got {dtype!r}")
    if device is None and isinstance(positions, torch.Tensor):
        device = positions.device
    where = _positions_tensor(positions, max_position(table.inv_freq), device)
    inv_freq = torch.tensor(table.inv_freq, dtype=torch.float64)
    if table.mrope_composition is not None:
        if not _multimodal_rows(table, where):
            where = where.unsqueeze(0).expand(table.mrope_axes, *where.shape)
        return _mrope_cos_sin(table, inv_freq, where, dtype, chosen)
    return _cos_sin(inv_freq, table.attention_factor, where, dtype, chosen)


# ---------------------------------------------------------------------------------------------
# the drop-in module


def _config_dict(config: Any) -> dict[str, Any]:
    """A transformers config as the mapping ropekit reads."""
    document = config.to_dict()
    if not isinstance(document, dict):
        raise ArgumentTypeError("config", f"{type(config).__name__}.to_dict() returned {type(document).__name__}")
    return document


def _as_model_rope(config: ConfigLike, registry: Registry | None) -> ModelRope:
    if isinstance(config, ModelRope):
        return config
    if isinstance(config, (Mapping, str, os.PathLike)):
        return load(config, registry=registry)
    if callable(getattr(config, "to_dict", None)):  # a transformers PretrainedConfig
        return load(_config_dict(config), registry=registry)
    raise ArgumentTypeError("config", f"expected a config path, a mapping, a transformers config or a ModelRope, "
                            f"got {type(config).__name__}")


def _class_mrope(config: ConfigLike) -> Mapping[str, Any] | None:
    """The ``mrope`` fact of the class ``config``'s language model runs (its text config's
    ``model_type``, else the wrapper's default text model, else its own), as :func:`ropekit.load`
    identifies it; ``None`` for a :class:`~ropekit.ModelRope` (no class named) or a class without one."""
    if isinstance(config, ModelRope):
        return None
    if isinstance(config, (Mapping, str, os.PathLike)):
        mapping, _ = read_config(config)
    elif callable(getattr(config, "to_dict", None)):
        mapping = _config_dict(config)
    else:
        return None
    outer = mapping.get("model_type")
    text = mapping.get("text_config")
    model_type = text.get("model_type") if isinstance(text, Mapping) else None
    if model_type is None and isinstance(outer, str):
        wrapper = class_facts(outer)
        model_type = wrapper.text_type if wrapper is not None and wrapper.kind == "composite" else outer
    facts = class_facts(model_type) if isinstance(model_type, str) else None
    return facts.mrope if facts is not None else None


def _module_layout(config: ConfigLike, rope: ModelRope) -> Layout:
    """The column form transformers' own rotary module of ``config``'s class emits. A multimodal
    table: the layout observed on the class's module (its ``mrope`` fact: GLM-4V, GLM-OCR and
    ERNIE-4.5-VL repeat each pair, ``gptj``; HY-V4-VL's module emits ``neox`` that its attention
    re-pairs), else the table's own when no class is named. A text table: ``neox``, transformers'
    rotate-half."""
    multimodal = [table for table in rope.tables.values() if table.mrope_composition is not None]
    if not multimodal:
        return "neox"
    fact = _class_mrope(config)
    observed = fact.get("layout") if fact is not None else None
    if observed == "gptj":
        return "gptj"
    return "neox" if observed == "neox" else multimodal[0].layout


class RotaryEmbedding(torch.nn.Module):
    """A drop-in for transformers' ``*RotaryEmbedding`` modules, serving ropekit's tables.

    ``config`` is a config path, a mapping, a transformers config or a :class:`~ropekit.ModelRope`.
    ``forward(x, position_ids, layer_type=None)`` returns ``(cos, sin)`` of shape
    ``position_ids.shape + (rotary_dim,)`` in ``x``'s dtype and device, attention factor applied,
    in the column form the class's own rotary module emits: ``layout=None`` (the default) is
    transformers' rotate-half ``neox`` for a text table and, for a multimodal one, the layout
    observed on the class's module (``gptj``, each pair repeated, for GLM-4V, GLM-OCR and
    ERNIE-4.5-VL; the table's own layout when ``config`` is a :class:`~ropekit.ModelRope`, which
    names no class); give ``layout="gptj"`` or ``"neox"`` to choose. A
    multimodal table (Qwen2-VL, Qwen3-VL, GLM-4V, ERNIE-4.5-VL...) takes ``(axes, batch, seq)``
    position ids and returns ``(batch, seq, rotary_dim)``, each column from its axis, as
    transformers' multimodal rotary modules do; ``(batch, seq)`` ids are text positions, and other
    3-D ids are refused (GLM-Image's text model hands its rotary module rows 1..3 of its 4-row
    ids: give those). ``layer_type``
    picks the table of a multi-type model (Gemma-3); it may be omitted when there is one table.
    Angles are float64 (see :func:`cos_sin`), so the output is exact to the dtype's rounding at any
    position, where transformers' float32 angles drift.

    Seq-len-dependent schemes follow transformers' rotary modules: the table is the one for
    ``seq_len = max(position_ids) + 1`` (longrope: long factors past
    ``original_max_position_embeddings``; dynamic: recomputed past ``max_position_embeddings``).
    One difference: transformers' dynamic module keeps the largest table it grew to until a
    sequence shorter than ``max_position_embeddings`` arrives; this module is stateless and always
    uses the table for the current ``seq_len``.

    The tables are kept in float64 outside the module's buffers, so ``model.to(dtype)`` never
    rounds them.
    """

    def __init__(
        self, config: ConfigLike, *, registry: Registry | None = None, layout: Layout | None = None
    ) -> None:
        super().__init__()
        if layout is not None and layout not in LAYOUTS:
            raise ArgumentError("layout", f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)} (or None: the "
                                "class's own)")
        self.model_rope = _as_model_rope(config, registry)
        if not self.model_rope.tables:
            reason = self.model_rope.no_rope_reason or "no layer type rotates"
            raise ArgumentError("config", f"the model applies no RoPE ({reason})")
        self.layout: Layout = _module_layout(config, self.model_rope) if layout is None else layout
        self.layer_types = tuple(self.model_rope.tables)
        self._tensors: dict[tuple[str, int, str], tuple[torch.Tensor, float]] = {}

    @property
    def tables(self) -> Mapping[str, RopeTable]:
        """The load-time table of every layer type."""
        return self.model_rope.tables

    def table_for(self, layer_type: str | None = None, seq_len: int | None = None) -> RopeTable:
        """The table ``forward`` uses for ``layer_type`` and a sequence of ``seq_len`` positions."""
        if layer_type is None:
            if len(self.tables) != 1:
                raise ArgumentError("layer_type", f"the model has several layer types {sorted(self.tables)}; "
                                    "name one")
            table = next(iter(self.tables.values()))
        elif layer_type in self.model_rope.listed_types:  # a type whose layers share another's table included
            found = self.model_rope[layer_type]
            if found is None:
                raise ArgumentError("layer_type", f"layers of type {layer_type!r} apply no RoPE: no table to serve")
            table = found
        else:
            raise ArgumentError("layer_type", f"unknown layer type {layer_type!r}; have "
                                f"{sorted(self.model_rope.listed_types)}")
        if seq_len is not None and table.switch_at is not None and seq_len > table.switch_at:
            table = table.at(seq_len)
        return table

    def _frequencies(self, table: RopeTable, device: torch.device) -> tuple[torch.Tensor, float]:
        key = (table.layer_type, table.seq_len or 0, str(device))
        cached = self._tensors.get(key)
        if cached is None:
            if len(self._tensors) > 64:  # dynamic grows one table per length: keep the cache bounded
                self._tensors.clear()
            inv_freq = torch.tensor(table.inv_freq, dtype=torch.float64).to(_float64_device(device))
            cached = self._tensors[key] = (inv_freq, float(table.attention_factor))
        return cached

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` for ``position_ids`` in ``x``'s dtype and device (transformers' contract)."""
        seq_len = None
        if any(table.seq_len_dependent for table in self.tables.values()) and position_ids.numel():
            seq_len = int(position_ids.max()) + 1
        table = self.table_for(layer_type, seq_len)
        inv_freq, factor = self._frequencies(table, x.device)
        if table.mrope_composition is not None:
            positions = position_ids.to(x.device)
            if positions.ndim == 3 and positions.shape[0] != table.mrope_axes:
                raise ArgumentError("position_ids", f"expected ({table.mrope_axes}, batch, seq) multimodal position "
                                    f"ids or (batch, seq) text positions, got shape {tuple(positions.shape)} "
                                    f"({positions.shape[0]} rows; GLM-Image's text model hands its rotary module "
                                    "rows 1..3 of its 4-row ids)")
            if not _multimodal_rows(table, positions):
                positions = positions.unsqueeze(0).expand(table.mrope_axes, *positions.shape)
            return _mrope_cos_sin(table, inv_freq, positions, x.dtype, self.layout)
        return _cos_sin(inv_freq, factor, position_ids.to(x.device), x.dtype, self.layout)

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={table.rope_type}" for name, table in self.tables.items())


def _stock_tables(module: torch.nn.Module) -> dict[str | None, torch.Tensor]:
    """A transformers rotary module's current ``inv_freq`` buffers, by layer type (``None``: one table)."""
    found: dict[str | None, torch.Tensor] = {}
    for name, buffer in module.named_buffers(recurse=False):
        if name == "inv_freq":
            found[None] = buffer
        elif name.endswith("_inv_freq") and not name.endswith(("original_inv_freq", "long_inv_freq")):
            found[name[: -len("_inv_freq")]] = buffer
    return found


_ENCODER_CLASS = re.compile(r"(Vision|Visual|Audio|Image|DiT|Encoder|Tokenizer)RotaryEmbedding$")
"""An encoder's rotary class by its name: the word right before ``RotaryEmbedding``
(``Qwen2VLVisionRotaryEmbedding``, ``PeAudioEncoderRotaryEmbedding``, ``Qwen2_5OmniDiTRotaryEmbedding``).
A family name holding such a word does not make one: ``Granite4VisionTextRotaryEmbedding``,
``GlmImageTextRotaryEmbedding`` and ``HiggsAudioV2RotaryEmbedding`` are language models' rotaries."""
_ENCODER_CONFIG = re.compile(r"vision|visual|audio|video|image|encoder|backbone|vq_|sam_|prompt|mask")
"""An encoder's config by the key its class is kept under in a composite config (``base_config_key``:
``vision_config``, ``audio_config``, ``audio_video_config``...)."""
_ENCODER_PATH = re.compile(r"(visual|vision|audio|image_encoder|video_encoder)[a-z_]*\d*")
"""A module-path component that is an encoder tower (``model.visual``, ``vision_tower``, ``audio_tower``)."""


def _is_encoder_rotary(path: str, module: torch.nn.Module) -> bool:
    """Whether the rotary ``module`` at ``path`` is an encoder's (2-D patch grids, audio frames), not the
    language model's. A module whose config is a composite's ``text_config``, or whose class is a
    ``...TextRotaryEmbedding``, is the language model's; otherwise an encoder's config key, an encoder
    tower in its path, or an encoder word right before ``RotaryEmbedding`` in its class name makes it an
    encoder's."""
    name = type(module).__name__
    key = getattr(getattr(module, "config", None), "base_config_key", None)
    key = key if isinstance(key, str) else ""
    if key == "text_config" or name.endswith("TextRotaryEmbedding"):
        return False
    if _ENCODER_CONFIG.search(key) or _ENCODER_CLASS.search(name):
        return True
    return any(_ENCODER_PATH.fullmatch(part) for part in path.split("."))


def _is_stock_rotary(path: str, module: torch.nn.Module) -> bool:
    name = type(module).__name__
    if isinstance(module, RotaryEmbedding) or not name.endswith("RotaryEmbedding") or _is_encoder_rotary(path, module):
        return False
    if getattr(module, "config", None) is None or not _stock_tables(module):
        return False
    parameters = list(inspect.signature(type(module).forward).parameters)
    return parameters[1:3] == ["x", "position_ids"]


def _stock_layout(module: torch.nn.Module, layer_type: str | None) -> Layout:
    """The column form the stock module's cos/sin has, observed: ``gptj`` when each pair's two
    columns repeat (``[c0, c0, c1, c1, ...]``, GLM-4V, Cohere), else ``neox`` (``[c.., c..]``);
    the model's code applies its cos/sin in that form."""
    x = torch.zeros(1, 1, 2, 8)
    positions = torch.tensor([[1, 2]])
    try:
        with torch.no_grad():
            cos = module(x, positions) if layer_type is None else module(x, positions, layer_type)
            cos = cos[0].reshape(-1, cos[0].shape[-1]).double()
    except Exception:  # a module that cannot be called so: its rotate-half default
        return "neox"
    half = cos.shape[-1] // 2
    repeated = torch.equal(cos[..., 0::2], cos[..., 1::2])
    doubled = torch.equal(cos[..., :half], cos[..., half:])
    return "gptj" if repeated and not doubled else "neox"


def _parent(model: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    parent_name, _, attribute = name.rpartition(".")
    return (model.get_submodule(parent_name) if parent_name else model), attribute


def patch(model: torch.nn.Module, config: ConfigLike | None = None, *, registry: Registry | None = None) -> list[str]:
    """Swap a :class:`RotaryEmbedding` into ``model`` for every transformers rotary module it holds.

    Each replacement serves the tables of ``config`` (default: the module's own transformers
    config), for every layer type the stock module served, in the layout the model's code pairs
    channels with (the table's own: ``gptj`` for GLM-4V, ERNIE-4.5-VL...). Multimodal rotary
    modules are replaced too: the replacement composes ``(axes, batch, seq)`` position ids as the
    class does. Refused (nothing swapped) when a table's width differs from the stock one or a
    layer type is missing. Returns the names of the swapped modules.
    """
    if not isinstance(model, torch.nn.Module):
        raise ArgumentTypeError("model", f"expected a torch.nn.Module, got {type(model).__name__}")
    plan: list[tuple[str, RotaryEmbedding]] = []
    for name, module in model.named_modules():
        if not _is_stock_rotary(name, module):
            continue
        replacement = RotaryEmbedding(module.config if config is None else config, registry=registry)
        stock = _stock_tables(module)
        replacement.layout = _stock_layout(module, next(iter(stock)))
        for layer_type, buffer in stock.items():
            try:
                table = replacement.table_for(layer_type)
            except ArgumentError as error:
                raise ArgumentError("model", f"{name}: serves layer type {layer_type!r}: {error.problem}") from None
            if len(table.inv_freq) != buffer.shape[-1]:
                raise ArgumentError("model", f"{name}: the stock module serves {buffer.shape[-1]} pairs for "
                                    f"{layer_type or table.layer_type}, ropekit's table has {len(table.inv_freq)} "
                                    "(partial rotary ignored by the model's code?)")
        plan.append((name, replacement))
    if not plan:
        raise ArgumentError("model", f"no transformers rotary module found in {type(model).__name__}")
    for name, replacement in plan:
        parent, attribute = _parent(model, name)
        setattr(parent, attribute, replacement)
    return [name for name, _ in plan]


# ---------------------------------------------------------------------------------------------
# the transformers bridge


@attrs.define
class TransformersBridge:
    """What :func:`register_with_transformers` did: ``names`` registered, ``skipped`` (rope_type ->
    why: a broken plugin). :meth:`remove` takes the registrations out again."""

    names: tuple[str, ...]
    skipped: Mapping[str, str]
    _functions: dict[str, Callable[..., Any]] = attrs.field(repr=False)

    def remove(self) -> None:
        """Unregister every rope_type this bridge registered (and is still the owner of)."""
        rope_utils = _rope_utils()
        mixin = rope_utils.RotaryEmbeddingConfigMixin
        for name in self.names:
            if rope_utils.ROPE_INIT_FUNCTIONS.get(name) is self._functions[name]:
                del rope_utils.ROPE_INIT_FUNCTIONS[name]
            validator = f"_validate_{name}_rope_parameters"
            if getattr(mixin.__dict__.get(validator), "__ropekit__", False):
                delattr(mixin, validator)


def _rope_utils() -> Any:
    """transformers' rope module, after checking it has the internals the bridge uses."""
    try:
        import transformers
        from transformers import modeling_rope_utils
    except ImportError:
        raise MissingDependencyError('the transformers bridge needs transformers: pip install "ropekit[torch]" '
                                     "transformers") from None
    version = str(transformers.__version__)
    problems = []
    major = re.match(r"(\d+)\.", version)
    if major is None or int(major.group(1)) not in SUPPORTED_TRANSFORMERS:
        problems.append(f"major version {version} (supported: {', '.join(f'{v}.x' for v in SUPPORTED_TRANSFORMERS)})")
    functions = getattr(modeling_rope_utils, "ROPE_INIT_FUNCTIONS", None)
    if not isinstance(functions, dict) or "llama3" not in functions:
        problems.append("no ROPE_INIT_FUNCTIONS table")
    else:
        wanted = ["config", "device", "seq_len", "layer_type"]
        if list(inspect.signature(functions["llama3"]).parameters)[:4] != wanted:
            problems.append(f"rope init functions no longer take ({', '.join(wanted)})")
    mixin = getattr(modeling_rope_utils, "RotaryEmbeddingConfigMixin", None)
    if mixin is None or not hasattr(mixin, "validate_rope") or not hasattr(mixin, "_validate_yarn_rope_parameters"):
        problems.append("no RotaryEmbeddingConfigMixin._validate_<rope_type>_rope_parameters validation")
    else:
        source = inspect.getsource(mixin.validate_rope)
        if '_validate_{rope_type}_rope_parameters' not in source:
            problems.append("validate_rope no longer looks up _validate_<rope_type>_rope_parameters")
    if problems:
        raise TransformersBridgeError(f"transformers {version} differs from what ropekit's bridge was written for: "
                                      f"{'; '.join(problems)}. Upgrade ropekit, or serve the model with "
                                      "ropekit.torch.patch(model) after loading it with a supported transformers.")
    return modeling_rope_utils


def _init_function(name: str, registry: Registry) -> Callable[..., tuple[torch.Tensor, float]]:
    def compute(config: Any, device: Any = None, seq_len: Any = None, layer_type: str | None = None,
                **_: Any) -> tuple[torch.Tensor, float]:
        rope = load(_config_dict(config), registry=registry)
        found = rope[layer_type] if layer_type is not None else rope.rotating_table()
        if found is None:
            raise NoRopeError(f"layer_types.{layer_type}", f"layers of type {layer_type!r} apply no RoPE, so "
                              "transformers should not build a rotary table for them")
        table = found
        if seq_len is not None and table.seq_len_dependent:
            table = table.at(int(seq_len))
        elif seq_len is None and table.seq_len_dependent and "dynamic" not in name:
            warnings.warn(f"rope_type {name!r} depends on the sequence length, but transformers' rotary modules "
                          "only update 'dynamic' and 'longrope' tables: its forward will serve the load-time table "
                          "at every length. ropekit.torch.patch(model) serves it by length.", RuntimeWarning,
                          stacklevel=2)
        inv_freq = torch.tensor(np.asarray(table.inv_freq), dtype=torch.float32, device=device)
        return inv_freq, float(table.attention_factor)

    compute.__name__ = f"ropekit_{name}_rope_parameters"
    compute.__doc__ = f"transformers rope init function for {name!r}, served by ropekit's plugin."
    return compute


def _validation_function(registry: Registry) -> Callable[..., None]:
    def validate(config: Any, rope_parameters: Any, ignore_keys: Any = None) -> None:
        load(_config_dict(config), registry=registry)  # RopeConfigError (a ValueError) names the JSON path

    validate.__ropekit__ = True  # type: ignore[attr-defined]
    return validate


def register_with_transformers(*, registry: Registry | None = None) -> TransformersBridge:
    """Register every installed ropekit rope_type that transformers does not know into transformers'
    rope machinery: its init-function table (``ROPE_INIT_FUNCTIONS``) and its config validation
    (``_validate_<rope_type>_rope_parameters``, which runs ropekit's strict loader).

    Afterwards a model whose config names such a rope_type loads with ``from_pretrained`` and
    generates; its stock rotary module gets the plugin's table (in float32, as transformers keeps
    it). Raises :class:`TransformersBridgeError` when the installed transformers' internals differ
    from the ones this bridge was written for (never a silent no-op). rope_types whose names
    transformers already serves, and their ropekit aliases (``su``, ``mrope``), are left to it.
    A seq-len-dependent third-party scheme is updated by transformers' forward only when its name
    contains ``dynamic``; otherwise :func:`patch` the model.
    """
    rope_utils = _rope_utils()
    registry = registry or default_registry()
    known = set(rope_utils.ROPE_INIT_FUNCTIONS) | {"default"}
    mixin = rope_utils.RotaryEmbeddingConfigMixin
    names, skipped, functions = [], {}, {}
    for name in registry.names():
        current = rope_utils.ROPE_INIT_FUNCTIONS.get(name)
        ours = getattr(current, "__name__", "").startswith("ropekit_")
        if name in known and not ours:
            continue
        try:
            scheme = registry.scheme(name)
        except PluginError as error:
            skipped[name] = str(error)
            continue
        if scheme.name in known and name != scheme.name and not ours:
            continue  # an alias of a rope_type transformers serves
        validator = f"_validate_{name}_rope_parameters"
        if validator in mixin.__dict__ and not getattr(mixin.__dict__[validator], "__ropekit__", False):
            continue  # transformers validates it: it knows the name
        functions[name] = rope_utils.ROPE_INIT_FUNCTIONS[name] = _init_function(name, registry)
        setattr(mixin, validator, _validation_function(registry))
        names.append(name)
    return TransformersBridge(tuple(names), skipped, functions)


# ---------------------------------------------------------------------------------------------
# audit of a live model

_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)(?:\.|$)")


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _array(tensor: torch.Tensor) -> np.ndarray[Any, np.dtype[np.float64]]:
    return np.asarray(tensor.detach().to("cpu", torch.float64).numpy(), dtype=np.float64)


def _layer_type_of(name: str, rope: ModelRope) -> str | None:
    """The layer type a module path names through its layer index (``model.layers.3.self_attn...``)."""
    match = _LAYER_INDEX.search(name)
    if match is None or not rope.layer_types:
        return None
    index = int(match.group(1))
    return rope.layer_types[index] if index < len(rope.layer_types) else None


def _served_tables(name: str, module: torch.nn.Module, rope: ModelRope) -> Iterator[ServedTable]:
    """The rotary tables one module holds, by the discovery rules of :func:`audit_module`."""
    if _is_encoder_rotary(name, module):
        return  # a vision or audio encoder's own rotary: not the language model's
    owner = _layer_type_of(name, rope)
    prefix = f"{name}." if name else ""
    if isinstance(module, RotaryEmbedding):
        for name_of_type, table in module.tables.items():
            yield ServedTable(f"{prefix}tables[{name_of_type!r}]", "inv_freq", np.array(table.inv_freq), "float64",
                              magnitude=table.attention_factor, layer_type=name_of_type, angles="exact")
        return
    buffers = dict(module.named_buffers(recurse=False))
    if hasattr(module, "recomposition_frequencies") and _stock_tables(module):  # transformers, multimodal
        yield from _observed_multimodal(prefix, module, owner)
        return
    for layer_type, buffer in _stock_tables(module).items():  # transformers
        scaling = getattr(module, "attention_scaling" if layer_type is None else f"{layer_type}_attention_scaling",
                          None)
        buffer_name = "inv_freq" if layer_type is None else f"{layer_type}_inv_freq"
        yield ServedTable(f"{prefix}{buffer_name}", "inv_freq", _array(buffer), _dtype_name(buffer),
                          magnitude=float(scaling) if isinstance(scaling, (int, float)) else None,
                          layer_type=layer_type or owner, angles="float32")
    cache = buffers.get("cos_sin_cache")  # vLLM: [cos | sin], one column per pair, factor baked in
    if cache is not None and cache.ndim == 2 and cache.shape[1] % 2 == 0:
        half = cache.shape[1] // 2
        values = _array(cache)
        yield ServedTable(f"{prefix}cos_sin_cache", "cache", values[:, :half], _dtype_name(cache),
                          sin=values[:, half:], layout="half", layer_type=owner)
    cos, sin = buffers.get("freqs_cos"), buffers.get("freqs_sin")  # ExecuTorch
    if cos is not None and sin is not None and cos.ndim == 2 and cos.shape == sin.shape:
        widths = {len(table.inv_freq) for table in rope.tables.values()}
        layout = "neox" if cos.shape[1] not in widths and cos.shape[1] // 2 in widths else "half"
        yield ServedTable(f"{prefix}freqs_cos", "cache", _array(cos), _dtype_name(cos), sin=_array(sin),
                          layout=layout, layer_type=owner)


_OBSERVED_ROWS = 2048
"""Text positions a live multimodal module is run at, for its cos/sin."""


def _call(module: torch.nn.Module, positions: torch.Tensor, layer_type: str | None) -> tuple[torch.Tensor, ...]:
    x = torch.zeros(1, dtype=torch.float32)
    with torch.no_grad():
        found = module(x, positions) if layer_type is None else module(x, positions, layer_type)
    return tuple(found)


def _observed_multimodal(prefix: str, module: torch.nn.Module, owner: str | None) -> Iterator[ServedTable]:
    """A transformers multimodal rotary module as it behaves, observed, not read from its buffers
    (ERNIE-4.5-VL keeps ``inv_freq`` pre-permuted): cos/sin at text positions ``0..2047``, and which
    axis drives each column (one axis moved at a time)."""
    for layer_type in _stock_tables(module):
        cos, sin = _call(module, torch.arange(_OBSERVED_ROWS)[None], layer_type)[:2]
        axes = None
        for count in (3, 2, 4, 5):
            try:
                drives = torch.zeros(cos.shape[-1], dtype=torch.int64)
                for axis in range(count):
                    moved = torch.zeros(count, 1, 1, dtype=torch.int64)
                    moved[axis] = 1
                    _, axis_sin = _call(module, moved, layer_type)[:2]
                    drives[axis_sin.reshape(-1).abs() > 0] = axis
            except (RuntimeError, IndexError, ValueError):  # it reads another number of axes
                continue
            axes = tuple(int(axis) for axis in drives)
            break
        name = "inv_freq" if layer_type is None else f"{layer_type}_inv_freq"
        yield ServedTable(f"{prefix}{name} (observed cos/sin)", "cache", _array(cos.reshape(-1, cos.shape[-1])),
                          _dtype_name(cos), sin=_array(sin.reshape(-1, sin.shape[-1])),
                          layout=_stock_layout(module, layer_type), layer_type=layer_type or owner, axes=axes)


def _attribute(rope: ModelRope, served: ServedTable, kind: str) -> ServedTable:
    """An unattributed table among several same-width layer types stands for the one it matches."""
    if served.layer_type in rope.tables:
        return served
    width = served.values.shape[0] if served.kind == "inv_freq" else (
        served.values.shape[1] if served.layout == "half" else served.values.shape[1] // 2)
    sized = [name for name, table in rope.tables.items() if len(table.inv_freq) == width]
    if len(sized) < 2:
        return served
    for name in sized:
        if audit_artifact(rope, ServedArtifact(served.where, kind, (served,)), layer_type=name).verdict == "match":
            return attrs.evolve(served, layer_type=name)
    return served


def audit_module(
    model: Any, config: ConfigLike, *, registry: Registry | None = None, positions: Iterable[int] | None = None
) -> dict[str, Any]:
    """Check every rotary table a torch model holds against what ``config`` declares.

    ``config`` is a config path, a mapping or a :class:`~ropekit.ModelRope`. Found: transformers'
    ``inv_freq`` / ``{layer_type}_inv_freq`` buffers with their ``attention_scaling``, vLLM's
    ``cos_sin_cache``, ExecuTorch's ``freqs_cos``/``freqs_sin``, and ropekit's own
    :class:`RotaryEmbedding`. A table's layer type comes from its buffer name, else from the layer
    index in the module path (``layers.3``) and the config's ``layer_types``, else from the table
    it matches among those of its width. The result is the ``ropekit audit --json`` document
    (same verdicts and ``served_as``) plus ``modules``: each module path's verdict. A multimodal
    model with a ``get_rope_index`` (and ``config`` not a :class:`~ropekit.ModelRope`) also gets
    ``position_ids``: :func:`audit_position_ids`, its own position ids against the family's rule
    (a mismatch there makes the verdict a mismatch). A transformers
    module reports its *current* buffers: after a long sequence, a longrope or dynamic module
    holds the long table, and the audit says so.
    """
    if not isinstance(model, torch.nn.Module):
        raise ArgumentTypeError("model", f"expected a torch.nn.Module, got {type(model).__name__}")
    rope = _as_model_rope(config, registry)
    kind = "torch"
    tables: list[ServedTable] = []
    owners: dict[str, str] = {}
    for name, module in model.named_modules():
        for served in _served_tables(name, module, rope):
            attributed = _attribute(rope, served, kind)
            tables.append(attributed)
            owners[attributed.where] = name
    artifact = ServedArtifact(type(model).__name__, kind, tuple(tables), producer="live torch module")
    report = audit_artifact(rope, artifact) if positions is None else audit_artifact(rope, artifact,
                                                                                   positions=positions)
    extra: dict[str, Any] = {"modules": module_verdicts(report, owners)}
    verdict = report.verdict
    if not isinstance(config, ModelRope) and rope_index_owner(model) is not None and any(
            table.mrope_composition is not None for table in rope.tables.values()):
        mapping = _config_dict(config) if callable(getattr(config, "to_dict", None)) else config
        checked = audit_position_ids(model, mapping)
        extra["position_ids"] = checked
        if checked["verdict"] == "mismatch":
            verdict = "mismatch"
    return attrs.evolve(report, verdict=verdict, extra=extra).to_json()

