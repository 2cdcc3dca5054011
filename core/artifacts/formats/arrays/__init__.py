"""Array dumps (``.npy``, raw ``.f64``/``.f32``/``.f16``; an ``inv_freq``, or a cos cache with its
sin partner): read as they are, judged by their tables, never rewritten."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...format import ReadRequest, TablesFormat

if TYPE_CHECKING:
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class Arrays(TablesFormat):
    """A dump of the tables a forward used."""

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """The dump's table (with ``request.sin``, a cos/sin cache pair)."""
        from .dump import read_array

        return read_array(path, dtype=request.dtype, width=request.width, sin=request.sin, layout=request.layout)


FORMAT = Arrays("arrays", "fix the model or exporter that wrote it, then dump again")
