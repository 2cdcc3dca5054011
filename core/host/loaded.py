"""A scheme as served: the plugin's declaration plus the distribution that ships it.

Every callable a plugin supplies (``build``, ``check``, ``switch_at``, ``landmarks``) runs here,
inside the same containment: an exception, or a result of the wrong type, shape or value, becomes
a :class:`~ropekit.PluginError` naming the distribution. Nothing a plugin does escapes raw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..contract.scheme import Frequencies, Geometry, Params, Scheme
from ..errors import InvalidTableError, SchemeCallError
from .discovery import PluginInfo

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["LoadedScheme"]

_MAX_PROBLEMS = 64  # a check that yields without end is a plugin bug, not a list of problems


class LoadedScheme:
    """``scheme`` as served by ``plugin`` (its entry point and distribution)."""

    __slots__ = ("plugin", "scheme")

    def __init__(self, scheme: Scheme, plugin: PluginInfo) -> None:
        self.scheme = scheme
        self.plugin = plugin

    def __repr__(self) -> str:
        return f"LoadedScheme({self.scheme.name!r}, {self.plugin.distribution} {self.plugin.version})"

    @property
    def name(self) -> str:
        """The scheme's canonical rope_type."""
        return self.scheme.name

    @property
    def distribution(self) -> str:
        """The distribution that serves the scheme."""
        return self.plugin.distribution

    def build(self, params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
        """Run the builder and check its output; the returned ``inv_freq`` is a read-only copy."""
        try:
            result = self.scheme.build(params, geometry, seq_len)
        except Exception as error:  # a plugin bug: contain it, name the distribution
            self._fail(InvalidTableError, f"builder raised {type(error).__name__}: {error}", error)
        return self._checked(result, geometry)

    def check(self, params: Params, geometry: Geometry) -> list[tuple[str, str]]:
        """The ``(key, problem)`` pairs the scheme's cross-key ``check`` reports (empty: valid)."""
        if self.scheme.check is None:
            return []
        try:
            problems = []
            for item in self.scheme.check(params, geometry):
                problems.append(item)
                if len(problems) >= _MAX_PROBLEMS:
                    break
        except Exception as error:
            self._fail(SchemeCallError, f"check() raised {type(error).__name__}: {error}", error)
        for item in problems:
            if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(part, str) for part in item)):
                self._fail(SchemeCallError, f"check() must yield (key, problem) string pairs, got {item!r}")
        return problems

    def switch_at(self, params: Params, geometry: Geometry) -> int | None:
        """The length up to which the load-time table holds (``None``: independent of seq_len)."""
        if self.scheme.switch_at is None:
            return None
        try:
            value: Any = self.scheme.switch_at(params, geometry)
        except Exception as error:
            self._fail(SchemeCallError, f"switch_at() raised {type(error).__name__}: {error}", error)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            self._fail(SchemeCallError, f"switch_at() must return a positive integer, got {value!r}")
        return int(value)

    def landmarks(self, params: Params, geometry: Geometry) -> dict[str, float]:
        """The wavelengths ``ropekit plot`` marks, by label (empty when the scheme names none)."""
        if self.scheme.landmarks is None:
            return {}
        try:
            value: Any = self.scheme.landmarks(params, geometry)
        except Exception as error:
            self._fail(SchemeCallError, f"landmarks() raised {type(error).__name__}: {error}", error)
        if not isinstance(value, Mapping) or not all(
            isinstance(label, str) and _is_real(length) for label, length in value.items()
        ):
            self._fail(SchemeCallError, f"landmarks() must return a mapping of str to number, got {value!r}")
        return {label: float(length) for label, length in value.items()}

    def _fail(self, kind: type[InvalidTableError | SchemeCallError], problem: str,
              cause: BaseException | None = None) -> NoReturn:
        raise kind(self.scheme.name, self.plugin.distribution, problem) from cause

    def _checked(self, result: Any, geometry: Geometry) -> Frequencies:
        if not isinstance(result, Frequencies):
            self._fail(InvalidTableError, f"builder returned {type(result).__name__}, expected ropekit.Frequencies")
        inv_freq = result.inv_freq
        if not isinstance(inv_freq, np.ndarray) or inv_freq.dtype != np.float64:
            kind = inv_freq.dtype if isinstance(inv_freq, np.ndarray) else type(inv_freq).__name__
            self._fail(InvalidTableError, f"inv_freq must be a float64 numpy array, got {kind}")
        expected = self.scheme.table_length(geometry)
        if inv_freq.shape != (expected,):
            self._fail(InvalidTableError, f"inv_freq has shape {inv_freq.shape}, expected ({expected},) for {geometry}")
        finite = np.isfinite(inv_freq)
        if np.count_nonzero(finite) != finite.size:  # all(): count_nonzero is a plain C loop, a reduction costs ~1 us
            bad = np.flatnonzero(~finite).tolist()
            self._fail(InvalidTableError, f"inv_freq has non-finite values at pairs {bad}")
        covers = self.scheme.covers_head
        bad_mask = inv_freq < 0.0 if covers else inv_freq <= 0.0  # a float bound: no int-scalar conversion per call
        if np.count_nonzero(bad_mask):  # any(), as above
            self._fail(InvalidTableError, f"inv_freq has {'negative' if covers else 'non-positive'} values at pairs "
                       f"{np.flatnonzero(bad_mask).tolist()}")
        factor = result.attention_factor
        if not _is_real(factor) or not math.isfinite(factor) or factor <= 0:
            self._fail(InvalidTableError, f"attention_factor must be a finite positive number, got {factor!r}")
        return Frequencies(frozen_copy(inv_freq), float(factor))


def frozen_copy(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """A float64 copy no caller can write to: a view of immutable bytes, so even
    ``setflags(write=True)`` is refused (a plain read-only array can be made writeable again)."""
    data = np.ascontiguousarray(values, dtype=np.float64).tobytes()
    frozen: npt.NDArray[np.float64] = np.frombuffer(data, dtype=np.float64)
    return frozen


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
