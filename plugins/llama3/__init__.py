"""``llama3``: Llama-3.1's frequency-dependent interpolation (the three-branch rule).

Pairs whose wavelength is shorter than ``original_max / high_freq_factor`` are kept; pairs longer
than ``original_max / low_freq_factor`` are divided by ``factor``; pairs in between are
interpolated with ``smooth = (original_max / wavelength - low) / (high - low)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ropekit import Frequencies, Geometry, Key, Params, Scheme, hookimpl, plain_inv_freq

from .examples import EXAMPLES

__all__ = ["SCHEME", "ropekit_scheme"]


def build(params: Params, geometry: Geometry, seq_len: int | None) -> Frequencies:
    """The three-branch rule of transformers' ``_compute_llama3_parameters``, in float64."""
    factor = params["factor"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    original = params["original_max_position_embeddings"]
    inv_freq = plain_inv_freq(geometry.theta, geometry.rotary_dim)
    wavelength = 2 * math.pi / inv_freq
    result = np.where(wavelength > original / low, inv_freq / factor, inv_freq)
    in_band = (wavelength >= original / high) & (wavelength <= original / low) & (high > low)
    smooth = (original / wavelength[in_band] - low) / (high - low)
    result[in_band] = (1 - smooth) * result[in_band] / factor + smooth * result[in_band]
    return Frequencies(result)


def check(params: Params, geometry: Geometry) -> Iterator[tuple[str, str]]:
    """``high_freq_factor`` must not be below ``low_freq_factor`` (the band would be inverted).

    Equal factors are valid (Llama 4 ships 1.0 and 1.0): the band is empty, every pair is either
    kept or divided by ``factor``.
    """
    if params["high_freq_factor"] < params["low_freq_factor"]:
        yield (
            "high_freq_factor",
            f"must be >= low_freq_factor ({params['low_freq_factor']}), got {params['high_freq_factor']}",
        )


def landmarks(params: Params, geometry: Geometry) -> dict[str, float]:
    """The band edges: wavelengths original / low_freq_factor and original / high_freq_factor."""
    original = params["original_max_position_embeddings"]
    return {
        "original / low_freq_factor": original / params["low_freq_factor"],
        "original / high_freq_factor": original / params["high_freq_factor"],
    }


SCHEME = Scheme(
    name="llama3",
    examples=EXAMPLES,
    doc="Llama-3.1 frequency-band interpolation: low frequencies / factor, high kept, a smooth band between.",
    build=build,
    check=check,
    landmarks=landmarks,
    keys=(
        Key("factor", "float", "Low-frequency divisor (8: Llama-3.1, 32: 3.2).", required=True, ge=1, le=1e6),
        Key("low_freq_factor", "float", "original_max / this: long-wavelength edge.", required=True, gt=0),
        Key("high_freq_factor", "float", "original_max / this: short-wavelength edge.", required=True, gt=0),
        Key(
            "original_max_position_embeddings",
            "int",
            "Pre-training context length (8192 for Llama-3); else the top-level key, else max_position_embeddings.",
            required=True,
            gt=0,
            config_fallback="original_max_position_embeddings",
            default_from_max_positions=True,
        ),
    ),
)


@hookimpl
def ropekit_scheme() -> Scheme:
    """Declare ``llama3``."""
    return SCHEME
