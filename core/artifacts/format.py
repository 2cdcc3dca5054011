"""A format of engine artifact, as ``read``, ``audit`` and ``repair`` see it: one small protocol
(:class:`Format`: ``read`` a file, ``judge`` what it serves, ``plan`` and ``write`` its fix) and
the lazy table that finds a format by suffix, by a folder, by the file's first bytes, or by the
``kind`` of what was read, the way the plugin host finds schemes: the table holds module names only,
and a format's module is imported the first time a file of that format is met.

Each format lives in ``formats/<format>/``: its ``__init__`` defines ``FORMAT``, its modules the
reader, the per-layer judgement and the fix. Nothing here imports a format.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

import attrs

from .fixing import NotRepairableError, RepairPlan
from .judge import judge_tables

if TYPE_CHECKING:
    from ..tables.table import ModelRope
    from .report import AuditReport, AuditScope, Judgement
    from .served import ServedArtifact

__all__ = ["DEFAULT_LENGTHS", "FORMATS", "Format", "FormatEntry", "ReadRequest", "TablesFormat", "Written",
           "find_format", "format_of", "lengths_for"]

DEFAULT_LENGTHS: tuple[int, ...] = (64,)
"""Where a graph that computes its rotary is evaluated when the declaration has no switch."""


def lengths_for(switches: Iterable[int | None]) -> tuple[int, ...]:
    """Lengths on both sides of every switch (``switch`` and ``switch + 1``), else the default."""
    found = sorted({length for switch in switches if switch for length in (switch, switch + 1)})
    return tuple(found) or DEFAULT_LENGTHS


@attrs.frozen
class ReadRequest:
    """How to read a file: an array's ``dtype``, ``width`` and ``layout`` and its ``sin`` partner,
    the ``n_ctx`` a llama.cpp server allocates, the ``graph_lengths`` a computing graph is
    evaluated at, and an ExecuTorch program's ``data`` file."""

    dtype: str | None = None
    width: int | None = None
    sin: str | os.PathLike[str] | None = None
    layout: str = "neox"
    n_ctx: int | None = None
    graph_lengths: tuple[int, ...] | None = None
    data: str | os.PathLike[str] | None = None


@attrs.frozen
class Written:
    """What a format's fix wrote into staging: the ``changes`` (one record each) and the ``moves``
    ``(staged, final)`` that put the copy in place, the copy itself last."""

    changes: tuple[dict[str, Any], ...]
    moves: tuple[tuple[str, str], ...]


