"""What a file serves, whatever its format: the one entry point for reading an artifact. The format
is found through :mod:`~ropekit.artifacts.format`'s lazy table (by suffix, folder or first bytes);
its reader is imported only when its format is met (each needs its own extra)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .format import ReadRequest, find_format, lengths_for
from .served import ServedArtifact

if TYPE_CHECKING:
    from ..tables.table import ModelRope

__all__ = ["read_artifact", "read_for_audit"]


def read_for_audit(
    model: ModelRope,
    path: str | os.PathLike[str],
    *,
    n_ctx: int | None = None,
    dtype: str | None = None,
    sin: str | os.PathLike[str] | None = None,
    layout: str = "neox",
) -> ServedArtifact:
    """The artifact at ``path`` read the one way every judgement of ``model`` reads it (``ropekit audit``,
    ``ropekit repair`` before and after its rewrite, ``scan --audit``): a graph that computes its rotary is
    evaluated on both sides of every seq-len switch the declaration has (a traced Phi-3 export that froze
    its short factors is then a mismatch for all of them, never 'unchanged' for one and a mismatch for
    another); a raw array is read at the declared rotary width when every layer type has the same one.
    """
    widths = {table.rotary_dim for table in model.tables.values()}
    width = widths.pop() if len(widths) == 1 else None
    lengths = lengths_for(table.switch_at for table in model.tables.values())
    return read_artifact(path, dtype=dtype, width=width, sin=sin, layout=layout, n_ctx=n_ctx, graph_lengths=lengths)


def read_artifact(
    path: str | os.PathLike[str],
    *,
    dtype: str | None = None,
    width: int | None = None,
    sin: str | os.PathLike[str] | None = None,
    layout: str = "neox",
    n_ctx: int | None = None,
    graph_lengths: tuple[int, ...] | None = None,
    data: str | os.PathLike[str] | None = None,
) -> ServedArtifact:
    """Every table in the artifact at ``path``: an ONNX model or pack directory, a ``.gguf``, a
    ``.safetensors`` state dict's ``*inv_freq`` tensors, an ExecuTorch ``.pte``, or an array file (``.npy``, raw
    ``.f64``/``.f32``/``.f16``; with ``sin``, a cos/sin cache pair). Pickles are never unpickled.

    ``n_ctx`` is the context a llama.cpp server allocates (it picks longrope's factors by it).
    ``graph_lengths``: the lengths an ONNX graph that computes its rotary is evaluated at.
    An ExecuTorch program (``.pte``) is read without executorch: its rope constants, found by
    value (:mod:`~ropekit.artifacts.formats.pte.program`); ``data`` is the ``.ptd`` holding its external
    constants (default: the one beside it). Where the tables cannot be read (inside a delegate,
    program inputs, a missing ``.ptd``) it comes back with no table and the reason.
    """
    name = os.fspath(path)
    request = ReadRequest(dtype, width, sin, layout, n_ctx, graph_lengths, data)
    return find_format(name).read(name, request)
