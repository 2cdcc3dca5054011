"""What a plugin declares: its config keys, the geometry it is given, and what its builder returns."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np

from ..errors import DeclarationError, RopeConfigError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "RESERVED_KEYS",
    "Example",
    "Frequencies",
    "Geometry",
    "Key",
    "KeyKind",
    "Params",
    "Scheme",
    "plain_inv_freq",
]

KeyKind = Literal["float", "int", "bool", "float_list", "int_list"]
"""The JSON types a key may take. ``float`` accepts integers too; a bool is never a number."""

Params = Mapping[str, Any]
"""Validated parameters of one rope block: every declared key, absent optional keys as ``None``."""

_KINDS = ("float", "int", "bool", "float_list", "int_list")


RESERVED_KEYS = frozenset(
    {"rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved", "interleaved"}
)
"""Block keys the loader reads for every rope_type (into :class:`Geometry` and the table); a
scheme may not declare them."""


def _declared(condition: bool, problem: str) -> None:
    if not condition:
        raise DeclarationError(problem)


@attrs.frozen
class Key:
    """One config key a scheme reads from its rope block.

    ``gt``/``ge``/``lt``/``le`` bound a number (for a list: every element). ``per_pair`` says a
    list must have one entry per rotary pair (``rotary_dim // 2``). ``config_fallback`` names a
    top-level config key read when the block lacks this one (Phi-3 keeps
    ``original_max_position_embeddings`` there); ``default_from_max_positions`` makes
    ``max_position_embeddings`` the last resort, as transformers does.

    A malformed declaration (an unknown kind, ``per_pair`` on a non-list, an empty range, a key
    both required and defaulted, an invalid default, a name the loader owns) raises
    :class:`~ropekit.errors.DeclarationError` right here, at the author's line.
    """

    name: str
    kind: KeyKind
    doc: str
    required: bool = False
    default: Any = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    per_pair: bool = False
    config_fallback: str | None = None
    default_from_max_positions: bool = False

    def __attrs_post_init__(self) -> None:
        label = f"key {self.name!r}"
        _declared(isinstance(self.name, str) and self.name.isidentifier(), f"{label}: a name must be an identifier")
        _declared(self.name not in RESERVED_KEYS, f"{label} is read by the loader for every rope_type")
        _declared(self.kind in _KINDS, f"{label}: kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        _declared(not self.per_pair or self.kind.endswith("_list"), f"{label}: per_pair needs a list kind")
        lower = [bound for bound in (self.gt, self.ge) if bound is not None]
        upper = [bound for bound in (self.lt, self.le) if bound is not None]
        for bound in (*lower, *upper):
            _declared(_is_number(bound) and math.isfinite(bound), f"{label}: bounds must be finite, got {bound!r}")
        if lower and upper:
            low, high = max(lower), min(upper)
            strict = (self.gt is not None and self.gt == low) or (self.lt is not None and self.lt == high)
            _declared(low < high or (low == high and not strict), f"{label}: empty range ({self.range_text()})")
        _declared(not (self.required and self.default is not None), f"{label} is required and also has a default")
        if self.default is not None:
            try:
                self.validate(self.default, self.name)
            except RopeConfigError as error:
                raise DeclarationError(f"{label}: default {self.default!r} is invalid: {error.problem}") from None

    def validate(self, value: object, path: str, pairs: int | None = None) -> Any:
        """``value`` checked against this key (kind, finiteness, range) and normalised (lists
        become tuples); :class:`~ropekit.RopeConfigError` at JSON ``path`` otherwise.

        ``pairs`` is the rotary pair count a ``per_pair`` list must match (``None``: not checked).
        """
        if self.kind == "float":
            return self._number(value, path)
        if self.kind == "int":
            return self._integer(value, path)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise RopeConfigError(path, f"expected true or false, got {value!r} ({_type_name(value)})")
            return value
        if not isinstance(value, (list, tuple)):
            raise RopeConfigError(path, f"expected a list, got {value!r} ({_type_name(value)})")
        if self.per_pair and pairs is not None and len(value) != pairs:
            raise RopeConfigError(
                path, f"must have one entry per rotary pair ({pairs} = rotary_dim / 2), got {len(value)}"
            )
        if self.kind == "float_list":
            numbers = self._plain_numbers(value)
            if numbers is not None:
                return numbers
        element = self._integer if self.kind == "int_list" else self._number
        return tuple(element(item, f"{path}[{index}]") for index, item in enumerate(value))

    def _plain_numbers(self, values: list[Any] | tuple[Any, ...]) -> tuple[float, ...] | None:
        """``values`` as :meth:`_number` returns each, when every one is a finite ``int`` or ``float`` in
        range; ``None`` otherwise, and each element is then checked on its own, naming its path."""
        if not _PLAIN_NUMBERS.issuperset(map(type, values)):
            return None
        try:
            numbers = tuple(map(float, values))
        except OverflowError:
            return None
        if not numbers:
            return numbers
        if not all(map(math.isfinite, numbers)):
            return None
        low, high = min(numbers), max(numbers)  # finite floats are ordered: the extremes bound every element
        gt, ge, lt, le = self.gt, self.ge, self.lt, self.le
        if (gt is None or low > gt) and (ge is None or low >= ge) and (lt is None or high < lt) and (
                le is None or high <= le):
            return numbers
        return None

    def _number(self, value: object, path: str) -> float:
        if not _is_number(value):
            raise RopeConfigError(path, f"expected a number, got {value!r} ({_type_name(value)})")
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise RopeConfigError(path, f"must be finite, got an integer of {len(str(value))} digits") from None
        if not math.isfinite(number):
            raise RopeConfigError(path, f"must be finite, got {value!r}")
        gt, ge, lt, le = self.gt, self.ge, self.lt, self.le
        if (gt is None or number > gt) and (ge is None or number >= ge) and (lt is None or number < lt) and (
                le is None or number <= le):  # in range: no table of bounds to build for the message
            return number
        for op, bound, ok in (
            (">", self.gt, self.gt is None or number > self.gt),
            (">=", self.ge, self.ge is None or number >= self.ge),
            ("<", self.lt, self.lt is None or number < self.lt),
            ("<=", self.le, self.le is None or number <= self.le),
        ):
            if not ok:
                raise RopeConfigError(path, f"must be {op} {bound}, got {value!r} (valid: {self.range_text()})")
        return number

    def _integer(self, value: object, path: str) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise RopeConfigError(path, f"expected an integer, got {value!r} ({_type_name(value)})")
        self._number(value, path)
        return value

    def range_text(self) -> str:
        """The valid range in words, e.g. ``'> 0'`` or ``'>= 1 and <= 4'`` (empty when unbounded)."""
        parts = [
            f"{op} {_number_text(bound)}"
            for op, bound in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
            if bound is not None
        ]
        return " and ".join(parts)

    def describe(self) -> str:
        """One line for people: kind, requiredness or default, range and doc."""
        if self.required:
            need = "required"
        elif self.default is not None:
            need = f"default {self.default!r}"
        else:
            need = "optional"
        bound = self.range_text()
        kind = self.kind + (" (one per rotary pair)" if self.per_pair else "")
        return f"{self.name}: {kind}, {need}{', ' + bound if bound else ''}. {self.doc}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (used by ``ropekit list --json``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "required": self.required,
            "default": self.default,
            "range": self.range_text(),
            "per_pair": self.per_pair,
            "doc": self.doc,
        }


_PLAIN_NUMBERS = frozenset((int, float))
"""The exact types of JSON numbers (``bool`` and subclasses excluded: they take the checked path)."""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    # A Python function, not the builtin ``tuple``: attrs inspects a converter's signature, and
    # inspecting a builtin tokenizes its text signature (5 ms of every cold start).
    return tuple(values)


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


@attrs.frozen
class Geometry:
    """The model geometry a builder works in, for one layer type.

    ``rotary_dim`` is ``int(head_dim * partial_rotary_factor)``, as transformers computes it.
    ``max_position_embeddings`` is ``None`` when the config does not declare it.
    """

    head_dim: int
    theta: float
    partial_rotary_factor: float = 1.0
    max_position_embeddings: int | None = None

    @property
    def rotary_dim(self) -> int:
        """The number of rotated channels of a head."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def pairs(self) -> int:
        """The number of rotated channel pairs (the usual table length)."""
        return self.rotary_dim // 2


@attrs.frozen
class Frequencies:
    """What a builder returns: float64 ``inv_freq`` (radians per position, one per pair) and the
    factor the forward multiplies cos and sin by."""

    inv_freq: npt.NDArray[np.float64]
    attention_factor: float = 1.0


Builder = Callable[[Params, Geometry, "int | None"], Frequencies]
"""``build(params, geometry, seq_len)``; ``seq_len`` is ``None`` for the table used at load time."""

Checker = Callable[[Params, Geometry], Iterable[tuple[str, str]]]
"""Cross-key validation: yields ``(key, problem)`` pairs; the loader turns them into errors."""

SwitchPoint = Callable[[Params, Geometry], int]
"""The sequence length above which a seq-len-dependent table changes."""

Landmarks = Callable[[Params, Geometry], Mapping[str, float]]
"""Wavelengths (in positions) worth marking on a plot, by label: a scheme's band edges."""


@attrs.frozen
class Example:
    """A config a plugin ships with the table it must produce, checked by the conformance suite.

    ``config`` is a whole ``config.json`` mapping; ``inv_freq`` and ``attention_factor`` are the
    expected values for ``layer_type`` at ``seq_len`` (compared at relative 2e-6).
    """

    name: str
    config: Mapping[str, Any]
    inv_freq: tuple[float, ...] = attrs.field(converter=_as_tuple)
    attention_factor: float = 1.0
    seq_len: int | None = None
    layer_type: str = "full_attention"


@attrs.frozen
class Scheme:
    """A rope_type's declaration: returned by a plugin's ``ropekit_scheme`` hook.

    ``name`` must equal the entry-point name the plugin is registered under (or one of
    ``aliases``, each registered as an entry point of its own). ``covers_head`` marks a scheme whose
    table has ``head_dim // 2`` entries, zero for pairs it does not rotate (Gemma-4's
    ``proportional``); otherwise the table has ``rotary_dim // 2`` entries, all positive.
    ``seq_len_dependent`` schemes get the sequence length and state the rule in ``seq_len_rule``;
    ``switch_at`` gives the length above which their table changes. ``landmarks`` names the
    wavelengths ``ropekit plot`` marks (band edges).
    """

    name: str
    doc: str
    build: Builder
    keys: tuple[Key, ...] = attrs.field(default=(), converter=_as_tuple)
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    seq_len_dependent: bool = False
    seq_len_rule: str = ""
    switch_at: SwitchPoint | None = None
    covers_head: bool = False
    check: Checker | None = None
    landmarks: Landmarks | None = None
    examples: tuple[Example, ...] = attrs.field(default=(), converter=_as_tuple)

    def __attrs_post_init__(self) -> None:
        label = f"scheme {self.name!r}"
        _declared(isinstance(self.name, str) and bool(self.name.strip()), f"{label}: name must be a non-empty string")
        _declared(callable(self.build), f"{label}: build must be callable")
        for field in ("check", "switch_at", "landmarks"):
            value = getattr(self, field)
            _declared(value is None or callable(value), f"{label}: {field} must be callable or None")
        for key in self.keys:
            _declared(isinstance(key, Key), f"{label}: keys must be ropekit.Key objects, got {type(key).__name__}")
        names = [key.name for key in self.keys]
        twice = sorted({name for name in names if names.count(name) > 1})
        _declared(not twice, f"{label}: keys declared twice: {twice}")
        if self.seq_len_dependent:
            _declared(self.switch_at is not None, f"{label}: a seq_len_dependent scheme must declare switch_at")
            _declared(bool(self.seq_len_rule.strip()), f"{label}: a seq_len_dependent scheme must state seq_len_rule")
        else:
            _declared(self.switch_at is None, f"{label}: switch_at is declared but seq_len_dependent is false")
        for example in self.examples:
            _declared(isinstance(example, Example), f"{label}: examples must be ropekit.Example objects")

    def key(self, name: str) -> Key | None:
        """The declared key called ``name``, if any."""
        for key in self.keys:
            if key.name == name:
                return key
        return None

    def table_length(self, geometry: Geometry) -> int:
        """How many ``inv_freq`` entries this scheme must return for ``geometry``."""
        return geometry.head_dim // 2 if self.covers_head else geometry.pairs


def plain_inv_freq(theta: float, rotary_dim: int, pairs: int | None = None) -> npt.NDArray[np.float64]:
    """Plain RoPE in float64: ``theta ** (-2i / rotary_dim)`` for ``i`` in ``range(pairs)``.

    ``pairs`` defaults to ``rotary_dim // 2``. Plugins build on this; it is exact to a float64 ulp.
    """
    count = rotary_dim // 2 if pairs is None else pairs
    exponents = np.arange(0, 2 * count, 2, dtype=np.float64) / rotary_dim
    result: npt.NDArray[np.float64] = np.power(float(theta), -exponents)
    return result