class Format(Protocol):
    """One format of engine artifact: how it is read, judged and fixed."""

    name: str

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """Every table the file at ``path`` serves."""

    def judge(self, model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
        """What ``artifact`` serves against ``model``'s declaration, per layer type (and per layer)."""

    def plan(self, model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
        """Fill in ``plan`` for the mismatch ``report`` found: the edits, or why they cannot serve it."""

    def write(self, plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
        """Carry ``plan`` out into the staging folder ``work`` (the copy will be moved to ``target``)."""


class TablesFormat:
    """A format read and judged as its tables alone, and never rewritten (``refusal`` says why):
    the base of the read-only formats, and the format of tables read from a live module."""

    def __init__(self, name: str, refusal: str) -> None:
        self.name = name
        self.refusal = refusal

    def read(self, path: str, request: ReadRequest) -> ServedArtifact:
        """Nothing to read: a live module's tables come already read."""
        raise NotImplementedError(f"{self.name} artifacts are not read from files")

    def judge(self, model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
        """The neutral judgement of every table."""
        return judge_tables(model, artifact, scope)

    def plan(self, model: ModelRope, report: AuditReport, plan: RepairPlan) -> None:
        """Refused: this format is not rewritten."""
        plan.refuse(None, f"{report.artifact.kind} artifacts are not repaired: {self.refusal}")

    def write(self, plan: RepairPlan, artifact: ServedArtifact, source: str, target: str, work: str) -> Written:
        """Never reached: :meth:`plan` refuses."""
        raise NotRepairableError(f"{artifact.kind} artifacts are not repaired: {self.refusal}")


@attrs.frozen
class FormatEntry:
    """One row of the table: the format's module (its ``FORMAT``), the ``kinds`` of artifact it
    reads, the file ``suffixes`` it owns, a ``magic`` prefix of the file's bytes, and whether a
    folder is one of its artifacts."""

    module: str
    kinds: tuple[str, ...]
    suffixes: tuple[str, ...] = ()
    magic: bytes = b""
    magic_at: int = 0
    folder: bool = False
    holds: tuple[str, ...] = ()
    """Names of files a folder of this format holds (an OpenVINO IR folder's ``openvino_model.xml``): such a
    folder is this format's, before any format that claims every folder."""
    json_path: tuple[str, ...] = ()
    """Keys (one nested in the other) a ``.json`` file of this format has (Genie's ``dialog``/``engine``)."""


FORMATS: dict[str, FormatEntry] = {
    "onnx": FormatEntry("ropekit.artifacts.formats.onnx", ("onnx",), (".onnx",), folder=True),
    "gguf": FormatEntry("ropekit.artifacts.formats.gguf", ("gguf",), (".gguf",), b"GGUF"),
    "pte": FormatEntry("ropekit.artifacts.formats.pte", ("executorch",), (".pte",), b"ET", 4),
    "safetensors": FormatEntry("ropekit.artifacts.formats.safetensors", ("safetensors",), (".safetensors",)),
    "openvino": FormatEntry("ropekit.artifacts.formats.openvino", ("openvino",), (".xml",),
                            holds=("openvino_model.xml",)),
    "genie": FormatEntry("ropekit.artifacts.formats.genie", ("genie",), holds=("genie_config.json",),
                         json_path=("dialog", "engine")),
    "arrays": FormatEntry("ropekit.artifacts.formats.arrays", ("array",), (".npy", ".f64", ".f32", ".f16"),
                          b"\x93NUMPY"),
}
"""Every format, by name (module names only: nothing is imported until a file needs it). A file
whose suffix and first bytes name no format is read as a raw array."""

FALLBACK = "arrays"
LIVE = TablesFormat("live", "fix the model or exporter that wrote it, then dump again")
"""The format of tables read from a live module (torch, MLX, vLLM): judged, never rewritten."""


def _load(name: str) -> Format:
    return cast("Format", importlib.import_module(FORMATS[name].module).FORMAT)


def find_format(path: str) -> Format:
    """The format of the file or folder at ``path``: a folder by the files it holds (else as an ONNX
    pack), a file by its suffix, a ``.json`` by its keys, else by its first bytes, else a raw array."""
    suffix = os.path.splitext(path)[1].lower()
    folder = os.path.isdir(path)
    if folder:
        for name, entry in FORMATS.items():
            if any(os.path.isfile(os.path.join(path, held)) for held in entry.holds):
                return _load(name)
    elif suffix == ".json":
        keys = _json_keys(path)
        for name, entry in FORMATS.items():
            if entry.json_path and keys[:len(entry.json_path)] == entry.json_path:
                return _load(name)
        if os.path.isfile(path) and not any(".json" in entry.suffixes for entry in FORMATS.values()):
            from ..errors import ArgumentError

            known = ", ".join(f"{name} ({'.'.join(entry.json_path)})" for name, entry in FORMATS.items()
                              if entry.json_path)
            raise ArgumentError("served", f"{path}: {_json_problem(path) or 'no keys of an engine file'}; a .json "
                                f"artifact is read by its keys: {known}")
    for name, entry in FORMATS.items():
        if suffix in entry.suffixes or (folder and entry.folder):
            return _load(name)
    head = _head(path)
    for name, entry in FORMATS.items():
        if entry.magic and head[entry.magic_at:entry.magic_at + len(entry.magic)] == entry.magic:
            return _load(name)
    return _load(FALLBACK)


def format_of(artifact: ServedArtifact) -> Format:
    """The format that read ``artifact`` (by its ``kind``; tables from a live module: :data:`LIVE`)."""
    for name, entry in FORMATS.items():
        if artifact.kind in entry.kinds:
            return _load(name)
    return LIVE


def _json_keys(path: str) -> tuple[str, ...]:
    """The path of nested keys a small JSON file opens with, as far as :data:`FORMATS` asks (empty: not
    such a file; the reader says what is wrong)."""
    from ..errors import ArgumentError
    from .served import read_json

    try:
        found = read_json(path, "served", MAX_JSON_BYTES, "an engine's JSON file is small")
    except ArgumentError:
        return ()
    for entry in FORMATS.values():
        node: Any = found
        keys: list[str] = []
        for key in entry.json_path:
            if not isinstance(node, dict) or key not in node:
                break
            node, keys = node[key], [*keys, key]
        if keys and len(keys) == len(entry.json_path):
            return tuple(keys)
    return ()


def _json_problem(path: str) -> str | None:
    """Why the JSON file at ``path`` cannot be read (``None``: it can)."""
    from ..errors import ArgumentError
    from .served import read_json

    try:
        read_json(path, "served", MAX_JSON_BYTES, "an engine's JSON file is small")
    except ArgumentError as error:
        return error.problem.removeprefix(f"{path}: ")
    return None


MAX_JSON_BYTES = 1 << 22
"""The largest ``.json`` file sniffed for its keys."""


def _head(path: str) -> bytes:
    """The first bytes of a regular file (nothing for anything else: the reader says what is wrong)."""
    try:
        if not os.path.isfile(path):
            return b""
        with open(path, "rb") as file:
            return file.read(8)
    except OSError:
        return b""
