"""Which reader an artifact needs, chosen from its path: the one entry point for "what does this
file serve". Readers are imported only when their format is met (each needs its own extra)."""

from __future__ import annotations

import os

from .served import ServedArtifact

__all__ = ["EXECUTORCH_NOTE", "read_artifact"]


def read_artifact(
    path: str | os.PathLike[str],
    *,
    dtype: str | None = None,
    width: int | None = None,
    sin: str | os.PathLike[str] | None = None,
    layout: str = "neox",
    n_ctx: int | None = None,
    graph_lengths: tuple[int, ...] | None = None,
) -> ServedArtifact:
    """Every table in the artifact at ``path``: an ONNX model or pack directory, a ``.gguf``, a
    ``.safetensors`` state dict's ``*inv_freq`` tensors, or an array file (``.npy``, raw
    ``.f64``/``.f32``/``.f16``; with ``sin``, a cos/sin cache pair). Pickles are never unpickled.

    ``n_ctx`` is the context a llama.cpp server allocates (it picks longrope's factors by it).
    ``graph_lengths``: the lengths an ONNX graph that computes its rotary is evaluated at.
    An ExecuTorch program (``.pte``) is not read: its rope buffers are lifted into the program
    as unnamed constants; it comes back with no table and a note saying how to audit it.
    """
    name = os.fspath(path)
    suffix = os.path.splitext(name)[1].lower()
    if os.path.isdir(name) or suffix == ".onnx":
        from .onnx_pack import read_onnx

        return read_onnx(name, graph_lengths=graph_lengths)
    if suffix == ".gguf":
        from .gguf_file import read_gguf

        return read_gguf(name, n_ctx=n_ctx)
    if suffix == ".pte":
        return _executorch(name)
    if suffix == ".safetensors":
        from .safetensors_file import read_safetensors

        return read_safetensors(name)
    from .arrays import read_array

    return read_array(name, dtype=dtype, width=width, sin=sin, layout=layout)


EXECUTORCH_NOTE = (
    "an ExecuTorch program (.pte): its freqs_cos/freqs_sin buffers are lifted into the program as constants "
    "without names ropekit can rely on, so ropekit does not read it. Audit the model it was exported from: "
    "ropekit.torch.audit_module(model, CONFIG) on the eager module, or np.save its freqs_cos/freqs_sin buffers "
    "(model.state_dict() or the ExportedProgram's constants) and run ropekit audit CONFIG --served freqs_cos.npy "
    "--sin freqs_sin.npy --layout half (they are [positions, pairs]: one column per pair)"
)
"""Why a ``.pte`` comes back without tables, and what to audit instead."""


def _executorch(name: str) -> ServedArtifact:
    from .served import check_regular_file

    check_regular_file(name, "served")
    return ServedArtifact(name, "executorch", (), producer="ExecuTorch program", engine={"refused": EXECUTORCH_NOTE})
