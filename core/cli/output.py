"""What commands print and the exit codes they return. Output goes to the real standard output
saved in :data:`OUT` while a command runs (plugin code sees stderr as its stdout)."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["EXIT_CHECKS_FAILED", "EXIT_INPUT", "EXIT_PLUGIN", "OUT", "print_error_json", "print_json", "report_error",
           "say"]

EXIT_CHECKS_FAILED = 1
EXIT_INPUT = 2
EXIT_PLUGIN = 3

OUT: list[Any] = []
"""The real standard output while a command runs: plugin code (imported or called) sees stderr as
its stdout, so nothing a plugin prints can corrupt the output tools parse."""


def say(*parts: Any) -> None:
    print(*parts, file=OUT[-1] if OUT else sys.stdout)


def print_json(document: Any) -> None:
    text = json.dumps(document, indent=2, allow_nan=False)  # fails whole before anything is written
    stream = OUT[-1] if OUT else sys.stdout
    stream.write(text + "\n")



def report_error(message: str, key: str | None, status: int, *, as_json: bool, label: str = "error") -> int:
    """An error exit's output: its one line on stderr (``ropekit: error: MESSAGE``), and with ``--json``
    also :func:`print_error_json`. Returns ``status``."""
    print(f"ropekit: {label}: {message}", file=sys.stderr)
    if as_json:
        print_error_json(message, key, status)
    return status


def print_error_json(message: str, key: str | None, status: int) -> None:
    """``{"error": MESSAGE, "key": KEY, "exit": STATUS}`` on one line of the real standard output, what a
    ``--json`` run prints when it exits 2 or 3 (``key``: the JSON path, flag or file at fault, or ``None``)."""
    stream = OUT[-1] if OUT else sys.stdout
    stream.write(json.dumps({"error": message, "key": key, "exit": status}) + "\n")
    stream.flush()
