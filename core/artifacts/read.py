"""Which reader an artifact needs, chosen from its path: the one entry point for "what does this
file serve". Readers are imported only when their format is met (each needs its own extra)."""

from __future__ import annotations

import os

from .served import ServedArtifact

__all__ = ["read_artifact"]


def read_artifact(
    path: str | os.PathLike[str],
    *,
    dtype: str | None = None,
    width: int | None = None,
    sin: str | os.PathLike[str] | None = None,
    layout: str = "neox",
    n_ctx: int | None = None,
) -> ServedArtifact:
    """Every table in the artifact at ``path``: an ONNX model or pack directory, a ``.gguf``, a
    ``.safetensors`` state dict's ``*inv_freq`` tensors, or an array file (``.npy``, raw
    ``.f64``/``.f32``/``.f16``; with ``sin``, a cos/sin cache pair). Pickles are never unpickled.

    ``n_ctx`` is the context a llama.cpp server allocates (it picks longrope's factors by it).
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        from .onnx_pack import read_onnx

        return read_onnx(name)
    suffix = os.path.splitext(name)[1].lower()
    if suffix == ".onnx":
        from .onnx_pack import read_onnx

        return read_onnx(name)
    if suffix == ".gguf":
        from .gguf_file import read_gguf

        return read_gguf(name, n_ctx=n_ctx)
    if suffix == ".safetensors":
        from .safetensors_file import read_safetensors

        return read_safetensors(name)
    from .arrays import read_array

    return read_array(name, dtype=dtype, width=width, sin=sin, layout=layout)
