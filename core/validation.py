"""Strict validation of one rope block against a scheme's declared keys."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import RopeConfigError
from .scheme import Geometry, Key, Scheme

if TYPE_CHECKING:
    from .config import ConfigView

__all__ = ["LOADER_KEYS", "check_value", "validate_params"]

LOADER_KEYS = frozenset(
    {"rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved", "interleaved"}
)
"""Block keys the loader itself reads, valid under every rope_type; a scheme may not declare them."""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def check_number(key: Key, value: object, path: str) -> float:
    """``value`` as a finite float inside ``key``'s range, else :class:`RopeConfigError` at ``path``."""
    if not _is_number(value):
        raise RopeConfigError(path, f"expected a number, got {value!r} ({_type_name(value)})")
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise RopeConfigError(path, f"must be finite, got {value!r}")
    for op, bound, ok in (
        (">", key.gt, key.gt is None or number > key.gt),
        (">=", key.ge, key.ge is None or number >= key.ge),
        ("<", key.lt, key.lt is None or number < key.lt),
        ("<=", key.le, key.le is None or number <= key.le),
    ):
        if not ok:
            raise RopeConfigError(path, f"must be {op} {bound}, got {value!r} (valid: {key.range_text()})")
    return number


def check_integer(key: Key, value: object, path: str) -> int:
    """``value`` as an int inside ``key``'s range. An integral float (``8192.0``) is accepted."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RopeConfigError(path, f"expected an integer, got {value!r} ({_type_name(value)})")
    check_number(key, value, path)
    return value


def check_value(key: Key, value: object, path: str, pairs: int | None) -> Any:
    """Validate and normalise one value of ``key`` (lists become tuples).

    ``pairs`` is the rotary pair count a ``per_pair`` list must match (``None``: not checked).
    """
    if key.kind == "float":
        return check_number(key, value, path)
    if key.kind == "int":
        return check_integer(key, value, path)
    if key.kind == "bool":
        if not isinstance(value, bool):
            raise RopeConfigError(path, f"expected true or false, got {value!r} ({_type_name(value)})")
        return value
    if not isinstance(value, (list, tuple)):
        raise RopeConfigError(path, f"expected a list, got {value!r} ({_type_name(value)})")
    if key.per_pair and pairs is not None and len(value) != pairs:
        raise RopeConfigError(
            path, f"must have one entry per rotary pair ({pairs} = rotary_dim / 2), got {len(value)}"
        )
    element = check_integer if key.kind == "int_list" else check_number
    return tuple(element(key, item, f"{path}[{index}]") for index, item in enumerate(value))


def validate_params(
    scheme: Scheme,
    block: Mapping[str, Any],
    block_path: str,
    geometry: Geometry,
    view: ConfigView,
    *,
    strict: bool,
) -> dict[str, Any]:
    """The scheme's parameters from ``block``: every declared key, validated and defaulted.

    Unknown keys raise (``strict=False``: warn). A key absent from the block is read from
    the model config (``view``) under ``key.config_fallback`` where declared; a value in both places that differs is a
    conflict, never silently resolved.
    """
    known = {key.name for key in scheme.keys} | LOADER_KEYS
    for name in block:
        if name not in known:
            import difflib

            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            valid = ", ".join(sorted(key.name for key in scheme.keys)) or "none besides rope_theta"
            problem = f"unknown key for rope_type {scheme.name!r}; {hint}its keys are: {valid}"
            if strict:
                raise RopeConfigError(f"{block_path}.{name}", problem)
            warnings.warn(f"{block_path}.{name}: {problem} (ignored)", UserWarning, stacklevel=3)

    params: dict[str, Any] = {}
    for key in scheme.keys:
        value, path = _lookup(key, block, block_path, view, geometry)
        if value is None:
            if key.required:
                raise RopeConfigError(path, f"missing: required by rope_type {scheme.name!r} ({key.doc})")
            params[key.name] = key.default
        else:
            params[key.name] = check_value(key, value, path, geometry.pairs)

    if scheme.check is not None:
        for name, problem in scheme.check(params, geometry):
            raise RopeConfigError(f"{block_path}.{name}", problem)
    return params


def _lookup(
    key: Key,
    block: Mapping[str, Any],
    block_path: str,
    view: ConfigView,
    geometry: Geometry,
) -> tuple[Any, str]:
    path = f"{block_path}.{key.name}"
    value = block.get(key.name)
    fallback = key.config_fallback
    if fallback is not None and view.get(fallback) is not None:
        outer, outer_path = view[fallback], view.path(fallback)
        if value is None:
            return outer, outer_path
        if value != outer:
            raise RopeConfigError(
                path, f"conflicts with {outer_path} ({value!r} vs {outer!r}); remove one or make them equal"
            )
    if value is None and key.default_from_max_positions:
        return geometry.max_position_embeddings, path
    return value, path
