"""The declaration of a model family ropekit does not know: what a third party's plugin returns
from its ``ropekit_family`` hook, registered in the ``ropekit.families`` entry-point group under the
family's ``model_type``.

A family declaration says what the family's code does that its config does not state: whether it
applies RoPE at all, how it pairs channels, the fraction of the head it rotates by default, which
layer types it does not rotate, and the class defaults a saved config leaves out. The rope block
itself is read as for any config and served by the rope_type plugins. A declaration is checked
where it is constructed (:class:`~ropekit.DeclarationError`), and by the conformance suite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs

from ..errors import DeclarationError
from .scheme import Example

__all__ = ["ModelFamily"]

Layout = Literal["neox", "gptj"]


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise DeclarationError(f"defaults must be a mapping of config keys to values, got {type(value).__name__}")
    return MappingProxyType(dict(value))


def _names(value: Any) -> frozenset[str]:
    return frozenset(value)


@attrs.frozen
class ModelFamily:
    """What a family's code does beyond its config, for a ``model_type`` ropekit does not know.

    ``model_type`` must equal the entry-point name it is registered under. ``doc`` is one line for
    ``ropekit list``. ``no_rope`` (non-empty: the reason) declares code that applies no RoPE at
    all: its configs are refused by name. ``layout`` is how the code pairs channels (``gptj``:
    interleaved); ``partial_rotary_factor`` the fraction of the head it rotates when the config
    states none; ``no_rope_layer_types`` the layer types it does not rotate; ``defaults`` the class
    defaults for config keys ropekit reads (``hidden_size``, ``rope_theta``, ...), used where a
    config leaves them out. ``examples`` are configs of the family with the table they must give.
    """

    model_type: str
    doc: str
    layout: Layout = "neox"
    partial_rotary_factor: float | None = None
    no_rope: str = ""
    no_rope_layer_types: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    defaults: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    examples: tuple[Example, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.model_type, str) or not self.model_type or not self.model_type.isprintable() \
                or any(char.isspace() for char in self.model_type):
            raise DeclarationError(f"model_type must be a non-empty name without spaces, got {self.model_type!r}")
        if not isinstance(self.doc, str) or not self.doc.strip():
            raise DeclarationError(f"family {self.model_type!r}: doc must be a non-empty line")
        if self.layout not in ("neox", "gptj"):
            raise DeclarationError(f"family {self.model_type!r}: layout must be 'neox' or 'gptj', got {self.layout!r}")
        factor = self.partial_rotary_factor
        if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                                   or not math.isfinite(factor) or not 0 < factor <= 1):
            raise DeclarationError(f"family {self.model_type!r}: partial_rotary_factor must be in (0, 1], "
                                   f"got {factor!r}")
        if not isinstance(self.no_rope, str):
            raise DeclarationError(f"family {self.model_type!r}: no_rope must be a reason (a string), got "
                                   f"{self.no_rope!r}")
        if not all(isinstance(name, str) and name for name in self.no_rope_layer_types):
            raise DeclarationError(f"family {self.model_type!r}: no_rope_layer_types must name layer types")
        for key, value in self.defaults.items():
            if not isinstance(key, str) or value is None or not _is_json(value):
                raise DeclarationError(f"family {self.model_type!r}: defaults[{key!r}] must be a JSON value, got "
                                       f"{value!r}")
        if not all(isinstance(example, Example) for example in self.examples):
            raise DeclarationError(f"family {self.model_type!r}: examples must be ropekit.Example values")


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
