"""``ropekit plot``: each layer type's wavelengths against plain RoPE, with the scheme's band edges.

People read this faster than a table of 64 numbers. Needs matplotlib (``pip install "ropekit[plot]"``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..contract.scheme import plain_inv_freq
from ..errors import ArgumentError, MissingDependencyError
from ..tables.table import ModelRope

__all__ = ["plot"]


def plot(model: ModelRope, path: str | os.PathLike[str], *, title: str | None = None) -> None:
    """Write a PNG (or any format matplotlib infers from ``path``): per layer type, the wavelength
    of each pair (top) and the plain / scheme frequency ratio (bottom), band edges marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise MissingDependencyError(
            f"ropekit plot needs matplotlib, which is not installed: pip install 'ropekit[plot]' ({error})"
        ) from error

    target = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise ArgumentError("path", f"{target}: its folder {parent} does not exist")
    extension = os.path.splitext(target)[1].lower().lstrip(".")
    formats = sorted(plt.figure().canvas.get_supported_filetypes())
    plt.close("all")
    if extension not in formats:
        raise ArgumentError("path", f"{target}: unknown image type {extension or '(none)'!r}; valid: "
                            f"{', '.join(formats)}")
    if not model.tables:
        raise ArgumentError("config", f"the model applies no RoPE ({model.no_rope_reason or 'no layer type rotates'}); "
                            "there is nothing to plot")
    if len(model.tables) > 16:
        raise ArgumentError("config", f"{len(model.tables)} layer types with RoPE; a plot shows at most 16")
    try:
        with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):  # config text is not markup
            _draw(plt, model, target, title)
    except OSError as error:
        raise ArgumentError("path", f"{target}: cannot write: {error.strerror or error}") from None
    finally:
        plt.close("all")


def _draw(plt: Any, model: ModelRope, target: str, title: str | None) -> None:
    columns = len(model.tables)
    figure, axes = plt.subplots(2, columns, figsize=(6.4 * columns, 7.2), squeeze=False, sharex="col")
    for column, (name, table) in enumerate(model.tables.items()):
        inv_freq = table.inv_freq
        pairs = np.arange(len(inv_freq))
        plain = plain_inv_freq(table.geometry.theta, table.rotary_dim, len(inv_freq))
        rotating = inv_freq > 0
        top: Any = axes[0][column]
        bottom: Any = axes[1][column]
        top.semilogy(pairs, 2 * math.pi / plain, "--", color="0.55", label="plain RoPE (same theta, dims)")
        top.semilogy(pairs[rotating], 2 * math.pi / inv_freq[rotating], "o-", ms=3, color="C0",
                     label=f"{table.rope_type}")
        if not rotating.all():
            top.plot([], [], " ", label=f"{int((~rotating).sum())} pairs not rotated")
        for index, (label, wavelength) in enumerate(table.landmarks.items()):
            if wavelength and math.isfinite(wavelength) and wavelength > 0:
                top.axhline(wavelength, color=f"C{index + 1}", lw=1, ls=":", label=f"{label} = {wavelength:g}")
        top.set_title(f"{name}: rope_type {table.rope_type}")
        top.set_ylabel("wavelength (positions)")
        top.legend(fontsize=8, loc="upper left")
        top.grid(True, which="major", alpha=0.3)
        ratio = np.divide(plain, inv_freq, out=np.full_like(plain, np.nan), where=rotating)
        bottom.semilogy(pairs, ratio, "o-", ms=3, color="C0")
        bottom.axhline(1.0, color="0.55", lw=1, ls="--")
        bottom.set_xlabel(f"pair index (rotary_dim {table.rotary_dim}, attention_factor {table.attention_factor:.4g})")
        bottom.set_ylabel("plain / scheme frequency")
        bottom.grid(True, which="major", alpha=0.3)
    figure.suptitle(title or f"ropekit: {model.source}", fontsize=10)
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
