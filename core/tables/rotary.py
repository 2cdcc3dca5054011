"""cos/sin for a forward, with angles formed in float64, and a numpy reference rotation.

Angles are never formed in float32 (float32 angles lose about 1e-2 rad by position 131072).
Each row is a complex product of tables evaluated in float64 (see :mod:`ropekit.tables.fill`): for
float32/float16 output the product runs in complex64, within ``5e-7 * attention_factor`` of
exact at every accepted position (measured 1.4e-7 below 2**20, 2.4e-7 near 2**32, 4.5e-7 in a
constructed worst case there, where both float64 roundings line up); float64
output uses complex128 and carries the float64 angle's own rounding, about
``position * inv_freq * 1.1e-16`` rad (5.5e-11 at 2**20, 2.4e-7 near 2**32).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from .fill import fill_positions, fill_run
from .kept import serve_kept
from .plan import Plan, checked_out
from .small import small_cos_sin

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["LAYOUTS", "CacheLayout", "Layout", "apply_rotary", "cos_sin", "out_dtype"]

Layout = Literal["neox", "gptj"]
"""How a model pairs channels. ``neox``: rotate-half, ``cos = [c_0..c_{P-1}, c_0..c_{P-1}]``
(transformers' Llama and most models). ``gptj``: interleaved pairs, ``cos = [c_0, c_0, c_1, c_1, ...]``
(GPT-J, GLM, Llama-4)."""
CacheLayout = Literal["neox", "gptj", "half"]
"""A cos/sin cache's columns: a pairing's full width, or ``half``: ``[c_0..c_{P-1}]``, one column
per pair (vLLM, onnxruntime-genai); :func:`apply_rotary` then needs the pairing."""
LAYOUTS: tuple[str, ...] = ("neox", "gptj", "half")

_DTYPES = ("float16", "float32", "float64", "bfloat16")
_F32_TYPE, _F32 = np.float32, np.dtype(np.float32)


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
    if isinstance(positions, range):
        if positions and (min(positions[0], positions[-1]) < 0 or max(positions[0], positions[-1]) > limit):
            raise ArgumentError("positions", f"positions must lie in [0, {limit}], got {positions!r}")
        if positions.step == 1:  # len() is safe now: the run lies inside [0, limit]
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


def out_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    """``dtype`` as the numpy dtype of a cos/sin cache, once checked (float16, float32, float64, or
    bfloat16 with ``ml_dtypes``); else an :class:`~ropekit.ArgumentError` saying what is valid."""
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
    if not chosen.isnative:
        raise ArgumentError("dtype", f"{chosen.str} is not in this machine's byte order; valid: {chosen.name} "
                            f"({chosen.newbyteorder('=').str}), then byteswap the result if a file needs it")
    return chosen


def cos_sin(
    inv_freq: npt.NDArray[np.float64] | Plan,
    attention_factor: float,
    positions: Any,
    *,
    dtype: npt.DTypeLike = np.float32,
    layout: str = "neox",
    out: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = None,
    threads: int | None = None,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """``(cos, sin)`` of shape ``(len(positions), width)``, scaled by ``attention_factor``.

    ``positions`` is a count ``N`` (positions ``0..N-1``), a ``range``, or integer positions, each
    in ``[0, max_position(inv_freq)]`` (``2**32 - 1`` for every built-in): there a float32 cache is
    within 5e-7 of exact; anything else (negative, past the bound, non-integer, a bool) raises
    :class:`~ropekit.ArgumentError`. ``dtype``: float16, float32, float64, or bfloat16 when
    ``ml_dtypes`` is installed. ``layout``: ``neox`` or ``gptj`` (width ``2 * pairs``), or ``half``
    (width ``pairs``, one column per pair, as vLLM and onnxruntime-genai store it). ``out`` takes
    two preallocated, writable, C-contiguous, non-overlapping arrays of that shape and dtype to fill.

    ``threads``: at most how many threads share a contiguous run (numpy releases the GIL); none
    is given fewer than 2048 positions, where waking it would cost more than it saves. The
    default, ``None``, allows as many as the cores this process may run on (as torch's own CPU
    ops do); ``1`` keeps the call on the calling thread. The result is bit-identical whatever
    the number. ``inv_freq`` may be a :class:`Plan` (``attention_factor``
    is then ignored): repeated calls reuse its tables.
    """
    plan = inv_freq if type(inv_freq) is Plan else None
    kept = plan is not None and plan.kept is not None  # a plan made for this call would not be asked again
    if plan is not None and (threads is None or (type(threads) is int and threads > 0)):
        # the decode-step path: at most 64 positions, no per-call work that does not depend on them
        small = small_cos_sin(plan, positions, _F32 if dtype is _F32_TYPE else out_dtype(dtype), layout, out)
        if small is not None:
            return small
    if layout not in LAYOUTS:
        raise ArgumentError("layout", f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ArgumentError("threads", f"expected a positive number of threads or None (automatic), got {threads!r}")
    if plan is None:
        plan = inv_freq if isinstance(inv_freq, Plan) else Plan(inv_freq, attention_factor)
        small = small_cos_sin(plan, positions, out_dtype(dtype), layout, out)
        if small is not None:
            return small
    chosen_dtype = out_dtype(dtype)
    pairs = plan.freq.shape[0]
    width = pairs if layout == "half" else 2 * pairs
    where = _as_positions(positions, plan.limit)
    count = where[1] if isinstance(where, tuple) else where.shape[0]
    if out is None:
        # one allocation for both: glibc reuses a freed block of this size on the next call, where two
        # separate ones are mapped and faulted in afresh every time (measured: 1.3 ms of 1.8 at 4096 x 128)
        both = np.empty((2, count, width), dtype=chosen_dtype)
        cos, sin = both[0], both[1]
    else:
        cos, sin = checked_out(out, (count, width), chosen_dtype)
    if count == 0 or pairs == 0:
        return cos, sin
    if kept and serve_kept(plan, where, count, chosen_dtype, layout, cos, sin, threads):
        return cos, sin
    if isinstance(where, tuple):
        fill_run(plan, where[0], count, cos, sin, layout, threads)
    else:
        fill_positions(plan, where, cos, sin, layout)
    return cos, sin


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
    layout: str | None = None,
    *,
    pairing: Layout | None = None,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Rotate ``q`` and ``k`` (``(..., seq, head_dim)``) by ``cos``/``sin`` (``(seq, width)``).

    The layout is the cache's own when ``cos``/``sin`` come from :meth:`RopeTable.cos_sin
    <ropekit.RopeTable.cos_sin>` (:class:`~ropekit.CosSinArray` knows it): then ``layout`` may be
    left out, and one that contradicts the cache raises :class:`~ropekit.ArgumentError`, as do a
    sin passed as cos and two arrays of different layouts. For plain arrays the layout is the
    caller's responsibility: ``layout`` (default ``neox``) says how the columns are arranged.
    :meth:`RopeTable.apply <ropekit.RopeTable.apply>` does all of it from positions.

    ``neox`` matches transformers' ``apply_rotary_pos_emb`` (rotate-half); ``gptj`` rotates
    interleaved pairs; ``half`` caches (one column per pair) need ``pairing`` (``neox`` or
    ``gptj``), how the model pairs q and k channels. Channels past the rotary dim pass through
    unchanged (partial rotary). Shapes are checked: cos and sin equal and 2-D, q and k at least 2-D
    with ``seq`` rows and at least the rotary dim of channels.
    """
    layout = _cache_layout(cos, sin, layout)
    if layout not in LAYOUTS:
        raise ArgumentError("layout", f"unknown layout {layout!r}; valid: {', '.join(LAYOUTS)}")
    for name, array in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        if not isinstance(array, np.ndarray):
            raise ArgumentTypeError(name, f"expected a numpy array, got {type(array).__name__}")
    cos, sin = np.asarray(cos), np.asarray(sin)
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


def _cache_layout(cos: Any, sin: Any, layout: str | None) -> str:
    """The layout to apply ``cos``/``sin`` in: what the arrays say they are (checked against each
    other and against an explicit ``layout``), else ``layout``, else ``neox``."""
    stated: dict[str, str] = {}
    for name, array, part in (("cos", cos, "cos"), ("sin", sin, "sin")):
        found = getattr(array, "part", None)
        if found is not None and found != part:
            raise ArgumentError(name, f"this array is the {found} of a cos/sin cache, passed as {part}; "
                                "call apply_rotary(q, k, cos, sin) in that order")
        own = getattr(array, "layout", None)
        if own is not None:
            stated[name] = own
        elif layout is None and getattr(array, "derived", False):
            raise ArgumentError(name, "this array was made from a cos/sin cache (by arithmetic, astype, a copy or "
                                "changed columns) and no longer says its layout; state layout= (neox, gptj or half), "
                                "or apply the cache cos_sin returned (or a row slice of it)")
    if len(set(stated.values())) > 1:
        raise ArgumentError("sin", f"cos is a {stated['cos']} cache and sin a {stated['sin']} one; "
                            "take both from one cos_sin call")
    own_layout = next(iter(stated.values()), None)
    if own_layout is None:
        return "neox" if layout is None else layout
    if layout is not None and layout != own_layout:
        raise ArgumentError("layout", f"layout={layout!r} contradicts the cache, which cos_sin built in the "
                            f"{own_layout} layout; leave layout out (the cache's is used) or build the cache "
                            f"with layout={layout!r}")
    return own_layout


def _widen(half: npt.NDArray[Any], pairing: str) -> npt.NDArray[Any]:
    """A half cache (one column per pair) at the full width of ``pairing``."""
    if pairing == "neox":
        return np.concatenate((half, half), axis=-1)
    return np.repeat(half, 2, axis=-1)
