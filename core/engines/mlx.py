"""ropekit in MLX forwards: the arguments of ``mx.fast.rope``, a drop-in rope module for MLX-LM
models, a drop-in multimodal rotary module for MLX-VLM's Qwen2-VL, Qwen2.5-VL and Qwen3-VL language
models, and an audit of MLX-LM's own rope modules (``pip install "ropekit[mlx]"``; on Linux the
extra installs ``mlx[cpu]``; MLX-VLM: ``pip install "ropekit[mlx-vlm]"``).

``mx.fast.rope(x, dims, base=None, freqs=f)`` takes *periods*, ``f = 1 / inv_freq``, and has no
magnitude argument: the attention factor multiplies the rotated channels of ``x`` first (as
MLX-LM's own longrope and yarn modules do). MLX forms angles in float32, so far positions carry
float32 angle drift (~``position * 2**-24`` rad); ropekit's float64 tables fix the frequencies,
not that.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, cast

import numpy as np

from ..artifacts.audit import audit_artifact, module_verdicts
from ..artifacts.served import ServedArtifact, ServedTable
from ..errors import ArgumentError, ArgumentTypeError, MissingDependencyError
from ..host.registry import Registry
from ..loader import load
from ..tables.table import ModelRope, RopeTable

try:
    import mlx.core as mx
    from mlx.nn.layers.base import Module
    from mlx.nn.layers.positional_encoding import RoPE as _MlxRoPE
except ImportError:  # pragma: no cover - exercised only without mlx
    raise MissingDependencyError('ropekit.mlx needs mlx: pip install "ropekit[mlx]" (mlx[cpu] on Linux)') from None

__all__ = ["FastRope", "MultimodalRotaryEmbedding", "RoPE", "audit_module", "cos_sin", "fast_rope", "patch"]

ConfigLike = ModelRope | Mapping[str, Any] | str | os.PathLike[str]


class FastRope(NamedTuple):
    """What ``mx.fast.rope`` needs for one table: ``mx.fast.rope(x[..., :dims] * scale, dims,
    traditional=traditional, base=None, scale=1.0, offset=offset, freqs=freqs)``."""

    dims: int
    freqs: mx.array
    scale: float
    traditional: bool


def fast_rope(table: RopeTable) -> FastRope:
    """The ``mx.fast.rope`` arguments serving ``table``: periods ``1 / inv_freq`` (float32; a zero
    frequency is an infinite period, a channel that never turns), the attention factor as the input
    scale, and ``traditional`` for interleaved (``gptj``) tables. For a seq-len-dependent table, take
    :meth:`~ropekit.RopeTable.at` first."""
    if not isinstance(table, RopeTable):
        raise ArgumentTypeError("table", f"expected a ropekit.RopeTable, got {type(table).__name__}")
    with np.errstate(divide="ignore"):
        periods = np.where(table.inv_freq > 0, 1.0 / np.maximum(table.inv_freq, 1e-300), np.inf)
    return FastRope(table.rotary_dim, mx.array(periods.astype(np.float32)), float(table.attention_factor),
                    table.layout == "gptj")


def cos_sin(
    table: RopeTable, positions: Any, *, dtype: Any = None, layout: str | None = None
) -> tuple[mx.array, mx.array]:
    """``(cos, sin)`` as MLX arrays: :meth:`RopeTable.cos_sin <ropekit.RopeTable.cos_sin>` (float64
    angles, rounded once; attention factor applied) moved into MLX.

    For a multimodal table, ``positions`` of shape ``(axes, seq)`` or ``(axes, batch, seq)``
    (numpy or MLX integers) give ``(seq, width)`` / ``(batch, seq, width)``, each column from its
    axis as the model's code composes them; 1-D positions are text positions. ``dtype``:
    ``mx.float32`` (default) or ``mx.float16``, rounded once from float64; ``mx.bfloat16`` is
    rounded from float32 (numpy has no bfloat16 without ``ml_dtypes``).
    """
    if not isinstance(table, RopeTable):
        raise ArgumentTypeError("table", f"expected a ropekit.RopeTable, got {type(table).__name__}")
    chosen = mx.float32 if dtype is None else dtype
    numpy_dtype = {mx.float32: np.float32, mx.float16: np.float16, mx.bfloat16: np.float32}.get(chosen)
    if numpy_dtype is None:
        raise ArgumentError("dtype", f"expected mx.float32, mx.float16 or mx.bfloat16, got {dtype!r}")
    if isinstance(positions, mx.array):
        positions = np.array(positions)
    cos, sin = table.cos_sin(positions, dtype=numpy_dtype, layout=cast(Any, layout))
    return mx.array(cos).astype(chosen), mx.array(sin).astype(chosen)


class RoPE(Module):
    """A drop-in for MLX-LM's rope modules (``nn.RoPE``, ``Llama3RoPE``, ``YarnRoPE``,
    ``SuScaledRoPE``, ...): ``__call__(x, offset=0)`` rotates the last axis of ``x``
    (``(B, heads, T, head_dim)``) for positions ``offset .. offset + T - 1``.

    The table is ``table`` at load time; a seq-len-dependent one follows transformers' rule with
    ``seq_len = offset + T`` (longrope: short factors up to ``original_max_position_embeddings``,
    where MLX-LM's ``SuScaledRoPE`` uses the long ones at every length).
    """

    def __init__(self, table: RopeTable) -> None:
        cast(Any, super()).__init__()  # mlx's Module.__init__ is unannotated
        if not isinstance(table, RopeTable):
            raise ArgumentTypeError("table", f"expected a ropekit.RopeTable, got {type(table).__name__}")
        self.table = table
        self.dims = table.rotary_dim
        self.traditional = table.layout == "gptj"
        self._current = (0, fast_rope(table))
        self.freeze()

    def _arguments(self, seq_len: int) -> FastRope:
        table = self.table
        key = seq_len if table.switch_at is not None and seq_len > table.switch_at else 0
        if key != self._current[0]:
            self._current = (key, fast_rope(table.at(key) if key else table))
        return self._current[1]

    def __call__(self, x: mx.array, offset: int | mx.array = 0) -> mx.array:
        """``x`` rotated for positions ``offset ..``, attention factor applied."""
        seq_len = int(np.max(np.array(offset))) + x.shape[-2]
        arguments = self._arguments(seq_len)
        if arguments.scale != 1.0:
            x = x.at[..., : arguments.dims].multiply(arguments.scale)
        return mx.fast.rope(x, arguments.dims, traditional=arguments.traditional, base=None, scale=1.0,
                            offset=offset, freqs=arguments.freqs)

    def _extra_repr(self) -> str:
        return f"{self.table.rope_type}, dims={self.dims}"


class MultimodalRotaryEmbedding(Module):
    """A drop-in for MLX-VLM's language-side multimodal rotary modules (``rotary_emb`` in each
    attention layer of its Qwen2-VL, Qwen2.5-VL and Qwen3-VL models), serving a multimodal ropekit
    table.

    It keeps the stock contract: ``__call__(x, position_ids) -> (cos, sin)`` of shape
    ``(batch, seq, rotary_dim)`` in ``x``'s dtype, and ``apply_rotary(q, k, position_ids)`` rotating
    ``(batch, heads, seq, head_dim)`` queries and keys rotate-half style; ``fused_apply`` is
    ``False``, so the model computes cos/sin once per forward for every layer. ``position_ids`` are
    ``(axes, batch, seq)`` (MLX-VLM's ``get_rope_index``) or ``(batch, seq)`` text positions, the same
    on every axis. Each column takes its axis as transformers' module for the model composes them
    (``table.mrope_composition``), with float64 angles rounded once (:func:`cos_sin`), where MLX-VLM
    forms float32 angles.

    The cos/sin are computed on the host (numpy) from the positions of each forward, which
    evaluates ``position_ids``: the language model's forward cannot run under ``mx.compile``. A
    seq-len-dependent table follows ``seq_len = max(position_ids) + 1`` (:meth:`RopeTable.at
    <ropekit.RopeTable.at>`).
    """

    def __init__(self, table: RopeTable) -> None:
        cast(Any, super()).__init__()  # mlx's Module.__init__ is unannotated
        if not isinstance(table, RopeTable):
            raise ArgumentTypeError("table", f"expected a ropekit.RopeTable, got {type(table).__name__}")
        if table.mrope_composition is None:
            raise ArgumentError("table", f"the {table.layer_type} table is text-only (no mrope_section): "
                                "a multimodal rotary module needs a multimodal table")
        if table.layout != "neox":
            raise ArgumentError("table", f"the {table.layer_type} table pairs channels {table.layout}; MLX-VLM's "
                                "multimodal attention rotates half (neox)")
        self.table = table
        self.dim = table.rotary_dim
        self.axes = table.mrope_axes
        self.fused_apply = False  # MLX-VLM's models then take (cos, sin) from __call__, once per forward
        self.freeze()

    def _table_at(self, positions: np.ndarray[Any, Any]) -> RopeTable:
        table = self.table
        if table.switch_at is not None and positions.size:
            seq_len = int(positions.max()) + 1
            if seq_len > table.switch_at:
                return table.at(seq_len)
        return table

    def _positions(self, position_ids: Any) -> np.ndarray[Any, Any]:
        positions = np.array(position_ids)
        if positions.ndim == 2:  # (batch, seq) text positions: the same on every axis
            positions = np.broadcast_to(positions, (self.axes, *positions.shape))
        if positions.ndim != 3 or positions.shape[0] != self.axes:
            raise ArgumentError("position_ids", f"expected ({self.axes}, batch, seq) or (batch, seq) position ids, "
                                f"got shape {tuple(positions.shape)}")
        if not np.issubdtype(positions.dtype, np.integer):
            raise ArgumentTypeError("position_ids", f"expected integer position ids, got {positions.dtype}")
        return positions

    def __call__(self, x: mx.array, position_ids: Any) -> tuple[mx.array, mx.array]:
        """``(cos, sin)``, ``(batch, seq, rotary_dim)`` in ``x``'s dtype, attention factor applied."""
        positions = self._positions(position_ids)
        dtype = x.dtype if x.dtype in (mx.float16, mx.bfloat16) else mx.float32
        cos, sin = cos_sin(self._table_at(positions), positions, dtype=dtype)
        if dtype != x.dtype:
            cos, sin = cos.astype(x.dtype), sin.astype(x.dtype)
        return cos, sin

    def apply_rotary(
        self, q: mx.array, k: mx.array, position_ids: Any, *, unsqueeze_dim: int = 1, cast_output: bool = True
    ) -> tuple[mx.array, mx.array]:
        """``q`` and ``k`` rotated for ``position_ids`` (MLX-VLM's ``apply_rotary`` contract): the
        first ``rotary_dim`` channels rotate half, the rest pass through."""
        cos, sin = self(k, position_ids)
        cos, sin = mx.expand_dims(cos, axis=unsqueeze_dim), mx.expand_dims(sin, axis=unsqueeze_dim)
        return _rotate(q, cos, sin, cast_output), _rotate(k, cos, sin, cast_output)

    def _extra_repr(self) -> str:
        return f"{self.table.rope_type}, {self.table.mrope_composition} {list(self.table.mrope_section or ())}"


def _rotate(x: mx.array, cos: mx.array, sin: mx.array, cast_output: bool) -> mx.array:
    """Rotate-half RoPE on the first ``cos.shape[-1]`` channels of ``x``."""
    width = cos.shape[-1]
    part, rest = x[..., :width], x[..., width:]
    half = width // 2
    rotated = part * cos + mx.concatenate([-part[..., half:], part[..., :half]], axis=-1) * sin
    if cast_output:
        rotated = rotated.astype(x.dtype)
    return rotated if rest.shape[-1] == 0 else mx.concatenate([rotated, rest], axis=-1)


_MLX_VLM_MULTIMODAL = {
    "mlx_vlm.models.qwen2_vl.language.Qwen2RotaryEmbedding": "Qwen2-VL",
    "mlx_vlm.models.qwen2_5_vl.language.Qwen2RotaryEmbedding": "Qwen2.5-VL",
    "mlx_vlm.models.qwen3_vl.language.Qwen3VLRotaryEmbedding": "Qwen3-VL",
}
"""MLX-VLM rotary classes :class:`MultimodalRotaryEmbedding` replaces: their attention reads
``fused_apply``, takes ``(cos, sin)`` from ``rotary_emb(h, position_ids)`` (rotate-half over the whole
head) or calls ``rotary_emb.apply_rotary(q, k, position_ids)``, and nothing else of the module."""

_NOT_TEXT = re.compile(r"(Vision|Visual|Audio|Image|Patch|CodePredictor)RotaryEmbedding$")
"""Rotary modules of encoders and speech heads (2-D patch grids, audio frames), not of the language model:
the word right before ``RotaryEmbedding`` (``Glm4vVisionRotaryEmbedding``), as in :mod:`ropekit.engines.torch`;
a family name holding such a word (``Granite4VisionTextRotaryEmbedding``) is a language model's."""


def _qualified(module: Module) -> str:
    kind = type(module)
    return f"{kind.__module__}.{kind.__qualname__}"


def _is_other_mlx_vlm_rotary(module: Module) -> bool:
    """A language-side MLX-VLM rotary module that :func:`patch` does not know how to replace."""
    kind = type(module)
    return (kind.__module__.startswith("mlx_vlm.") and ".vision" not in kind.__module__
            and kind.__name__.endswith("RotaryEmbedding") and not _NOT_TEXT.search(kind.__name__)
            and _qualified(module) not in _MLX_VLM_MULTIMODAL)


def _as_model_rope(config: ConfigLike, registry: Registry | None) -> ModelRope:
    if isinstance(config, ModelRope):
        return config
    if isinstance(config, (Mapping, str, os.PathLike)):
        return load(config, registry=registry)
    raise ArgumentTypeError("config", f"expected a config path, a mapping or a ModelRope, got {type(config).__name__}")


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?:\.|$)")


