"""The decode-step path of :func:`ropekit.tables.rotary.cos_sin`: up to :data:`SMALL` positions.

A serving engine asks for cos/sin on every decode step, for one position per sequence (a batch,
speculative tokens, scattered positions), and the general path's fixed costs (position
validation through numpy, block decomposition, per-thread scratch) are most of such a call. Here
every position ``p = 256 q + r`` is the complex product of two rows, each evaluated in float64 and
rounded once to complex64 (complex128 for float64 output): the offset row ``exp(i r f)`` of the
plan's offset table, and the block row ``factor * exp(i 256 q f)``, the same row
:func:`ropekit.tables.fill.fill_positions` forms, kept by the plan (:meth:`Plan.block_row
<ropekit.tables.plan.Plan.block_row>`) so that the next step, in the same block, reuses it. A
value depends only on its position, not on the other positions of the call.

Anything this path does not take (more positions, several rows, a non-integer dtype, a bad
argument) goes to the general path, which serves or refuses it as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .plan import BLOCK, Plan, checked_out

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["SMALL", "small_cos_sin", "split"]

SMALL = 64
"""The most positions a call takes this path with."""

_SHIFT = BLOCK.bit_length() - 1  # p >> 8 is the block, p & 255 the offset
_MASK = BLOCK - 1
_SPAN = 4  # contiguous positions spanning at most this many blocks are sliced, not gathered
_INTEGER_KINDS = frozenset("iu")
_LAYOUTS = frozenset(("neox", "gptj", "half"))
_LISTED = 32  # up to this many array positions, their bounds are found on a Python list (measured 0.3 us at 1
# position and 1.0 us at 16, against 2.2 us for numpy's min and max; at 64 numpy's are faster)


def _positions(positions: Any, limit: int) -> tuple[npt.NDArray[np.int64] | None, int, int, int] | None:
    """``(array, count, low, high)`` for positions this path takes (``array`` is ``None`` for a
    contiguous run ``low .. high``), or ``None``: then the general path serves or refuses them."""
    kind = type(positions)
    if kind is int:
        if 0 < positions <= SMALL and positions - 1 <= limit:
            return None, positions, 0, positions - 1
        return None
    if kind is range:
        try:
            count = len(positions)
        except OverflowError:  # longer than sys.maxsize: the general path refuses it
            return None
        if not 0 < count <= SMALL:
            return None
        low, high = min(positions[0], positions[-1]), max(positions[0], positions[-1])
        if low < 0 or high > limit:
            return None
        if positions.step == 1:
            return None, count, low, high
        return np.arange(positions.start, positions.stop, positions.step, dtype=np.int64), count, low, high
    if kind is list or kind is tuple:
        if not 0 < len(positions) <= SMALL:
            return None
        try:
            array = np.array(positions)
        except (TypeError, ValueError, OverflowError):
            return None
        if array.ndim != 1 or array.dtype.kind not in _INTEGER_KINDS:
            return None
        low, high = int(min(positions)), int(max(positions))  # Python's on a short list beat numpy's
    elif kind is np.ndarray:
        array = positions
        if array.ndim != 1 or not 0 < array.shape[0] <= SMALL or array.dtype.kind not in _INTEGER_KINDS:
            return None
        if array.shape[0] <= _LISTED:  # a numpy reduction's fixed cost (~1 us each) beats the list's below this
            listed = array.tolist()
            low, high = min(listed), max(listed)
        else:
            low, high = int(array.min()), int(array.max())
    else:
        return None
    if low < 0 or high > limit:  # compared as Python ints: a uint64 cannot wrap
        return None
    if array.dtype != np.int64:
        array = array.astype(np.int64)
    return array, array.shape[0], low, high


def small_cos_sin(
    plan: Plan, positions: Any, dtype: np.dtype[Any], layout: str, out: tuple[Any, Any] | None,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]] | None:
    """cos/sin of up to :data:`SMALL` positions in ``layout`` and ``dtype`` (already checked),
    into ``out`` when given (checked here), or ``None`` when the general path must take the call."""
    if layout not in _LAYOUTS:
        return None
    found = _positions(positions, plan.limit)
    if found is None:
        return None
    where, count, low, high = found
    pairs = plan.freq.shape[0]
    width = pairs if layout == "half" else 2 * pairs
    if out is None:
        both = np.empty((2, count, width), dtype=dtype)
        cos, sin = both[0], both[1]
    else:
        cos, sin = checked_out(out, (count, width), dtype)
    if pairs == 0:
        return cos, sin
    work = np.complex128 if dtype == np.float64 else np.complex64
    offsets = plan.offsets(work)
    first, last = low >> _SHIFT, high >> _SHIFT
    if where is None and last - first < _SPAN:  # a run: slices of the offset table, one block row each
        products = np.empty((count, pairs), dtype=work)
        done = 0
        for block in range(first, last + 1):
            begin = max(low, block << _SHIFT)
            end = min(high, (block << _SHIFT) | _MASK) + 1
            np.multiply(plan.block_row(block, work), offsets[begin & _MASK : ((end - 1) & _MASK) + 1],
                        out=products[done : done + end - begin])
            done += end - begin
    else:
        if where is None:
            where = np.arange(low, high + 1, dtype=np.int64)
        products = np.take(offsets, where, axis=0, mode="wrap")  # row p mod 256
        # base * offset, in this order: numpy's complex multiply fuses its products (FMA), so the
        # operands' order decides the last bit, and the general path multiplies in this one
        if first == last:
            np.multiply(plan.block_row(first, work), products, out=products)
        else:
            row = plan.block_row
            np.multiply(np.stack([row(block, work) for block in (where >> _SHIFT).tolist()]), products, out=products)
    split(products, cos, sin, layout)
    return cos, sin


def split(products: npt.NDArray[Any], cos: npt.NDArray[Any], sin: npt.NDArray[Any], layout: str) -> None:
    """The products' real parts into ``cos`` and imaginary parts into ``sin``, in ``layout``."""
    count, pairs = products.shape
    if layout == "neox":
        cos.reshape(count, 2, pairs)[...] = products.real[:, None, :]
        sin.reshape(count, 2, pairs)[...] = products.imag[:, None, :]
    elif layout == "gptj":
        cos.reshape(count, pairs, 2)[...] = products.real[:, :, None]
        sin.reshape(count, pairs, 2)[...] = products.imag[:, :, None]
    else:
        cos[...] = products.real
        sin[...] = products.imag
