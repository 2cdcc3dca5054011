"""The table llama.cpp serves from a GGUF, rebuilt from its keys and tensors. Needs ``ropekit[gguf]``.

A GGUF carries no cos/sin table: llama.cpp forms every angle at run time from
``{arch}.rope.freq_base``, ``.rope.dimension_count``, ``.rope.scaling.*`` and the optional
``rope_freqs`` (llama3) or ``rope_factors_long``/``_short`` (Phi-3 longrope) tensors. The rules below
follow llama.cpp's source (``src/llama-model.cpp`` loading, ``src/llama-context.cpp`` context
parameters, ggml's ``rope_yarn``; llama-cpp-python 0.3.36's vendored copy):

* ``rope.scaling.type`` absent means linear with ``factor`` absent: scale 1;
* served ``inv_freq[i] = base ** (-2i / n_rot) / freq_factors[i] * (scale * (1 - mix_i) + mix_i)``,
  ``mix`` being YaRN's ramp (only for ``yarn``), with betas 32 and 1 unless the architecture reads the
  file's betas (grok, mistral3);
* the cos/sin magnitude is ``rope.scaling.attn_factor`` times, for YaRN, ``get_mscale(factor)`` or
  the ``yarn_log_multiplier`` ratio (deepseek2, mistral3): the file's ``yarn_attn_factor`` is overwritten;
* longrope's long factors are used when the allocated context, padded to a multiple of 256, exceeds
  ``original_context_length``, for every position, whatever the sequence length.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..contract.scheme import plain_inv_freq
from ..errors import ArgumentError, MissingDependencyError
from .served import ServedArtifact, ServedTable, check_regular_file

__all__ = ["read_gguf"]

_READS_BETAS = frozenset({"grok", "mistral3"})
_READS_LOG_MULTIPLIER = frozenset({"mistral3", "deepseek2", "deepseek32"})
_READS_EXT_AND_ATTN = frozenset({"grok"})


def _gguf() -> Any:
    try:
        import gguf
    except ImportError as error:
        raise MissingDependencyError(
            f"reading GGUF files needs the gguf package: pip install 'ropekit[gguf]' ({error})"
        ) from error
    return gguf


def _pad(value: int, to: int = 256) -> int:
    return (value + to - 1) // to * to


def read_gguf(path: str, *, n_ctx: int | None = None) -> ServedArtifact:
    """The table llama.cpp serves from the GGUF at ``path`` with a context of ``n_ctx`` tokens
    (default: the file's ``context_length``, as llama.cpp uses when n_ctx is 0)."""
    check_regular_file(path, "served")
    gguf = _gguf()
    try:
        reader = gguf.GGUFReader(path)
        fields = {key: field.contents() for key, field in reader.fields.items()}
        tensors = {tensor.name: np.asarray(tensor.data, dtype=np.float64) for tensor in reader.tensors
                   if tensor.name in ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")}
    except Exception as error:  # a truncated or foreign file
        raise ArgumentError("served", f"{path}: not a readable GGUF: {type(error).__name__}: {error}") from None
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise ArgumentError("served", f"{path}: no general.architecture key; not a model GGUF")

    def key(name: str, default: Any = None) -> Any:
        value = fields.get(f"{arch}.{name}", default)
        return default if value is None else value

    def number(name: str, default: float, *, integer: bool = False, positive: bool = False) -> Any:
        value = key(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ArgumentError("served", f"{path}: {arch}.{name} is {value!r}, not a number; not a GGUF llama.cpp "
                                "would load")
        if not math.isfinite(float(value)) or (positive and float(value) <= 0) or float(value) < 0:
            raise ArgumentError("served", f"{path}: {arch}.{name} is {value!r}; llama.cpp needs a finite "
                                f"{'positive' if positive else 'non-negative'} number")
        return int(value) if integer else float(value)

    context = number("context_length", 0, integer=True) or None
    n_rot = number("rope.dimension_count", 0, integer=True)
    if not n_rot:  # llama.cpp's default: the head dim (head_count may be a per-layer array: read it only here)
        head_dim = number("attention.key_length", 0, integer=True)
        if not head_dim:
            heads = number("attention.head_count", 0, integer=True)
            embedding = number("embedding_length", 0, integer=True)
            head_dim = embedding // heads if embedding and heads else 0
        n_rot = head_dim
    if n_rot <= 0 or n_rot % 2 or n_rot > 1 << 16:
        raise ArgumentError("served", f"{path}: {arch}.rope.dimension_count is {n_rot!r}; cannot rebuild the table")
    base = number("rope.freq_base", 10000.0, positive=True)
    scaling = key("rope.scaling.type", "linear")
    if not isinstance(scaling, str):
        raise ArgumentError("served", f"{path}: {arch}.rope.scaling.type is {scaling!r}, not a string")
    factor = number("rope.scaling.factor", 0.0) or number("rope.scale_linear", 0.0)
    scale = 1.0 / factor if factor else 1.0
    if scaling == "none":
        scale = 1.0
    original = number("rope.scaling.original_context_length", 0, integer=True) or context or 0
    attn = number("rope.scaling.attn_factor", 1.0, positive=True)
    rules: list[str] = []
    flags: list[str] = []
    chosen_ctx = n_ctx if n_ctx is not None else context
    pairs = n_rot // 2

    freq_factors = np.ones(pairs)
    regime = None
    if "rope_freqs.weight" in tensors:
        freq_factors = _factors(tensors["rope_freqs.weight"], pairs, "rope_freqs", path)
    elif "rope_factors_long.weight" in tensors or "rope_factors_short.weight" in tensors:
        if not ("rope_factors_long.weight" in tensors and "rope_factors_short.weight" in tensors):
            flags.append("only one of rope_factors_long/short: llama.cpp would fail or serve one table at every length")
        allocated = _pad(chosen_ctx or 0)
        use_long = allocated > original
        regime = "long" if use_long else "short"
        name = "rope_factors_long.weight" if use_long else "rope_factors_short.weight"
        freq_factors = _factors(tensors.get(name, tensors.get("rope_factors_long.weight")), pairs, name, path)
        rules.append(f"llama.cpp's n_ctx rule: with n_ctx {chosen_ctx} (padded to {allocated}) it serves the "
                     f"{regime} factors at every position, whatever the sequence length (switch: > {original})")
        if original % 256:
            flags.append(f"original_context_length {original} is not a multiple of 256: llama.cpp pads n_ctx to 256, "
                         "so long factors start below the trained switch")
    elif scaling == "longrope":
        flags.append("scaling.type longrope without rope_factors_long/short tensors: served plain")

    inv_freq = plain_inv_freq(base, n_rot) / freq_factors
    magnitude = attn
    if scaling == "yarn" and original <= 0:
        raise ArgumentError("served", f"{path}: yarn scaling without original_context_length or context_length")
    if scaling == "yarn":
        beta_fast = float(key("rope.scaling.yarn_beta_fast", 32.0)) if arch in _READS_BETAS else 32.0
        beta_slow = float(key("rope.scaling.yarn_beta_slow", 1.0)) if arch in _READS_BETAS else 1.0
        for name, default in (("yarn_beta_fast", 32.0), ("yarn_beta_slow", 1.0)):
            stated = key(f"rope.scaling.{name}")
            if stated is not None and float(stated) != default and arch not in _READS_BETAS:
                flags.append(f"{arch}.rope.scaling.{name} = {stated} is ignored by llama.cpp's {arch} loader "
                             f"(it uses {default:g})")
        ext = float(key("rope.scaling.yarn_ext_factor", 1.0)) if arch in _READS_EXT_AND_ATTN else 1.0
        ramp = _yarn_ramp(n_rot, base, original, beta_fast, beta_slow)
        mix = ramp * ext
        inv_freq = inv_freq * (scale * (1 - mix) + mix)
        log_mul = float(key("rope.scaling.yarn_log_multiplier", 0.0)) if arch in _READS_LOG_MULTIPLIER else 0.0
        fac = 1.0 / scale
        if ext != 0:
            if log_mul:
                mscale = log_mul if arch == "deepseek2" and log_mul != 1 else 1.0
                magnitude *= _mscale(fac, mscale) / _mscale(fac, log_mul)
            else:
                magnitude *= _mscale(fac, 1.0)
        if key("rope.scaling.yarn_attn_factor") is not None:
            flags.append(f"{arch}.rope.scaling.yarn_attn_factor = {key('rope.scaling.yarn_attn_factor')} is "
                         "overwritten by llama.cpp's context setup (it serves the mscale rule instead)")
        rules.append(f"llama.cpp YaRN: betas {beta_fast:g}/{beta_slow:g}, original context {original}")
    else:
        inv_freq = inv_freq * scale
    llama3_shape = base >= 500000 and (context or 0) >= 131072
    if arch == "llama" and "rope_freqs.weight" not in tensors and scaling == "linear" and not factor and llama3_shape:
        flags.append("a Llama-3.1+ shape (freq_base >= 500000, context >= 131072) without rope_freqs: llama.cpp "
                     "serves plain RoPE; Llama-3.1+ declares llama3 scaling")
    table = ServedTable(f"{path} ({arch}: rebuilt from its keys by llama.cpp's rules)", "inv_freq", inv_freq,
                        "float32", magnitude=magnitude, regime=regime, angles="exact")
    engine = {"arch": arch, "n_ctx": chosen_ctx, "context_length": context, "original_context_length": original,
              "scaling_type": scaling, "freq_base": base, "dimension_count": n_rot,
              "tensors": sorted(tensors)}
    return ServedArtifact(path, "gguf", (table,), producer="llama.cpp (GGUF)", rules=tuple(rules),
                          flags=tuple(flags), engine=engine)


def _factors(values: Any, pairs: int, name: str, path: str) -> Any:
    factors = np.asarray(values, dtype=np.float64)
    if factors.shape != (pairs,) or not np.all(np.isfinite(factors)) or np.any(factors <= 0):
        raise ArgumentError("served", f"{path}: {name} has shape {factors.shape}; llama.cpp loads exactly ({pairs},) "
                            "finite positive values")
    return factors


def _mscale(scale: float, weight: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0


def _yarn_ramp(n_rot: int, base: float, original: int, beta_fast: float, beta_slow: float) -> Any:
    """ggml's ramp: 1 for pairs kept (extrapolated), 0 for pairs fully interpolated."""

    def corr_dim(rotations: float) -> float:
        return n_rot * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(0.0, math.floor(corr_dim(beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr_dim(beta_slow)))
    index = np.arange(n_rot // 2, dtype=np.float64)
    return 1.0 - np.clip((index - low) / max(0.001, high - low), 0.0, 1.0)
