"""Reading a config source (a mapping, a ``config.json``, a model directory) without surprises.

Hostile input gets a :class:`~ropekit.ConfigSourceError` naming the problem, never a traceback or
a hang: anything that is not a regular file is refused before it is opened (a FIFO would block, a
device would read forever), files past :data:`MAX_CONFIG_BYTES` are refused, the bytes must be
UTF-8, duplicate keys are refused (JSON's "last one wins" would silently pick one), and nesting
deeper than :data:`MAX_DEPTH` is refused.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigSourceError, RopeConfigError

__all__ = ["MAX_CONFIG_BYTES", "MAX_DEPTH", "read_config"]

MAX_CONFIG_BYTES = 16 << 20
"""The largest config file read (real ones are a few KB; multimodal ones under 1 MB)."""
MAX_DEPTH = 32
"""The deepest nesting accepted (real configs nest 4 levels or so)."""


def read_config(source: Mapping[str, Any] | str | os.PathLike[str]) -> tuple[Mapping[str, Any], str]:
    """The config mapping and a description of where it came from.

    ``source`` is a mapping (used as is, never mutated), a path to a JSON file, or a model
    directory holding ``config.json``.
    """
    if type(source) is dict or isinstance(source, Mapping):  # a dict skips the ABC check
        _check_depth(source, "<mapping>")
        _check_names(source)
        return source, "<mapping>"
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigSourceError("", f"expected a mapping, a config.json path or a model directory, got "
                                f"{type(source).__name__}")
    path = os.fspath(source)
    if "\0" in path:
        raise ConfigSourceError("", f"{path!r}: a path cannot contain a NUL byte")
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    text = _read_text(path)
    try:
        config = json.loads(text, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKeyError as error:
        raise ConfigSourceError("", f"{path}: {error}") from None
    except RecursionError:
        raise ConfigSourceError("", f"{path}: nested deeper than any config (limit {MAX_DEPTH} levels)") from None
    except ValueError as error:  # NaN/Infinity load as floats; validation names the key holding them
        raise ConfigSourceError("", f"{path}: not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ConfigSourceError("", f"{path}: expected a JSON object, got {type(config).__name__}")
    _check_depth(config, path)
    _check_names(config)
    return config, path


def _check_names(config: Mapping[str, Any]) -> None:
    """``architectures`` is a list of class names, or absent: the code a config runs is identified by those
    names, so a list or number in their place is refused by its JSON path (``architectures[0]``) before
    anything hashes or compares it. Checked at the top and in ``text_config``, the nested config read in
    place; a language model under another key (``llm_config``, ``thinker_config``) is loaded through this
    same reader, its paths prefixed. (Not every ``*_config`` key: a walk over every key of every load
    cost 4% of a load, for values nothing reads.)"""
    _check_architectures("", config.get("architectures"))
    text = config.get("text_config")
    if type(text) is dict or isinstance(text, Mapping):
        _check_architectures("text_config.", text.get("architectures"))


def _check_architectures(prefix: str, names: Any) -> None:
    if names is None:
        return
    if not isinstance(names, list):
        raise RopeConfigError(f"{prefix}architectures", f"expected a list of class names (strings), got "
                              f"{type(names).__name__} {_short(names)}")
    for index, name in enumerate(names):
        if not isinstance(name, str):
            raise RopeConfigError(f"{prefix}architectures[{index}]", f"expected a class name (a string), got "
                                  f"{type(name).__name__} {_short(name)}")


def _read_text(path: str) -> str:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigSourceError("", f"{path}: no such file (give a config.json or a model directory)") from None
    except OSError as error:
        raise ConfigSourceError("", f"{path}: cannot read: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigSourceError("", f"{path}: not a regular file ({_kind(info.st_mode)}); give a config.json")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigSourceError("", f"{path}: {info.st_size} bytes; a config is at most {MAX_CONFIG_BYTES} bytes")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ConfigSourceError("", f"{path}: cannot read: {error.strerror or error}") from None
    if len(data) > MAX_CONFIG_BYTES:  # it grew since stat
        raise ConfigSourceError("", f"{path}: larger than {MAX_CONFIG_BYTES} bytes; a config is smaller")
    try:
        return data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")  # a BOM is dropped, as "utf-8-sig" would
    except UnicodeDecodeError as error:
        raise ConfigSourceError("", f"{path}: not UTF-8 (byte {error.start}: {data[error.start:error.start + 1]!r}); "
                                "config.json must be UTF-8 JSON") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


class _DuplicateKeyError(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(
                f"key {key!r} appears twice in one object ({_short(result[key])} and {_short(value)}); "
                "JSON readers disagree on which wins, so ropekit refuses: keep one"
            )
        result[key] = value
    return result


def _short(value: Any) -> str:
    text = json.dumps(value, allow_nan=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _check_depth(config: Mapping[str, Any], origin: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (a mapping that contains itself included)."""
    stack: list[tuple[Any, int]] = [(config, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigSourceError("", f"{origin}: nested deeper than any config (limit {MAX_DEPTH} levels)")
        for child in value.values() if type(value) is dict or isinstance(value, Mapping) else value:
            kind = type(child)  # the JSON scalars first: an ABC check per number costs a load its speed
            if kind in _SCALARS:
                continue
            if depth < MAX_DEPTH and (kind is dict or kind is list) and _SCALARS.issuperset(
                    map(type, child.values() if kind is dict else child)):
                continue  # a JSON leaf within the limit, checked in one C-level pass instead of pushed and popped
            if kind is dict or kind is list or isinstance(child, (Mapping, list, tuple)):
                stack.append((child, depth + 1))
