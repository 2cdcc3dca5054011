"""ExecuTorch programs (``.pte``, with their ``.ptd``): rope constants found by value without
executorch, judged by their tables; a program's constants are never rewritten."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...format import ReadRequest, TablesFormat

if TYPE_CHECKING:
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class Program(TablesFormat):
    """An ExecuTorch program."""

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """The program's rope constants (``request.data``: its ``.ptd``; default: the one beside it)."""
        from .program import read_pte

        return read_pte(path, data=request.data)


FORMAT = Program("pte", "an ExecuTorch program's constants are not rewritten; re-export it from a fixed model")
