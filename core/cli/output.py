"""What commands print and the exit codes they return. Output goes to the real standard output
saved in :data:`OUT` while a command runs (plugin code sees stderr as its stdout)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from ..errors import one_line

__all__ = ["EXIT_CHECKS_FAILED", "EXIT_INPUT", "EXIT_PLUGIN", "OUT", "encodable", "finite_json", "one_line",
           "print_error_json", "print_json", "report_error", "say"]

EXIT_CHECKS_FAILED = 1
EXIT_INPUT = 2
EXIT_PLUGIN = 3

OUT: list[Any] = []
"""The real standard output while a command runs: plugin code (imported or called) sees stderr as
its stdout, so nothing a plugin prints can corrupt the output tools parse."""


def say(*parts: Any) -> None:
    """Print ``parts`` on the real standard output; control characters (from a file or folder name) escaped, and
    text the stream cannot encode (a folder name that is not UTF-8, read from the disk as surrogate escapes)
    written with backslash escapes, never an error."""
    stream = OUT[-1] if OUT else sys.stdout
    text = " ".join(str(part) for part in parts)
    if not text.isprintable():  # every line on its own line: a control character from a file name is escaped
        text = "\n".join(one_line(line) for line in text.split("\n"))
    stream.write(encodable(text, stream) + "\n")


def encodable(text: str, stream: Any) -> str:
    """``text`` as ``stream`` can encode it: unencodable characters (lone surrogates from undecodable file
    names included) as backslash escapes."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    return text


def finite_json(document: Any) -> Any:
    """``document`` with every non-finite float replaced by ``null``, and beside it (an object's key ``K``)
    ``K_not_finite`` saying which value it was: what ``--json`` prints is always valid JSON."""
    if isinstance(document, float):
        return document if math.isfinite(document) else None
    if isinstance(document, dict):
        result: dict[Any, Any] = {}
        for key, value in document.items():
            result[key] = finite_json(value)
            if isinstance(value, float) and not math.isfinite(value):
                result[f"{key}_not_finite"] = f"{value!r}: not a finite number, written as null"
        return result
    if isinstance(document, (list, tuple)):
        return [finite_json(value) for value in document]
    return document


def print_json(document: Any) -> None:
    try:
        text = json.dumps(document, indent=2, allow_nan=False)  # fails whole before anything is written
    except ValueError:  # a non-finite number: null beside its reason
        text = json.dumps(finite_json(document), indent=2, allow_nan=False)
    stream = OUT[-1] if OUT else sys.stdout
    stream.write(text + "\n")



def report_error(message: str, key: str | None, status: int, *, as_json: bool, label: str = "error") -> int:
    """An error exit's output: its one line on stderr (``ropekit: error: MESSAGE``), and with ``--json``
    also :func:`print_error_json`. Returns ``status``."""
    print(encodable(f"ropekit: {label}: {one_line(message)}", sys.stderr), file=sys.stderr)
    if as_json:
        print_error_json(message, key, status)
    return status


def print_error_json(message: str, key: str | None, status: int) -> None:
    """``{"error": MESSAGE, "key": KEY, "exit": STATUS}`` on one line of the real standard output, what a
    ``--json`` run prints when it exits 2 or 3 (``key``: the JSON path, flag or file at fault, or ``None``)."""
    stream = OUT[-1] if OUT else sys.stdout
    stream.write(json.dumps({"error": message, "key": key, "exit": status}) + "\n")
    stream.flush()
