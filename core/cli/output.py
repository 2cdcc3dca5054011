"""What commands print and the exit codes they return. Output goes to the real standard output
saved in :data:`OUT` while a command runs (plugin code sees stderr as its stdout)."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["EXIT_CHECKS_FAILED", "EXIT_INPUT", "EXIT_PLUGIN", "OUT", "print_json", "say"]

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