def _rope_modules(model: Module) -> Iterator[tuple[str, Module]]:
    """MLX-LM rope modules: ``nn.RoPE``, any module class named ``*RoPE``/``*Rope`` with ``dims``."""
    for name, module in cast(Any, model).named_modules():
        if _is_rope_module(module):
            yield name, module


def _is_rope_module(module: Module) -> bool:
    kind = type(module).__name__
    if isinstance(module, MultimodalRotaryEmbedding):
        return False
    return isinstance(module, (_MlxRoPE, RoPE)) or (kind.endswith(("RoPE", "Rope")) and _dims(module) is not None)


def _dims(module: Module) -> int | None:
    for attribute in ("dims", "dim"):
        value = getattr(module, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _layer_type(name: str, rope: ModelRope) -> str | None:
    match = _LAYER_INDEX.search(name)
    if match is None:
        return None
    index = int(match.group(1))
    if rope.layer_types:
        return rope.layer_types[index] if index < len(rope.layer_types) else None
    return next(iter(rope.tables)) if len(rope.tables) == 1 else None


def patch(model: Module, config: ConfigLike, *, registry: Registry | None = None) -> list[str]:
    """Replace every rope module of an MLX-LM or MLX-VLM ``model`` with one serving the table its
    layer uses (by the layer index in the module path and the config's ``layer_types``). Returns the
    replaced module paths.

    MLX-LM rope modules (``nn.RoPE``, ``*RoPE``) become :class:`RoPE`. The language-side rotary
    modules of MLX-VLM's Qwen2-VL, Qwen2.5-VL and Qwen3-VL models become
    :class:`MultimodalRotaryEmbedding`, which needs a multimodal table (the model's ``config.json``,
    whose ``rope_scaling`` / ``rope_parameters`` declare ``mrope_section``); the vision tower's rotary
    modules are not RoPE tables ropekit serves and stay as they are.

    Refuses (nothing replaced) a module whose layer has no table, whose width differs, an MLX-VLM
    multimodal module given a text-only table, and any other MLX-VLM language-side rotary class
    (named in the error).
    """
    rope = _as_model_rope(config, registry)
    plan: list[tuple[str, Module]] = []
    for name, module in cast(Any, model).named_modules():
        multimodal = isinstance(module, MultimodalRotaryEmbedding) or _qualified(module) in _MLX_VLM_MULTIMODAL
        if not multimodal and _is_other_mlx_vlm_rotary(module):
            raise ArgumentError("model", f"{name}: ropekit cannot patch MLX-VLM's {type(module).__name__} "
                                f"({type(module).__module__}); it patches the rotary modules of "
                                f"{', '.join(_MLX_VLM_MULTIMODAL.values())} and MLX-LM rope modules")
        if not multimodal and not _is_rope_module(module):
            continue
        table, layer_type = _table_for(name, rope)
        if multimodal and table.mrope_composition is None:
            raise ArgumentError("config", f"{name}: {type(module).__name__} serves 3-axis multimodal positions, "
                                f"but ropekit's {layer_type} table is text-only (the config declares no "
                                "mrope_section): pass the vision-language model's own config")
        width = cast(Any, module).dim if multimodal else _dims(module)
        if width != table.rotary_dim:
            raise ArgumentError("model", f"{name}: rotates {width} channels, ropekit's {layer_type} table "
                                f"{table.rotary_dim}")
        plan.append((name, MultimodalRotaryEmbedding(table) if multimodal else RoPE(table)))
    if not plan:
        raise ArgumentError("model", f"no rope module found in {type(model).__name__}")
    for name, replacement in plan:
        parent_name, _, attribute = name.rpartition(".")
        parent: Any = model
        for part in parent_name.split(".") if parent_name else ():
            parent = parent[int(part)] if isinstance(parent, list) else getattr(parent, part)
        setattr(parent, attribute, replacement)
    return [name for name, _ in plan]


def _table_for(name: str, rope: ModelRope) -> tuple[RopeTable, str]:
    """The table serving the layer at module path ``name``, and its layer type."""
    layer_type = _layer_type(name, rope)
    if layer_type is None and len(rope.tables) == 1:
        layer_type = next(iter(rope.tables))
    found = rope[layer_type] if layer_type is not None and layer_type in rope.listed_types else None
    if layer_type is None or found is None:
        raise ArgumentError("model", f"{name}: cannot tell which layer type it serves (have {sorted(rope.tables)})")
    return found, layer_type


def _probe(module: Module, dims: int, traditional: bool, start: int, count: int) -> tuple[Any, Any]:
    """cos and sin (one column per pair, magnitude included) that ``module`` applies at positions
    ``start .. start + count - 1``: rotate a unit vector per pair and read both coordinates."""
    pairs = dims // 2
    probe = np.zeros((1, 1, count, dims), dtype=np.float32)
    if traditional:
        probe[..., 0::2] = 1.0
    else:
        probe[..., :pairs] = 1.0
    out = np.array(module(mx.array(probe), offset=start), dtype=np.float64)[0, 0]
    return (out[:, 0::2], out[:, 1::2]) if traditional else (out[:, :pairs], out[:, pairs:dims])


def audit_module(
    model: Module,
    config: ConfigLike,
    *,
    positions: range = range(4096),
    registry: Registry | None = None,
) -> dict[str, Any]:
    """Check every rope module of an MLX-LM ``model`` at ``positions`` (a contiguous range, one
    forward call with ``offset = positions.start``) against what ``config`` declares.

    Each module is probed: a unit vector per pair, rotated, gives the cos/sin it applies (with the
    attention factor it multiplies in), audited as a float32-angle cache with ``ropekit audit``'s
    verdicts. The declared table is the one for ``seq_len = positions.stop`` (longrope: short factors
    up to ``original_max_position_embeddings``), so MLX-LM's ``SuScaledRoPE``, which uses the long
    factors at every length, is a mismatch at short positions. Returns the ``ropekit audit --json``
    document plus ``modules``: each module path's verdict.
    """
    if not isinstance(positions, range) or positions.step != 1 or not len(positions) or positions.start < 0:
        raise ArgumentError("positions", f"expected a non-empty range of non-negative positions, got {positions!r}")
    rope = _as_model_rope(config, registry)
    tables: list[ServedTable] = []
    owners: dict[str, str] = {}
    for name, module in _rope_modules(model):
        dims = _dims(module)
        assert dims is not None
        traditional = bool(getattr(module, "traditional", False))
        cos, sin = _probe(module, dims, traditional, positions.start, len(positions))
        layer_type = _layer_type(name, rope)
        table = rope.tables.get(layer_type) if layer_type else next(iter(rope.tables.values()))
        regime = None
        if table is not None and table.switch_at is not None:
            regime = "long" if positions.stop > table.switch_at else "short"
        where = f"{name or type(module).__name__} at positions {positions.start}..{positions.stop - 1}"
        tables.append(ServedTable(where, "cache", cos, "float32", sin=sin, layout="half", layer_type=layer_type,
                                  regime=regime, first_position=positions.start))
        owners[where] = name
    artifact = ServedArtifact(type(model).__name__, "mlx", tuple(tables), producer="live MLX module")
    report = audit_artifact(rope, artifact)
    return {**report.to_json(), "modules": module_verdicts(report, owners)}

