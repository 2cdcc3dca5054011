"""Strict validation of one rope block against its scheme's declared keys.

The block (:class:`~ropekit.config.parse.RopeBlock`) knows where each value lives; each
:class:`~ropekit.Key` knows how to check a value. This module only decides which keys a block may
hold, and fills in what it does not state.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..contract.scheme import RESERVED_KEYS, Scheme
from ..errors import RopeConfigError
from .parse import RopeBlock

__all__ = ["validate_params"]


def validate_params(scheme: Scheme, block: RopeBlock, *, strict: bool) -> dict[str, Any]:
    """The scheme's parameters from ``block``: every declared key, validated and defaulted.

    Unknown keys raise (``strict=False``: warn). A key absent from the block is read where its
    declaration says (:meth:`RopeBlock.lookup`); a required key found nowhere raises.
    """
    known = RESERVED_KEYS  # enough for a block of reserved keys only, as most are: nothing there is unknown
    if not RESERVED_KEYS.issuperset(block.values):
        known = RESERVED_KEYS.union(key.name for key in scheme.keys)
    for name in block.values:
        if name not in known:
            close = _close_matches(name, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            valid = ", ".join(sorted(key.name for key in scheme.keys)) or "none besides rope_theta"
            problem = f"unknown key for rope_type {scheme.name!r}; {hint}its keys are: {valid}"
            if strict:
                raise RopeConfigError(block.key_path(name), problem)
            warnings.warn(f"{block.key_path(name)}: {problem} (ignored)", UserWarning, stacklevel=3)

    params: dict[str, Any] = {}
    for key in scheme.keys:
        value, path = block.lookup(key)
        if value is None:
            if key.required:
                raise RopeConfigError(path, f"missing: required by rope_type {scheme.name!r} ({key.doc})")
            params[key.name] = key.default
        else:
            params[key.name] = key.validate(value, path, block.geometry.pairs)
    return params


def _close_matches(word: str, candidates: Any, n: int = 3, cutoff: float = 0.6) -> list[str]:
    import difflib  # only on the error path: it costs a millisecond of every cold start

    return difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)
