"""safetensors state dicts: their ``*inv_freq`` tensors, judged by their tables, never rewritten."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...format import ReadRequest, TablesFormat

if TYPE_CHECKING:
    from ...served import ServedArtifact

__all__ = ["FORMAT"]


class Safetensors(TablesFormat):
    """A state dict holding the rotary's ``inv_freq`` buffers."""

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """Every ``*inv_freq`` tensor of the file."""
        from .state_dict import read_safetensors

        return read_safetensors(path)


FORMAT = Safetensors("safetensors", "fix the model or exporter that wrote it, then dump again")
