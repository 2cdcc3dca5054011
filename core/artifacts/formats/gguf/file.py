"""The tables llama.cpp serves from a GGUF, per layer, rebuilt from its keys and tensors. Needs ``ropekit[gguf]``.

A GGUF carries no cos/sin table: llama.cpp forms every angle at run time from
``{arch}.rope.freq_base``, ``.rope.dimension_count``, ``.rope.scaling.*``, the SWA keys
(``.rope.freq_base_swa``, ``.attention.sliding_window[_pattern]``) and the optional ``rope_freqs``
(llama3) or ``rope_factors_long``/``_short`` (Phi-3 longrope) tensors, with rules that differ per
architecture (:mod:`~ropekit.artifacts.llama_cpp`; an architecture without rules there is refused
by name: the artifact then holds no table). The rules below follow llama.cpp's source
(llama-cpp-python 0.3.36's vendored copy):

* ``rope.scaling.type`` absent means linear with ``factor`` absent: scale 1; ``none`` forces scale 1;
* served ``inv_freq[i] = base ** (-2i / n_rot) / freq_factors[i] * (scale * (1 - mix_i) + mix_i)``,
  ``mix`` being YaRN's ramp (only for ``yarn``; ggml always floors/ceils the correction range),
  with betas 32 and 1 unless the architecture reads the file's betas (grok: default 8/1, mistral3);
  SWA layers use their own base and scale (``get_rope_freq_base``), where the graph asks for them;
* the cos/sin magnitude is ``rope.scaling.attn_factor`` times, for YaRN, ``get_mscale(factor)`` or
  the ``yarn_log_multiplier`` ratio (deepseek2, mistral3), corrected per layer by ggml's
  ``1 + 0.1 ln(1 / freq_scale)``: the file's ``yarn_attn_factor`` is overwritten;
* longrope's long factors are used when the allocated context, padded to a multiple of 256, exceeds
  ``original_context_length``, for every position, whatever the sequence length;
* multimodal architectures (qwen2vl, qwen3vl, qwen3vlmoe) rotate the same frequencies, each pair by
  one of four position streams chosen by ``rope.dimension_sections`` (a required key: four
  integers, or one broadcast to four) and the architecture's composition
  (:func:`~ropekit.artifacts.llama_cpp.mrope_streams`); the table carries that map as ``axes``.

The artifact holds one table per base/scale set (``global``, and ``swa`` when SWA layers rotate
with their own); ``engine["layers"]`` says, per layer, whether it rotates and with which set.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from ....contract.scheme import plain_inv_freq
from ....errors import ArgumentError, MissingDependencyError
from ...served import ServedArtifact, ServedTable, check_regular_file
from .llama_cpp import (
    LLAMA_CPP_SOURCE,
    MROPE_SOURCE,
    Arch,
    LayerPlan,
    layer_plan,
    mrope_streams,
    rules_for,
    unknown_architecture,
)
from .parse import GgufFormatError, read_header

__all__ = ["ROPE_TENSORS", "gguf_module", "read_fields", "read_gguf", "served_by"]

ROPE_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
"""The rope tensors llama.cpp reads: the llama3 factors and Phi-3's long and short factors."""
_SCALING_TYPES = ("none", "linear", "yarn", "longrope")
_MAX_LAYERS = 512  # LLAMA_MAX_LAYERS


def gguf_module() -> Any:
    """The ``gguf`` package (:class:`~ropekit.errors.MissingDependencyError` naming the extra without it)."""
    try:
        import gguf
    except ImportError as error:
        raise MissingDependencyError(
            f"reading GGUF files needs the gguf package: pip install 'ropekit[gguf]' ({error})"
        ) from error
    return gguf


def _pad(value: int, to: int = 256) -> int:
    return (value + to - 1) // to * to


class _Keys:
    """One file's ``{arch}.*`` keys, read and checked the way llama.cpp's loader needs them."""

    def __init__(self, path: str, arch: str, fields: dict[str, Any]) -> None:
        self.path, self.arch, self.fields = path, arch, fields

    def get(self, name: str, default: Any = None) -> Any:
        value = self.fields.get(f"{self.arch}.{name}", default)
        return default if value is None else value

    def has(self, name: str) -> bool:
        return self.fields.get(f"{self.arch}.{name}") is not None

    def number(self, name: str, default: float, *, integer: bool = False, positive: bool = False) -> Any:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ArgumentError("served", f"{self.path}: {self.arch}.{name} is {value!r}, not a number; not a GGUF "
                                "llama.cpp would load")
        if not math.isfinite(float(value)) or (positive and float(value) <= 0) or float(value) < 0:
            raise ArgumentError("served", f"{self.path}: {self.arch}.{name} is {value!r}; llama.cpp needs a finite "
                                f"{'positive' if positive else 'non-negative'} number")
        return int(value) if integer else float(value)


