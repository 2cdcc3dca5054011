"""What an artifact serves, as values every reader returns: :class:`ServedTable` (one table, where
it was found and what it is: an ``inv_freq``, with the magnitude the engine multiplies cos/sin by
when known, or a cos/sin cache) and :class:`ServedArtifact` (every table of one file, its producer
and its engine's run-time rules), with the file checks readers share.

Every format's reader (``formats/<format>/``) imports this module; nothing here imports a reader.
"""
from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np

from ..errors import ArgumentError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["MAX_ARRAY_BYTES", "MAX_JSON_DEPTH", "LayerWiring", "RotaryWiring", "ServedArtifact", "ServedTable",
           "check_regular_file", "half_columns", "output_rows", "read_json"]

Kind = Literal["inv_freq", "cache"]
MAX_ARRAY_BYTES = 1 << 30
"""The largest served array read (a 2**20-position float32 cache of 128 pairs is 512 MiB)."""


@attrs.frozen(eq=False)
class ServedTable:
    """One table an artifact serves.

    ``kind`` is ``inv_freq`` (``values`` is the frequency table; ``magnitude`` the cos/sin
    multiplier when the artifact states it) or ``cache`` (``values`` is cos, ``sin`` the sin cache,
    rows are positions ``first_position, first_position + 1, ...``; ``layout`` says how columns map
    to pairs: ``half`` is one column per pair). ``layer_type`` is the layer type the artifact says
    it serves (``None``: any); ``regime`` is ``short``/``long`` for a longrope table; ``dtype`` the
    dtype it was stored in; ``where`` a one-line location inside the artifact.
    """

    where: str
    kind: Kind
    values: npt.NDArray[np.float64]
    dtype: str
    sin: npt.NDArray[np.float64] | None = None
    magnitude: float | None = None
    layout: str = "half"
    layer_type: str | None = None
    regime: str | None = None
    first_position: int = 0
    angles: str = "float32"
    """How the producer formed the angles: ``float32`` (tolerance grows with position) or ``exact``."""
    seq_len: int | None = None
    """The sequence length the table was measured at (a graph evaluated at that many positions):
    a seq-len-dependent declaration is compared at that length."""
    axes: tuple[int, ...] | None = None
    """Per cos/sin column (in ``layout``), the position axis observed to drive it (a live
    multimodal module run one axis at a time); ``None``: not observed."""
    axis_names: tuple[str, ...] = ()
    """Names of the position axes ``axes`` counts (empty: temporal, height, width...)."""
    layers: tuple[int, ...] = ()
    """The layer indices the artifact shows consuming this table (a graph's ``layers.N`` nodes
    that read an evaluated cos/sin); empty: not known. Audit compares the table with those
    layers' layer types."""


@attrs.frozen
class RotaryWiring:
    """One rotation inside a layer: the ``node`` that applies it, what it rotates (``role``:
    ``query``, ``key``, ``query and key`` for an attention op that rotates both, ``None``: not
    known), the cos ``cache`` it reads, ``rotary_dim`` (channels) and ``interleaved`` (pairing)."""

    node: str
    role: str | None
    cache: str | None
    rotary_dim: int | None
    interleaved: bool


@attrs.frozen
class LayerWiring:
    """What one attention layer of a graph applies: ``rotates``, the cos ``cache`` it reads (a
    tensor name), ``rotary_dim`` (channels), ``interleaved`` (pairing), ``sliding`` (a local
    attention window), and the ``nodes`` the facts were read from. ``cache``, ``rotary_dim`` and
    ``interleaved`` are the first rotation's; ``rotaries`` has every rotation of the layer (the
    query's and the key's ``RotaryEmbedding``, an attention op's own), each judged on its own."""

    index: int
    rotates: bool
    cache: str | None = None
    rotary_dim: int | None = None
    interleaved: bool | None = None
    sliding: bool | None = None
    nodes: tuple[str, ...] = ()
    rotaries: tuple[RotaryWiring, ...] = ()


@attrs.frozen
class ServedArtifact:
    """Everything read from one artifact: its tables, who produced it, and what its engine does
    at run time that the tables alone do not say (``rules``), plus findings about the file itself."""

    path: str
    kind: str
    tables: tuple[ServedTable, ...]
    producer: str = ""
    rules: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    engine: dict[str, Any] = attrs.field(factory=dict)
    wiring: tuple[LayerWiring, ...] = ()
    """Per attention layer, what the graph wires (ONNX packs); empty when not read."""


def check_regular_file(path: str, argument: str) -> os.stat_result:
    """``path``'s stat if it is a regular file (a FIFO or device is refused before it is opened)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ArgumentError(argument, f"{path}: no such file") from None
    except OSError as error:
        raise ArgumentError(argument, f"{path}: cannot read: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ArgumentError(argument, f"{path}: not a regular file")
    return info


MAX_JSON_DEPTH = 64
"""The deepest nesting of an engine's JSON file read (Genie's configs nest 5 levels)."""


def read_json(path: str, argument: str, limit: int, sizes: str) -> Any:
    """The JSON file at ``path``, bounded: a regular file of at most ``limit`` bytes (``sizes`` says what
    real ones are), UTF-8, nested at most :data:`MAX_JSON_DEPTH` levels; :class:`ArgumentError` naming the
    file and what is wrong otherwise (never a ``RecursionError``)."""
    import json

    info = check_regular_file(path, argument)
    if info.st_size > limit:
        raise ArgumentError(argument, f"{path}: {info.st_size} bytes; {sizes} (at most {limit} are read)")
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise ArgumentError(argument, f"{path}: cannot read: {error.strerror or error}") from None
    if len(data) > limit:
        raise ArgumentError(argument, f"{path}: larger than {limit} bytes; {sizes}")
    try:
        text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as error:
        raise ArgumentError(argument, f"{path}: not UTF-8 (byte {error.start}); a JSON file is UTF-8") from None
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ArgumentError(argument, f"{path}: JSON nested {depth} levels deep; at most {MAX_JSON_DEPTH} are read")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the depth is checked first
        raise ArgumentError(argument, f"{path}: JSON nested too deep; at most {MAX_JSON_DEPTH} levels") from None
    except ValueError as error:
        raise ArgumentError(argument, f"{path}: cannot read as JSON: {error}") from None


def _json_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of ``text``, strings skipped (an upper bound for invalid JSON)."""
    import re

    deepest = depth = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        char = token.group()[0]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def half_columns(values: npt.NDArray[np.float64], layout: str, pairs: int | None = None) -> npt.NDArray[np.float64]:
    """One column per pair from a cache in ``layout`` (``half`` is returned as is)."""
    if layout == "half":
        return values
    count = values.shape[1] // 2 if pairs is None else pairs
    return values[:, :count] if layout == "neox" else values[:, 0 : 2 * count : 2]


def output_rows(array: np.ndarray[Any, Any], length: int) -> np.ndarray[Any, Any] | None:
    """The ``(length, width)`` rows of a cos/sin output a graph evaluated at ``length`` positions (batch and
    head axes of size one dropped), or ``None`` when it has another shape (ONNX and OpenVINO graphs alike)."""
    squeezed = array.reshape([size for size in array.shape if size != 1] or [1])
    if squeezed.ndim == 1 and length == 1:
        squeezed = squeezed[None, :]
    if squeezed.ndim != 2 or squeezed.shape[0] != length:
        return None
    return squeezed
