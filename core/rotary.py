"""cos/sin for a forward, with angles formed in float64, and a numpy reference rotation.

Angles are never formed in float32. For a contiguous run of positions ``p = start + B*q + r``
the angle-addition identities combine two small tables evaluated in float64, ``cos/sin(B*q*f)``
and ``cos/sin(r*f)``, so each output element costs two multiplies and an add instead of a
transcendental (float32 angles lose about 1e-2 rad by position 131072). For float32/float16 output
the combination runs in float32: within ``5e-7 * attention_factor`` of exact at every accepted
position (measured 1.4e-7 below 2**20, 2.9e-7 near 2**32). float64 output carries the float64
angle's own rounding, about ``position * inv_freq * 1.1e-16`` rad: 5.5e-11 at 2**20, 2.4e-7 near 2**32.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .errors import ArgumentError, ArgumentTypeError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["LAYOUTS", "MAX_ANGLE", "CacheLayout", "Layout", "Plan", "apply_rotary", "cos_sin", "max_position"]

Layout = Literal["neox", "gptj"]
"""How a model pairs channels. ``neox``: rotate-half, ``cos = [c_0..c_{P-1}, c_0..c_{P-1}]``
(transformers' Llama and most models). ``gptj``: interleaved pairs, ``cos = [c_0, c_0, c_1, c_1, ...]``
(GPT-J, GLM, Llama-4)."""
CacheLayout = Literal["neox", "gptj", "half"]
"""A cos/sin cache's columns: a pairing's full width, or ``half``: ``[c_0..c_{P-1}]``, one column
per pair (vLLM, onnxruntime-genai); :func:`apply_rotary` then needs the pairing."""
LAYOUTS: tuple[str, ...] = ("neox", "gptj", "half")

_BLOCK = 256  # positions per inner block (the r table); 256 x pairs float64 stays in cache
_CHUNK_BLOCKS = 8  # blocks combined per numpy call: temporaries of 8 * 256 * pairs float64
_DIRECT = 4  # runs this short skip the tables: a few transcendentals beat building a base row


MAX_ANGLE = float(1 << 32)
"""The largest angle (``position * inv_freq``, radians) served: below it a float32 cache is within
5e-7 (times the attention factor) of exact (measured 2.1e-7 at 2**32); past it float64 angle
reduction itself drifts (7.9e-7 at 2**34, 4.9e-5 at 2**40). With ``inv_freq[0] == 1`` (every
built-in), positions up to ``2**32 - 1``."""

_DTYPES = ("float16", "float32", "float64", "bfloat16")


def max_position(inv_freq: npt.NDArray[np.float64]) -> int:
    """The largest position :func:`cos_sin` serves for ``inv_freq`` (see :data:`MAX_ANGLE`)."""
    peak = float(np.max(inv_freq)) if inv_freq.size else 0.0
    return int(MAX_ANGLE / peak) - 1 if peak > 0 else (1 << 62)


def _as_positions(positions: Any, limit: int) -> tuple[int, int] | npt.NDArray[np.int64]:
    """``(start, count)`` for a contiguous run, else an int64 array; every position in ``[0, limit]``."""
    if isinstance(positions, (bool, np.bool_)):
        raise ArgumentTypeError("positions", f"expected a count, a range or integer positions, got {positions!r}")
    if isinstance(positions, (int, np.integer)):
        count = int(positions)
        if count < 0 or count - 1 > limit:
            raise ArgumentError("positions", f"expected a count in [0, {limit + 1}] (positions up to {limit} are "
                                f"served within 5e-7), got {count}")
        return 0, count
    if isinstance(positions, range) and positions.step == 1:
        if len(positions) and (positions.start < 0 or positions.stop - 1 > limit):
            raise ArgumentError("positions", f"positions must lie in [0, {limit}], got {positions!r}")
        return max(positions.start, 0), len(positions)
    try:
        array = np.asarray(positions)
    except (TypeError, ValueError, OverflowError) as error:
        raise ArgumentTypeError("positions", f"expected integer positions: {error}") from None
    if array.ndim != 1 or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise ArgumentTypeError("positions", f"expected a 1-D sequence of integers, got dtype {array.dtype} "
                                f"shape {array.shape}")
    if array.size and (array.min() < 0 or array.max() > limit):  # compared before any cast: uint64 cannot wrap
        raise ArgumentError("positions", f"positions must lie in [0, {limit}], got {array.min()}..{array.max()}")
    return array.astype(np.int64, copy=False)


_CHECKED_DTYPES: dict[Any, np.dtype[Any]] = {}


def _out_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    try:
        return _CHECKED_DTYPES[dtype]
    except (KeyError, TypeError):
        pass
    chosen = _check_dtype(dtype)
    with contextlib.suppress(TypeError):  # an unhashable dtype spec is checked every time
        _CHECKED_DTYPES[dtype] = chosen
    return chosen


def _check_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ArgumentError("dtype", "bfloat16 needs the ml_dtypes package (pip install ml_dtypes); "
                                "valid without it: float16, float32, float64") from None
        bfloat16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
        return bfloat16
    try:
        chosen = np.dtype(dtype)
    except TypeError:
        raise ArgumentTypeError("dtype", f"unsupported dtype {dtype!r}; valid: {', '.join(_DTYPES)}") from None
    if chosen.name not in _DTYPES:
        raise ArgumentError("dtype", f"unsupported dtype {chosen}; valid: {', '.join(_DTYPES)} "
                            "(bfloat16 with ml_dtypes)")
    return chosen


def _checked_out(out: Any, shape: tuple[int, int], dtype: np.dtype[Any]) -> tuple[Any, Any]:
    if not isinstance(out, tuple) or len(out) != 2:
        raise ArgumentTypeError("out", f"expected a (cos, sin) pair of numpy arrays, got {type(out).__name__}")
    for name, array in zip(("out[0]", "out[1]"), out, strict=True):
        if not isinstance(array, np.ndarray):
            raise ArgumentTypeError(name, f"expected a numpy array, got {type(array).__name__}")
        if array.shape != shape or array.dtype != dtype:
            raise ArgumentError(name, f"expected {dtype} of shape {shape}, got {array.dtype} {array.shape}")
        if not array.flags.writeable:
            raise ArgumentError(name, "is read-only")
        if not array.flags.c_contiguous:
            raise ArgumentError(name, "must be C-contiguous (rows of a cache buffer)")
    if np.shares_memory(out[0], out[1]):
        raise ArgumentError("out", "cos and sin buffers overlap; give two separate arrays")
    return out[0], out[1]


class Plan:
    """What cos/sin needs that depends only on a table: its checked frequencies, the position
    bound, and the 256-position offset tables (built on first use, per work dtype).

    Shared safely between threads: the tables are computed at most a few times and never mutated.
    :meth:`RopeTable.cos_sin <ropekit.RopeTable.cos_sin>` keeps one per table.
    """

    __slots__ = ("_local", "_offsets", "factor", "freq", "limit")

    def __init__(self, inv_freq: npt.NDArray[np.float64], attention_factor: float) -> None:
        freq = np.ascontiguousarray(inv_freq, dtype=np.float64)
        if freq.ndim != 1 or not np.all(np.isfinite(freq)) or np.any(freq < 0):
            raise ArgumentError("inv_freq", "expected a 1-D array of finite non-negative frequencies")
        factor = float(attention_factor)
        if not np.isfinite(factor):
            raise ArgumentError("attention_factor", f"expected a finite number, got {attention_factor!r}")
        self.freq, self.factor, self.limit = freq, factor, max_position(freq)
        self._offsets: dict[Any, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}
        self._local = threading.local()

    def scratch(self, work: Any) -> tuple[npt.NDArray[Any], ...]:
        """Three ``(8, 256, pairs)`` work arrays, kept per thread: a call never faults in fresh
        temporaries (glibc maps each large allocation anew)."""
        key = f"scratch_{np.dtype(work).name}"
        found: tuple[npt.NDArray[Any], ...] | None = getattr(self._local, key, None)
        if found is None:
            shape = (_CHUNK_BLOCKS, _BLOCK, self.freq.shape[0])
            found = tuple(np.empty(shape, dtype=work) for _ in range(3))
            setattr(self._local, key, found)
        return found

    def offsets(self, work: Any) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """``(cos, sin)`` of ``r * inv_freq`` for ``r < 256``, in float64 then rounded to ``work``."""
        found = self._offsets.get(work)
        if found is None:
            angles = np.arange(_BLOCK, dtype=np.float64)[:, None] * self.freq[None, :]
            found = (np.cos(angles).astype(work), np.sin(angles).astype(work))
            self._offsets[work] = found
        return found


def cos_sin(
    inv_freq: npt.NDArray[np.float64] | Plan,
    attention_factor: float,
    positions: Any,
    *,
    dtype: npt.DTypeLike = np.float32,
    layout: str = "neox",
    out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = None,
    threads: int = 1,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """``(cos, sin)`` of shape ``(len(positions), width)``, scaled by ``attention_factor``.

    ``positions`` is a count ``N`` (positions ``0..N-1``), a ``range``, or integer positions, each
    in ``[0, max_position(inv_freq)]`` (``2**32 - 1`` for every built-in): there a float32 cache is
    within 5e-7 of exact; anything else (negative, past the bound, non-integer, a bool) raises
    :class:`~ropekit.ArgumentError`. ``dtype``: float16, float32, float64, or bfloat16 when
    ``ml_dtypes`` is installed. ``layout``: ``neox`` or ``gptj`` (width ``2 * pairs``), or ``half``
    (width ``pairs``, one column per pair, as vLLM and onnxruntime-genai store it). ``out`` takes
    two preallocated, writable, C-contiguous, non-overlapping arrays of that shape and dtype to fill.
    ``threads`` splits a long contiguous run into that many slices computed in parallel (numpy
    releases the GIL); the result is bit-identical to one thread. ``inv_freq`` may be a
    :class:`Plan` (``attention_factor`` is then ignored): repeated calls reuse its tables.
    """
    if layout not in LAYOUTS:
        raise ArgumentError("layout", f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ArgumentError("threads", f"expected a positive number of threads, got {threads!r}")
    plan = inv_freq if isinstance(inv_freq, Plan) else Plan(inv_freq, attention_factor)
    out_dtype = _out_dtype(dtype)
    pairs = plan.freq.shape[0]
    width = pairs if layout == "half" else 2 * pairs
    where = _as_positions(positions, plan.limit)
    count = where[1] if isinstance(where, tuple) else where.shape[0]
    if out is None:
        # one allocation for both: glibc reuses a freed block of this size on the next call, where two
        # separate ones are mapped and faulted in afresh every time (measured: 1.3 ms of 1.8 at 4096 x 128)
        both = np.empty((2, count, width), dtype=out_dtype)
        cos, sin = both[0], both[1]
    else:
        cos, sin = _checked_out(out, (count, width), out_dtype)
    if count == 0 or pairs == 0:
        return cos, sin
    if not isinstance(where, tuple):
        _fill_positions(plan, where, cos, sin, layout)
    elif count <= _DIRECT:
        _fill_direct(plan, where[0], count, cos, sin, layout)
    elif threads == 1 or count < 4 * _BLOCK * _CHUNK_BLOCKS:
        _fill_contiguous(plan, where[0], count, cos, sin, layout)
    else:
        _fill_threaded(plan, where[0], count, cos, sin, layout, threads)
    return cos, sin


def _fill_direct(plan: Plan, start: int, count: int, cos: Any, sin: Any, layout: str) -> None:
    """A short run (a decode step): angles in float64 directly, no tables."""
    angles = np.arange(start, start + count, dtype=np.float64)[:, None] * plan.freq[None, :]
    _store(np.cos(angles) * plan.factor, cos, layout)
    _store(np.sin(angles) * plan.factor, sin, layout)


def _fill_positions(plan: Plan, where: npt.NDArray[np.int64], cos: Any, sin: Any, layout: str) -> None:
    count = where.shape[0]
    for begin in range(0, count, _BLOCK * _CHUNK_BLOCKS):
        rows = where[begin : begin + _BLOCK * _CHUNK_BLOCKS]
        angles = rows.astype(np.float64)[:, None] * plan.freq[None, :]
        stop = begin + rows.shape[0]
        _store(np.cos(angles) * plan.factor, cos[begin:stop], layout)
        _store(np.sin(angles) * plan.factor, sin[begin:stop], layout)


def _fill_threaded(plan: Plan, start: int, count: int, cos: Any, sin: Any, layout: str, threads: int) -> None:
    """Slices on block boundaries, so every slice computes exactly what one thread would."""
    from concurrent.futures import ThreadPoolExecutor

    blocks = count // _BLOCK
    per = -(-blocks // threads) * _BLOCK
    edges = [min(begin, count) for begin in range(0, count, per)] + [count]
    edges = sorted(set(edges))
    plan.offsets(np.float64 if cos.dtype == np.float64 else np.float32)  # built once, before the threads
    with ThreadPoolExecutor(max_workers=threads) as pool:
        jobs = [pool.submit(_fill_contiguous, plan, start + low, high - low, cos[low:high], sin[low:high], layout)
                for low, high in itertools.pairwise(edges)]
        for job in jobs:
            job.result()


def _store(values: npt.NDArray[Any], out: npt.NDArray[Any], layout: str) -> None:
    """Write ``values`` (..., pairs) into ``out`` in ``layout``, casting once.

    neox views a row as (2, pairs) and broadcasts the values into both halves in one pass; gptj
    writes the even and the odd columns (a (pairs, 2) broadcast is slower in numpy); half is the
    values themselves.
    """
    pairs = values.shape[-1]
    if layout == "neox":
        out.reshape(*out.shape[:-1], 2, pairs)[...] = values[..., None, :]
    elif layout == "gptj":
        out[..., 0::2] = values
        out[..., 1::2] = values
    else:
        out[...] = values


def _fill_contiguous(plan: Plan, start: int, count: int, cos: Any, sin: Any, layout: str) -> None:
    freq, factor = plan.freq, plan.factor
    width = cos.shape[1]
    work = np.float64 if cos.dtype == np.float64 else np.float32
    cos_r, sin_r = plan.offsets(work)  # (B, P)
    blocks = count // _BLOCK
    if blocks:
        _fill_blocks(plan, start, blocks, cos, sin, layout, work, width)
    tail = count - blocks * _BLOCK
    if tail:  # a partial block: the same angle addition over the first `tail` offsets
        base = (start + blocks * _BLOCK) * freq
        cq, sq = (np.cos(base) * factor).astype(work), (np.sin(base) * factor).astype(work)
        cr, sr = cos_r[:tail], sin_r[:tail]
        _store((cq * cr - sq * sr).astype(work, copy=False), cos[blocks * _BLOCK :], layout)
        _store((sq * cr + cq * sr).astype(work, copy=False), sin[blocks * _BLOCK :], layout)


def _fill_blocks(plan: Plan, start: int, blocks: int, cos: Any, sin: Any, layout: str, work: Any, width: int) -> None:
    """Whole 256-position blocks: ``cos(base + r)`` from a float64 base row and the offset tables."""
    freq, factor = plan.freq, plan.factor
    cos_r, sin_r = plan.offsets(work)
    bases = (start + _BLOCK * np.arange(blocks, dtype=np.float64))[:, None] * freq[None, :]
    # (Q, P), evaluated in float64, attention factor folded in, then rounded once to the work dtype
    cos_q = (np.cos(bases) * factor).astype(work)
    sin_q = (np.sin(bases) * factor).astype(work)
    cos_blocks = cos[: blocks * _BLOCK].reshape(blocks, _BLOCK, width)
    sin_blocks = sin[: blocks * _BLOCK].reshape(blocks, _BLOCK, width)
    first, second, result = plan.scratch(work)
    direct = layout == "half" and cos.dtype == work
    for q in range(0, blocks, _CHUNK_BLOCKS):
        n = min(_CHUNK_BLOCKS, blocks - q)
        cq, sq = cos_q[q : q + n, None, :], sin_q[q : q + n, None, :]
        a, b = first[:n], second[:n]
        for target, combine, left, right in ((cos_blocks, np.subtract, cq, sq), (sin_blocks, np.add, sq, cq)):
            # cos(x + y) = cos x cos y - sin x sin y;  sin(x + y) = sin x cos y + cos x sin y
            np.multiply(left, cos_r, out=a)
            np.multiply(right, sin_r, out=b)
            if direct:  # write the result straight into the output rows
                combine(a, b, out=target[q : q + n])
            else:
                combine(a, b, out=result[:n])
                _store(result[:n], target[q : q + n], layout)


def _rotate(x: npt.NDArray[Any], cos: npt.NDArray[Any], sin: npt.NDArray[Any], layout: str) -> npt.NDArray[Any]:
    dim = cos.shape[-1]
    rot, rest = x[..., :dim], x[..., dim:]
    if layout == "neox":
        half = dim // 2
        turned = np.concatenate((-rot[..., half:], rot[..., :half]), axis=-1)
    else:
        turned = np.stack((-rot[..., 1::2], rot[..., 0::2]), axis=-1).reshape(rot.shape)
    rotated = rot * cos + turned * sin
    return np.concatenate((rotated, rest), axis=-1) if rest.shape[-1] else rotated


def apply_rotary(
    q: npt.NDArray[Any],
    k: npt.NDArray[Any],
    cos: npt.NDArray[Any],
    sin: npt.NDArray[Any],
    layout: str = "neox",
    *,
    pairing: Layout | None = None,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Rotate ``q`` and ``k`` (``(..., seq, head_dim)``) by ``cos``/``sin`` (``(seq, width)``).

    ``neox`` matches transformers' ``apply_rotary_pos_emb`` (rotate-half); ``gptj`` rotates
    interleaved pairs; ``half`` caches (one column per pair) need ``pairing`` (``neox`` or
    ``gptj``), how the model pairs q and k channels. Channels past the rotary dim pass through
    unchanged (partial rotary). Shapes are checked: cos and sin equal and 2-D, q and k at least 2-D
    with ``seq`` rows and at least the rotary dim of channels.
    """
    if layout not in LAYOUTS:
        raise ArgumentError("layout", f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
    for name, array in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        if not isinstance(array, np.ndarray):
            raise ArgumentTypeError(name, f"expected a numpy array, got {type(array).__name__}")
    if cos.shape != sin.shape or cos.ndim != 2 or (layout != "half" and cos.shape[1] % 2):
        raise ArgumentError("cos", f"cos {cos.shape} and sin {sin.shape} must be equal (seq, width) shapes, "
                            "width even unless the layout is half")
    if layout == "half":
        if pairing not in ("neox", "gptj"):
            raise ArgumentError("pairing", f"a half cache needs the model's pairing, neox or gptj; got {pairing!r}")
        cos, sin, layout = _widen(cos, pairing), _widen(sin, pairing), pairing
    for name, x in (("q", q), ("k", k)):
        if x.ndim < 2 or x.shape[-2] != cos.shape[0] or x.shape[-1] < cos.shape[1]:
            raise ArgumentError(name, f"shape {x.shape} does not fit cos/sin {cos.shape}: expected (..., "
                                f"{cos.shape[0]}, head_dim >= {cos.shape[1]})")
    return _rotate(q, cos, sin, layout), _rotate(k, cos, sin, layout)


def _widen(half: npt.NDArray[Any], pairing: str) -> npt.NDArray[Any]:
    """A half cache (one column per pair) at the full width of ``pairing``."""
    if pairing == "neox":
        return np.concatenate((half, half), axis=-1)
    return np.repeat(half, 2, axis=-1)
