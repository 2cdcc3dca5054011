"""What cos/sin needs that depends only on a table: :class:`Plan` (checked frequencies, the
position bound, the offset and step tables) and the unit-circle evaluation both are built from.

It sits below :mod:`ropekit.tables.fill` (which computes rows from a plan) and
:mod:`ropekit.tables.rotary` (the cos/sin API that makes plans), so neither imports the other back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["BLOCK", "KEPT_BLOCKS", "KEPT_GROUPS", "MAX_ANGLE", "STEPS", "Plan", "checked_out", "max_position",
           "unit_circle"]

BLOCK = 256  # positions per block: the offset table's rows
STEPS = 64  # rows of the plan's step table: exp(i 256 k f) for k < 64, float64
MAX_ANGLE = float(1 << 32)
"""The largest angle (``position * inv_freq``, radians) served: below it a float32 cache is within
5e-7 (times the attention factor) of exact (measured 2.4e-7 at 2**32, 4.5e-7 at worst); past it float64 angle
reduction itself drifts (7.9e-7 at 2**34, 4.9e-5 at 2**40). With ``inv_freq[0] == 1`` (every
built-in), positions up to ``2**32 - 1``."""
KEPT_BLOCKS = 1024
"""How many block rows a plan keeps (:meth:`Plan.block_row`): 512 KiB of complex64 at 64 pairs."""
KEPT_GROUPS = 64
"""How many groups of 64 run base rows a plan keeps (:meth:`Plan.run_bases`): 2 MiB of complex64 at 64
pairs. A prefill chunk starts where the last one ended, or at 0 for every new request: the same rows again."""
_INT64_MAX = (1 << 63) - 1  # positions are int64 inside; a larger one would wrap


def max_position(inv_freq: npt.NDArray[np.float64]) -> int:
    """The largest position :func:`cos_sin` serves for ``inv_freq`` (see :data:`MAX_ANGLE`), at most
    ``2**63 - 1``."""
    peak = float(np.max(inv_freq)) if inv_freq.size else 0.0
    return min(int(MAX_ANGLE / peak) - 1, _INT64_MAX) if peak > 0 else _INT64_MAX


def unit_circle(angles: npt.NDArray[np.float64], scale: float, work: Any) -> npt.NDArray[Any]:
    """``scale * exp(i * angles)`` from float64 cos and sin, rounded once to ``work``."""
    values = np.empty(angles.shape, dtype=work)
    values.real = np.cos(angles) * scale
    values.imag = np.sin(angles) * scale
    return values


def checked_out(out: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> tuple[Any, Any]:
    """``out`` as its ``(cos, sin)`` buffers once both are writable, C-contiguous, separate numpy
    arrays of ``shape`` and ``dtype``; else an :class:`~ropekit.ArgumentError` naming the buffer."""
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
    bound, and the offset table ``exp(i * r * inv_freq)`` for ``r < 256`` (built on first use, per
    work dtype).

    Shared safely between threads: a table is computed at most a few times and never mutated.
    :meth:`RopeTable.cos_sin <ropekit.RopeTable.cos_sin>` keeps one per table.
    """

    __slots__ = ("_blocks", "_offsets", "_runs", "_steps", "factor", "freq", "kept", "limit")

    def __init__(self, inv_freq: npt.NDArray[np.float64], attention_factor: float) -> None:
        freq = np.ascontiguousarray(inv_freq, dtype=np.float64)
        if freq.ndim != 1 or not np.all(np.isfinite(freq)) or np.any(freq < 0):
            raise ArgumentError("inv_freq", "expected a 1-D array of finite non-negative frequencies")
        factor = float(attention_factor)
        if not np.isfinite(factor):
            raise ArgumentError("attention_factor", f"expected a finite number, got {attention_factor!r}")
        self.freq, self.factor, self.limit = freq, factor, max_position(freq)
        self._offsets: dict[Any, npt.NDArray[Any]] = {}
        self._steps: npt.NDArray[np.complex128] | None = None
        self._blocks: dict[tuple[Any, int], npt.NDArray[Any]] = {}
        self._runs: dict[tuple[Any, int, int], npt.NDArray[Any]] = {}
        self.kept: dict[tuple[Any, str], Any] | None = {}  # finished rows per dtype and layout (tables.kept)

    def offsets(self, work: Any) -> npt.NDArray[Any]:
        """``exp(i * r * inv_freq)`` for ``r < 256``, shape ``(256, pairs)``: evaluated in float64,
        then rounded to the complex ``work`` dtype."""
        found = self._offsets.get(work)
        if found is None:
            found = unit_circle(np.arange(BLOCK, dtype=np.float64)[:, None] * self.freq[None, :], 1.0, work)
            self._offsets[work] = found
        return found

    def steps(self) -> npt.NDArray[np.complex128]:
        """``exp(i * 256 * k * inv_freq)`` for ``k < 64``, complex128: block base rows are
        products of these, not fresh float64 transcendentals."""
        found = self._steps
        if found is None:
            found = unit_circle((BLOCK * np.arange(STEPS, dtype=np.float64))[:, None] * self.freq[None, :],
                                 1.0, np.complex128)
            self._steps = found
        return found

    def block_row(self, block: int, work: Any) -> npt.NDArray[Any]:
        """``factor * exp(i * 256 * block * inv_freq)`` rounded once to ``work``: the far row
        ``exp(i 16384 (block // 64) f)`` (float64 cos/sin) times the step row ``block % 64`` in
        complex128, as :func:`ropekit.tables.fill.fill_positions` forms it. The last
        :data:`KEPT_BLOCKS` rows asked for are kept, so consecutive decode steps reuse theirs."""
        key = (work, block)
        found = self._blocks.get(key)
        if found is None:
            group, near = divmod(block, STEPS)
            far = unit_circle((BLOCK * STEPS * float(group)) * self.freq, self.factor, np.complex128)
            found = (far * self.steps()[near]).astype(work)
            if len(self._blocks) >= KEPT_BLOCKS:
                self._blocks.clear()  # a bounded cache: a scattered workload rebuilds a few rows
            self._blocks[key] = found
        return found

    def run_bases(self, start: int, group: int, work: Any) -> npt.NDArray[Any]:
        """``factor * exp(i (start + 256 k) f)`` for the 64 blocks ``k`` of ``group`` (``k // 64 ==
        group``) of the run from ``start``, shape ``(64, pairs)``, rounded once to ``work``: the run's
        start row times the group's far row ``exp(i 16384 group f)`` (both float64 cos/sin) times the
        step rows, in complex128 (see :func:`ropekit.tables.fill.base_rows`). Each row is a function of
        ``(start, k)`` alone, so a slice of these rows is bit for bit what forming only that slice
        gives. The last :data:`KEPT_GROUPS` groups asked for are kept: repeated prefill chunks
        (every request's first chunk starts at 0) skip the float64 cos/sin and the products."""
        key = (work, start, group)
        found = self._runs.get(key)
        if found is None:
            row = unit_circle(start * self.freq, self.factor, np.complex128)
            if group:  # exp(0) is exactly 1: skipping it changes no bit
                row = row * unit_circle(BLOCK * STEPS * group * self.freq, 1.0, np.complex128)
            found = (row * self.steps()).astype(work)
            found.flags.writeable = False
            if len(self._runs) >= KEPT_GROUPS:
                self._runs.clear()  # a bounded cache: a long or scattered workload rebuilds a few groups
            self._runs[key] = found
        return found
