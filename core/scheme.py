"""What a plugin declares: its config keys, the geometry it is given, and what its builder returns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
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


@attrs.frozen
class Key:
    """One config key a scheme reads from its rope block.

    ``gt``/``ge``/``lt``/``le`` bound a number (for a list: every element). ``per_pair`` says a
    list must have one entry per rotary pair (``rotary_dim // 2``). ``config_fallback`` names a
    top-level config key read when the block lacks this one (Phi-3 keeps
    ``original_max_position_embeddings`` there); ``default_from_max_positions`` makes
    ``max_position_embeddings`` the last resort, as transformers does.
    """

    name: str
    kind: KeyKind = attrs.field(validator=attrs.validators.in_(_KINDS))
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