def read_gguf(path: str, *, n_ctx: int | None = None) -> ServedArtifact:
    """The tables llama.cpp serves, per layer, from the GGUF at ``path`` with a context of ``n_ctx``
    tokens (default: the file's ``context_length``, as llama.cpp uses when n_ctx is 0).

    An architecture whose rules ropekit has not read from llama.cpp's source yields an artifact
    with no table and the refusal as its flag (``engine["refused"]``), never Llama's rules.
    """
    check_regular_file(path, "served")
    fields, tensors = read_fields(path)
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise ArgumentError("served", f"{path}: no general.architecture key; not a model GGUF")
    rules = rules_for(arch)
    if rules is None:
        refusal = unknown_architecture(arch)
        engine = {"arch": arch, "refused": refusal, "tensors": sorted(tensors)}
        return ServedArtifact(path, "gguf", (), producer="llama.cpp (GGUF)", flags=(refusal,), engine=engine)
    return _Reader(path, arch, _Keys(path, arch, fields), tensors, n_ctx).artifact(rules)


def read_fields(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A GGUF's audit keys (``general.architecture``, ``general.alignment``, ``{arch}.*``) and its rope
    tensors (float64), as llama.cpp's loader sees them, read by ropekit's bounded reader
    (:mod:`~ropekit.artifacts.formats.gguf.parse`: no count in the file is trusted, other keys and tensors
    are checked and skipped). A malformed file raises :class:`ArgumentError` naming the key, tensor or
    offset at fault."""
    sizes = {int(kind): sizes for kind, sizes in gguf_module().GGML_QUANT_SIZES.items()}
    try:
        header = read_header(path, ROPE_TENSORS, sizes)
    except GgufFormatError as error:
        raise ArgumentError("served", f"{path}: not a GGUF llama.cpp would load: {error}") from None
    except (OSError, ValueError) as error:  # mmap of an unreadable file
        raise ArgumentError("served", f"{path}: cannot read as a GGUF: {error}") from None
    return header.fields, header.tensors


def served_by(
    path: str, arch: str, fields: dict[str, Any], tensors: dict[str, Any], n_ctx: int | None
) -> ServedArtifact:
    """What llama.cpp serves from these keys and rope tensors (a file's, or a planned rewrite's, not
    yet written) for an architecture whose rules are known."""
    rules = rules_for(arch)
    if rules is None:
        raise ArgumentError("served", f"{path}: {unknown_architecture(arch)}")
    return _Reader(path, arch, _Keys(path, arch, fields), tensors, n_ctx).artifact(rules)


class _Reader:
    """Rebuilds one file's per-layer tables (one instance per :func:`read_gguf` call)."""

    def __init__(self, path: str, arch: str, keys: _Keys, tensors: dict[str, Any], n_ctx: int | None) -> None:
        self.path, self.arch, self.keys, self.tensors = path, arch, keys, tensors
        self.rules: list[str] = []
        self.flags: list[str] = []
        number = keys.number
        self.context = number("context_length", 0, integer=True) or None
        self.n_rot_full = self._n_rot()
        self.base = number("rope.freq_base", 10000.0, positive=True)
        scaling = keys.get("rope.scaling.type", "linear")
        if not isinstance(scaling, str) or scaling not in _SCALING_TYPES:
            raise ArgumentError("served", f"{path}: {arch}.rope.scaling.type is {scaling!r}; llama.cpp accepts "
                                f"{', '.join(_SCALING_TYPES)}")
        self.scaling = scaling
        self.factor = number("rope.scaling.factor", 0.0) or number("rope.scale_linear", 0.0)
        self.scale = 1.0 if scaling == "none" or not self.factor else 1.0 / self.factor
        self.original = number("rope.scaling.original_context_length", 0, integer=True) or self.context or 0
        self.attn = number("rope.scaling.attn_factor", 1.0, positive=True)
        self.n_ctx = n_ctx if n_ctx is not None else self.context
        self.betas: tuple[float, float] = (32.0, 1.0)

    def _n_rot(self) -> int:
        number = self.keys.number
        n_rot = number("rope.dimension_count", 0, integer=True)
        if not n_rot:  # llama.cpp's default: the head dim (head_count may be a per-layer array: read it only here)
            n_rot = self._head_dim()
        self._check_rot(n_rot, "rope.dimension_count")
        return int(n_rot)

    def _head_dim(self) -> int:
        number = self.keys.number
        head_dim = number("attention.key_length", 0, integer=True)
        if not head_dim:
            heads = number("attention.head_count", 0, integer=True)
            embedding = number("embedding_length", 0, integer=True)
            head_dim = embedding // heads if embedding and heads else 0
        return int(head_dim)

    def _check_rot(self, n_rot: int, key: str) -> None:
        if n_rot <= 0 or n_rot % 2 or n_rot > 1 << 16:
            raise ArgumentError("served", f"{self.path}: {self.arch}.{key} is {n_rot!r}; cannot rebuild the table "
                                "(llama.cpp needs an even positive rotary width)")

    def artifact(self, rules: Arch) -> ServedArtifact:
        """Every base/scale set's table and the per-layer plan, by ``rules``."""
        rules = self._resolve_mrope(rules)
        n_layer = self.keys.number("block_count", 0, integer=True)
        if not 0 < n_layer <= _MAX_LAYERS:
            raise ArgumentError("served", f"{self.path}: {self.arch}.block_count is {n_layer or 'missing'}; llama.cpp "
                                f"loads 1 to {_MAX_LAYERS} layers")
        n_rot_swa = self.keys.number("rope.dimension_count_swa", self.n_rot_full, integer=True)
        self._check_rot(n_rot_swa, "rope.dimension_count_swa")
        if rules.n_rot_per_layer and n_rot_swa != self.n_rot_full:
            raise ArgumentError("served", f"{self.path}: {self.arch}.rope.dimension_count_swa {n_rot_swa} differs from "
                                f"rope.dimension_count {self.n_rot_full}; llama.cpp's {self.arch} graph rotates "
                                "hparams.n_rot(il) per layer, which ropekit does not rebuild")
        if rules.head_rot and self._head_dim() and self.n_rot_full != self._head_dim():
            raise ArgumentError("served", f"{self.path}: {self.arch}.rope.dimension_count is {self.n_rot_full}; "
                                f"llama.cpp's {self.arch} refuses any but the head size {self._head_dim()} (its loader "
                                "or graph asserts n_rot == head size)")
        plan = layer_plan(rules, n_layer, self.keys.get)
        n_rot = n_rot_swa if plan.swa[0] else self.n_rot_full  # the graph's n_rot is hparams.n_rot(0)
        freq_factors, regime = self._freq_factors(rules, n_rot // 2)
        ext = self._ext_factor(rules)
        attn = self._yarn_attn_factor(rules, ext)
        self.betas = self._betas(rules) if ext != 0 else (32.0, 1.0)
        sets = {"global": (self.base, self.scale, ext, attn)}
        base_swa, scale_swa = self._swa_base_scale(rules)
        swa_rotates = any(s and r for s, r in zip(plan.swa, plan.rotates, strict=True))
        if rules.swa is not None and swa_rotates and rules.swa.plain:
            sets["swa"] = (self.base, 1.0, 0.0, 1.0)
        elif rules.swa is not None and swa_rotates and rules.swa.per_layer:
            sets["swa"] = (base_swa, scale_swa, ext, attn)
        axes, mrope = self._mrope(rules, n_rot) if rules.mrope is not None else (None, None)
        tables = tuple(self._table(name, *values, n_rot=n_rot, freq_factors=freq_factors, regime=regime, axes=axes)
                       for name, values in sets.items())
        self._notes(rules, plan)
        engine = {**self._engine(), "block_count": n_layer, "rules_source": f"{rules.source} ({LLAMA_CPP_SOURCE})",
                  "rope_mode": "neox" if rules.neox else "norm",
                  "caches": {name: {"freq_base": v[0], "freq_scale": v[1]} for name, v in sets.items()},
                  "layers": self._layers(plan, n_rot, "swa" in sets, rules)}
        if plan.swa_on:
            engine.update(freq_base_swa=base_swa, freq_scale_swa=scale_swa)
        if plan.notes:
            engine["layout"] = list(plan.notes)
        if mrope is not None:
            engine["mrope"] = mrope
        return ServedArtifact(self.path, "gguf", tables, producer="llama.cpp (GGUF)", rules=tuple(self.rules),
                              flags=tuple(self.flags), engine=engine)

    def _resolve_mrope(self, rules: Arch) -> Arch:
        """For an architecture whose rope type is MROPE only when ``use_mrope()`` (glm4, glm4moe): the rules
        this file gets. llama.cpp reads ``rope.dimension_sections`` as optional (``get_key_or_arr(..., 4,
        false)``) and turns ggml_rope_multi on when its first two sections are non-zero (``use_mrope``,
        src/llama-hparams.cpp)."""
        if not rules.mrope_optional:
            return rules
        value = self.keys.get("rope.dimension_sections")
        raw = value if isinstance(value, list) else [value] * 4 if value is not None else [0, 0, 0, 0]
        integers = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in raw)
        if integers and len(raw) == 4 and raw[0] > 0 and raw[1] > 0:
            self.rules.append(f"{self.arch}.rope.dimension_sections {list(raw)}: use_mrope() is on, llama.cpp rotates "
                              "with ggml_rope_multi (LLAMA_ROPE_TYPE_MROPE, NEOX pairs)")
            return attrs.evolve(rules, neox=True, mrope="sections", mrope_optional=False)
        if value is not None:
            self.rules.append(f"{self.arch}.rope.dimension_sections {value!r}: use_mrope() is off (it needs the first "
                              "two sections non-zero), llama.cpp rotates with ggml_rope_ext")
        return attrs.evolve(rules, mrope_optional=False)

    def _engine(self) -> dict[str, Any]:
        return {"arch": self.arch, "n_ctx": self.n_ctx, "context_length": self.context,
                "original_context_length": self.original, "scaling_type": self.scaling, "freq_base": self.base,
                "freq_base_written": self.keys.has("rope.freq_base"), "dimension_count": self.n_rot_full,
                "tensors": sorted(self.tensors)}

    def _layers(self, plan: LayerPlan, n_rot: int, own_swa: bool, rules: Arch) -> list[dict[str, Any]]:
        layers = []
        for index, (swa, rotates, why) in enumerate(zip(plan.swa, plan.rotates, plan.why, strict=True)):
            cache = None if not rotates else "swa" if swa and own_swa else "global"
            layers.append({"index": index, "swa": swa, "rotates": rotates, "cache": cache,
                           "rotary_dim": n_rot if rotates else None, "interleaved": not rules.neox,
                           **({"why": why} if why else {})})
        return layers

    def _mrope(self, rules: Arch, n_rot: int) -> tuple[tuple[int, ...], dict[str, Any]]:
        """The position stream of each pair, from ``rope.dimension_sections`` as the loader reads it
        (``get_key_or_arr(..., 4, true)``) and ``ggml_rope_multi`` applies it."""
        assert rules.mrope is not None
        key = f"{self.arch}.rope.dimension_sections"
        value = self.keys.get("rope.dimension_sections")
        if value is None:
            raise ArgumentError("served", f"{self.path}: no {key}; llama.cpp's {self.arch} loader requires it (key not "
                                "found in model)")
        raw = value if isinstance(value, list) else [value] * 4
        if len(raw) != 4 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0
                                    for v in raw):
            raise ArgumentError("served", f"{self.path}: {key} is {value!r}; llama.cpp loads four non-negative "
                                "integers (or one, copied to all four)")
        sections = tuple(int(v) for v in raw)
        total = sum(sections)
        if not any(sections[:3]) or total > n_rot:
            raise ArgumentError("served", f"{self.path}: {key} {list(sections)} (sum {total}) with {n_rot} rotary "
                                "channels: ggml_rope_multi aborts (it needs a non-zero first three sections summing to "
                                "at most the head size)")
        streams = mrope_streams(rules.mrope, sections, n_rot // 2)
        mode = "imrope" if rules.mrope == "interleaved" else "mrope"
        fourth = [pair for pair, stream in enumerate(streams) if stream == 3]
        kind = "interleaved" if rules.mrope == "interleaved" else "consecutive"
        self.rules.append(f"llama.cpp {mode} ({kind} sections {list(sections)}): each pair rotates by one of "
                          f"four position streams ({MROPE_SOURCE}); the fourth is 0 for text tokens")
        if total != n_rot // 2:
            self.flags.append(f"{key} {list(sections)} sums to {total}, not the {n_rot // 2} rotary pairs: ggml "
                              "repeats the section pattern every sum(sections) pairs")
        info = {"mode": mode, "composition": rules.mrope, "sections": list(sections), "streams": 4,
                "pair_streams": streams, "fourth_stream_pairs": fourth}
        return tuple(streams), info

    def _swa_base_scale(self, rules: Arch) -> tuple[float, float]:
        spec = rules.swa
        if spec is None:
            return self.base, self.scale
        base = self.base if spec.base == "global" else 10000.0
        base = self.keys.number("rope.freq_base_swa", base, positive=True)
        return base, self.scale if spec.scale == "global" else 1.0

    def _freq_factors(self, rules: Arch, pairs: int) -> tuple[Any, str | None]:
        tensors, factors, regime = self.tensors, np.ones(pairs), None
        if not rules.factors:
            if tensors:
                self.flags.append(f"{', '.join(sorted(tensors))} present but llama.cpp's {self.arch} graph passes no "
                                  "frequency factors: ignored")
            elif self.scaling == "longrope":
                self.flags.append("scaling.type longrope without rope_factors_long/short tensors: served plain")
            return factors, None
        if "rope_freqs.weight" in tensors:
            return _factors(tensors["rope_freqs.weight"], pairs, "rope_freqs", self.path), None
        if "rope_factors_long.weight" in tensors or "rope_factors_short.weight" in tensors:
            if not ("rope_factors_long.weight" in tensors and "rope_factors_short.weight" in tensors):
                self.flags.append("only one of rope_factors_long/short: llama.cpp would fail or serve one table at "
                                  "every length")
            allocated = _pad(self.n_ctx or 0)
            regime = "long" if allocated > self.original else "short"
            name = f"rope_factors_{regime}.weight"
            factors = _factors(tensors.get(name, tensors.get("rope_factors_long.weight")), pairs, name, self.path)
            self.rules.append(f"llama.cpp's n_ctx rule: with n_ctx {self.n_ctx} (padded to {allocated}) it serves the "
                              f"{regime} factors at every position, whatever the sequence length (switch: > "
                              f"{self.original})")
            if self.original % 256:
                self.flags.append(f"original_context_length {self.original} is not a multiple of 256: llama.cpp pads "
                                  "n_ctx to 256, so long factors start below the trained switch")
        elif self.scaling == "longrope":
            self.flags.append("scaling.type longrope without rope_factors_long/short tensors: served plain")
        return factors, regime

    def _ext_factor(self, rules: Arch) -> float:
        ext = self.keys.number("rope.scaling.yarn_ext_factor", 0.0) if rules.ext_attn and self.keys.has(
            "rope.scaling.yarn_ext_factor") else -1.0
        if ext < 0:
            ext = 1.0 if self.scaling == "yarn" else 0.0
        if ext != 0 and self.original <= 0:
            raise ArgumentError("served", f"{self.path}: yarn scaling without original_context_length or "
                                "context_length")
        return float(ext)

    def _yarn_attn_factor(self, rules: Arch, ext: float) -> float:
        """cparams.yarn_attn_factor (llama-context.cpp), times rope.scaling.attn_factor."""
        keys = self.keys
        attn = keys.number("rope.scaling.yarn_attn_factor", 1.0) if rules.ext_attn else 1.0
        if ext != 0:
            factor = 1.0 / self.scale
            log_mul = keys.number("rope.scaling.yarn_log_multiplier", 0.0) / rules.log_mul if rules.log_mul else 0.0
            if log_mul:
                mscale = log_mul if self.arch == "deepseek2" and log_mul != 1 else 1.0
                attn = _mscale(factor, mscale) / _mscale(factor, log_mul)
            else:
                attn = _mscale(factor, 1.0)
            attn /= 1.0 + 0.1 * math.log(factor)
            if keys.get("rope.scaling.yarn_attn_factor") is not None:
                self.flags.append(f"{self.arch}.rope.scaling.yarn_attn_factor = "
                                  f"{keys.get('rope.scaling.yarn_attn_factor')} is overwritten by llama.cpp's context "
                                  "setup (it serves the mscale rule instead)")
        return float(attn * self.attn)

    def _betas(self, rules: Arch) -> tuple[float, float]:
        defaults = rules.betas or (32.0, 1.0)
        if rules.betas is not None:
            return (self.keys.number("rope.scaling.yarn_beta_fast", defaults[0]),
                    self.keys.number("rope.scaling.yarn_beta_slow", defaults[1]))
        for name, default in zip(("yarn_beta_fast", "yarn_beta_slow"), defaults, strict=True):
            stated = self.keys.get(f"rope.scaling.{name}")
            if stated is not None and float(stated) != default:
                self.flags.append(f"{self.arch}.rope.scaling.{name} = {stated} is ignored by llama.cpp's {self.arch} "
                                  f"loader (it uses {default:g})")
        return defaults

    def _table(self, name: str, base: float, scale: float, ext: float, attn: float, *, n_rot: int, freq_factors: Any,
               regime: str | None, axes: tuple[int, ...] | None = None) -> ServedTable:
        """One base/scale set's table: ggml's rope_yarn with these arguments."""
        inv_freq = plain_inv_freq(base, n_rot) / freq_factors
        magnitude = attn
        if ext != 0:
            beta_fast, beta_slow = self.betas
            mix = _yarn_ramp(n_rot, base, self.original, beta_fast, beta_slow) * ext
            inv_freq = inv_freq * (scale * (1 - mix) + mix)
            magnitude = attn * (1.0 + 0.1 * math.log(1.0 / scale))
            rule = f"llama.cpp YaRN: betas {beta_fast:g}/{beta_slow:g}, original context {self.original}"
            if rule not in self.rules:
                self.rules.append(rule)
        else:
            inv_freq = inv_freq * scale
        where = (f"{self.path} ({self.arch}: the {name} layers' table, freq_base {base:g}, freq_scale {scale:g}, "
                 "rebuilt from its keys by llama.cpp's rules)")
        names = ("temporal", "height", "width", "llama.cpp's fourth position stream (0 for text tokens)")
        return ServedTable(where, "inv_freq", inv_freq, "float32", magnitude=magnitude, regime=regime, angles="exact",
                           axes=axes, axis_names=names if axes is not None else ())

    def _notes(self, rules: Arch, plan: LayerPlan) -> None:
        tensors = self.tensors
        if not self.keys.has("rope.freq_base"):
            unwritten = " (its converter never writes it)" if any("rope.freq_base" in n for n in rules.not_written) \
                else ""
            self.rules.append(f"rope.freq_base absent: llama.cpp serves base 10000{unwritten}")
        llama3_shape = self.base >= 500000 and (self.context or 0) >= 131072
        if (self.arch == "llama" and "rope_freqs.weight" not in tensors and self.scaling == "linear"
                and not self.factor and llama3_shape):
            self.flags.append("a Llama-3.1+ shape (freq_base >= 500000, context >= 131072) without rope_freqs: "
                              "llama.cpp serves plain RoPE; Llama-3.1+ declares llama3 scaling")


def _factors(values: Any, pairs: int, name: str, path: str) -> Any:
    factors = np.asarray(values, dtype=np.float64)
    if factors.shape != (pairs,) or not np.all(np.isfinite(factors)) or np.any(factors <= 0):
        raise ArgumentError("served", f"{path}: {name} has shape {factors.shape}; llama.cpp loads exactly ({pairs},) "
                            "finite positive values")
    return factors


def _mscale(scale: float, weight: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0


def _yarn_ramp(n_rot: int, base: float, original: int, beta_fast: float, beta_slow: float) -> Any:
    """ggml's ramp: 1 for pairs kept (extrapolated), 0 for pairs fully interpolated. ggml always
    truncates the correction range (floor/ceil), whatever the config's ``truncate``."""

    def corr_dim(rotations: float) -> float:
        return n_rot * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(0.0, math.floor(corr_dim(beta_fast)))
    high = min(n_rot - 1.0, math.ceil(corr_dim(beta_slow)))
    index = np.arange(n_rot // 2, dtype=np.float64)
    return 1.0 - np.clip((index - low) / max(0.001, high - low), 0.0, 1.0)
