"""``ropekit scan``: every model under some folders, what each declares, and who would mis-serve it.

A model is a folder holding ``config.json`` (a plain model folder, a Hugging Face hub-cache
snapshot ``models--org--name/snapshots/<rev>/``, a Ryzen AI pack), a ``NAME.json`` model config in a
folder without one (a JSON object stating ``model_type`` or ``architectures`` that is not a tokenizer,
generation, processor or engine config: :mod:`~ropekit.tools.model_configs`), an ONNX pack without one
(``genai_config.json`` + ``*.onnx``), or a ``.gguf`` file; ExecuTorch programs (``.pte``) are
artifacts of the model whose ``config.json`` is beside or above them, as ONNX models are; so are
OpenVINO IRs (``openvino_model.xml`` + ``.bin``) and Genie bundle configs (``genie_config.json``)
beside a ``config.json``. Each
becomes one :class:`ScanRow` with its own status; a bad model never stops the scan. Nothing is
written anywhere. Directory symlinks are not followed (no loops); file symlinks are (the hub
cache's blobs). A path given that holds no model is refused by name (:class:`~ropekit.ArgumentError`).

The warnings a model's config draws while it is read are its row's (:attr:`ScanRow.warnings`), each
said once, not emitted: a scan of a thousand models names the model beside every warning.

An ONNX model is paired with the nearest ``config.json`` above it: a model folder's ``.onnx`` files
and those in its subfolders (``MODEL/onnx/``, onnxruntime-genai's and the hub's layout, up to
:data:`NESTED_DEPTH` levels, stopping at a folder with a ``config.json`` of its own) are its
artifacts. A pack given on its own is paired with the ``config.json`` of the folder above it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from ..errors import (
    ArgumentError,
    MissingDependencyError,
    PluginError,
    RopeConfigError,
    RopekitError,
    UnknownModelTypeError,
    UnknownRopeTypeError,
)
from ..host.registry import Registry, default_registry
from .model_configs import not_a_model, read_model_config

__all__ = ["STATUSES", "ScanRow", "canonical_types", "find_models", "scan", "summarize"]

STATUSES = ("ok", "refused", "unknown_model", "unregistered", "unsupported", "mismatch", "plugin_error")
"""Row statuses, best to worst after ``ok``: exit 0 only when every row is ``ok``."""

MAX_ENTRIES = 1_000_000
"""Directory entries looked at before the walk stops with a row saying so (a huge tree, a wrong root)."""

NESTED_DEPTH = 3
"""How many folder levels below a ``config.json`` its ONNX files are looked for (``onnx/cpu/int4``)."""
_SKIPPED = ("blobs", "refs", "__pycache__")


@attrs.frozen
class Candidate:
    """Something that looks like a model: a folder with ``config.json``, a pack, a GGUF."""

    path: str
    kind: str  # "config" (a folder), "config_file", "onnx_pack", "gguf"
    artifacts: tuple[str, ...] = ()
    config: str | None = None
    """The ``config.json`` that declares it, when not ``path/config.json`` (a pack below its model folder)."""
    document: Any = attrs.field(default=None, eq=False, repr=False)
    """The config already parsed to tell it is a model's (a ``NAME.json``): not read twice."""


@attrs.frozen
class ScanRow:
    """One model: where it is, what it declares per layer type, and its status with the reason."""

    path: str
    status: str
    model_type: str | None = None
    layers: dict[str, Any] = attrs.field(factory=dict)
    reason: str = ""
    artifacts: tuple[str, ...] = ()
    audit: dict[str, Any] | None = None
    config: str | None = None
    """The config that declares the model when it is not ``path/config.json``."""
    warnings: tuple[str, ...] = ()
    """The warnings reading this model's config drew (lenient keys, keys its code ignores), once each."""

    def to_json(self) -> dict[str, Any]:
        """The ``ropekit scan --json`` line for this model."""
        record: dict[str, Any] = {"path": self.path, "status": self.status, "model_type": self.model_type,
                                  "layers": self.layers, "reason": self.reason, "warnings": list(self.warnings)}
        if self.config is not None:
            record["config"] = self.config
        if self.artifacts:
            record["artifacts"] = list(self.artifacts)
        if self.audit is not None:
            record["audit"] = self.audit
        return record


def find_models(paths: Sequence[str], *, on_error: Callable[[str, str], None] | None = None) -> Iterator[Candidate]:
    """Every model candidate under ``paths``, in a stable order (each root in order, sorted inside).

    Raises :class:`~ropekit.ArgumentError` naming a path that is not there, is not a model's file, or
    is a folder holding no model (after the candidates of the paths before it)."""
    seen: set[str] = set()
    budget = [MAX_ENTRIES]
    noted = [0]

    def note(path: str, problem: str) -> None:
        noted[0] += 1
        if on_error is not None:
            on_error(path, problem)

    for root in paths:
        try:
            info = os.stat(root)
        except OSError as error:
            raise ArgumentError("paths", f"{root}: {error.strerror or error}") from None
        if stat.S_ISREG(info.st_mode):
            candidate = _file_candidate(root)
            if candidate is None:
                raise ArgumentError("paths", f"{root}: not a config.json, .gguf, .onnx or .pte; give a folder to walk")
            if candidate.path not in seen:
                seen.add(candidate.path)
                yield candidate
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise ArgumentError("paths", f"{root}: not a file or folder")
        found, noted[0] = 0, 0
        for candidate in _walk(root, seen, budget, note):
            found += 1
            yield candidate
        if not found and not noted[0]:
            raise ArgumentError("paths", f"{root}: holds no model (a folder with config.json, a model's NAME.json "
                                "config, an ONNX pack, a .gguf); give a folder of models or a model's file")


def _file_candidate(path: str) -> Candidate | None:
    name = os.path.basename(path)
    if name == "config.json":
        folder = os.path.dirname(path) or "."
        return Candidate(folder, "config", _artifacts(folder, _listdir(folder)) + _nested_onnx(folder, set(), [
            MAX_ENTRIES]))
    if name.endswith(".json"):  # a config file named on the command line (no artifacts beside it)
        return _named_config(path)
    if name.endswith(".gguf"):
        return Candidate(path, "gguf")
    if name.endswith((".onnx", ".pte")):
        folder = os.path.dirname(path) or "."
        return _pack(folder, (path,))
    return None


def _named_config(path: str) -> Candidate:
    """A ``NAME.json`` named on the command line: a candidate unless it is known not to be a model's
    config (a tokenizer, generation or engine config), which is refused naming what it is."""
    from ..config.source import read_config

    try:
        document, _ = read_config(path)
    except RopeConfigError:
        return Candidate(path, "config_file")  # its row says why it cannot be read
    problem = not_a_model(document, path)
    if problem is not None:
        raise ArgumentError("paths", f"{path}: {problem}, not a model's config; give the model's config.json (a JSON "
                            "object with model_type or architectures), a .gguf, .onnx or .pte, or a folder to walk")
    return Candidate(path, "config_file", document=document)


def _pack(folder: str, artifacts: tuple[str, ...]) -> Candidate:
    """ONNX models or ExecuTorch programs given without their model folder: paired with the
    ``config.json`` beside them, else the folder above's (``MODEL/onnx/``), else a candidate that is
    refused by name."""
    for config in (os.path.join(folder, "config.json"),
                   os.path.join(os.path.dirname(os.path.abspath(folder)), "config.json")):
        if os.path.isfile(config):
            return Candidate(folder, "config", artifacts, config=config)
    return Candidate(folder, "onnx_pack", artifacts)


def _nested_onnx(folder: str, claimed: set[str], budget: list[int]) -> tuple[str, ...]:
    """The ``.onnx`` files in ``folder``'s subfolders, up to :data:`NESTED_DEPTH` levels, in sorted
    order; a subfolder with its own ``config.json`` is another model and is not entered. Every
    folder that holds one is added to ``claimed`` (the walk does not report it again)."""
    found: list[str] = []
    stack = [(folder, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda entry: entry.name)
        except OSError:
            continue
        budget[0] -= len(entries)
        if budget[0] < 0:
            return tuple(found)
        names = [entry.name for entry in entries]
        if depth > 0:
            if "config.json" in names:
                continue
            files = _artifacts(current, (name for name in names if name.endswith((".onnx", ".pte"))))
            if files:
                claimed.add(current)
                found.extend(files)
        if depth < NESTED_DEPTH:
            stack.extend((entry.path, depth + 1) for entry in reversed(entries) if _is_real_dir(entry)
                         and not entry.name.startswith(".") and entry.name not in _SKIPPED)
    return tuple(found)


def _listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _artifacts(folder: str, names: Iterable[str]) -> tuple[str, ...]:
    """The artifacts among ``names``: GGUFs, ONNX models, ExecuTorch programs, OpenVINO IRs (an
    ``.xml`` with its ``.bin`` beside it) and Genie bundle configs (``genie_config.json``)."""
    listed = list(names)
    present = set(listed)
    found = []
    for name in listed:
        if name.endswith(".gguf") or (name.endswith((".onnx", ".pte")) and not name.startswith(".")) or (
                name.endswith(".xml") and not name.startswith(".") and name[:-4] + ".bin" in present) or (
                name == "genie_config.json"):
            found.append(os.path.join(folder, name))
    return tuple(found)


def _walk(
    root: str, seen: set[str], budget: list[int], on_error: Callable[[str, str], None] | None
) -> Iterator[Candidate]:
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as error:
            if on_error is not None:
                on_error(folder, f"cannot read folder: {error.strerror or error}")
            continue
        budget[0] -= len(entries)
        if budget[0] < 0:
            if on_error is not None:
                on_error(folder, f"stopped: more than {MAX_ENTRIES} entries under the given paths")
            return
        names = [entry.name for entry in entries]
        if "config.json" in names:
            if folder not in seen:
                seen.add(folder)
                yield Candidate(folder, "config", _artifacts(folder, names) + _nested_onnx(folder, seen, budget))
        elif "genai_config.json" in names and any(name.endswith(".onnx") for name in names):
            if folder not in seen:  # seen: already an artifact of the model folder above it
                seen.add(folder)
                yield _pack(folder, _artifacts(folder, names))
        else:
            for entry in entries:
                if entry.name.endswith(".gguf") and _is_file(entry):
                    path = entry.path
                    if path not in seen:
                        seen.add(path)
                        yield Candidate(path, "gguf")
                elif entry.name.endswith(".json") and not entry.name.startswith(".") and _is_file(entry):
                    document = read_model_config(entry.path)
                    if document is not None and entry.path not in seen:
                        seen.add(entry.path)
                        yield Candidate(entry.path, "config_file", document=document)
        subfolders = [entry.path for entry in entries if _is_real_dir(entry) and not entry.name.startswith(".")
                      and entry.name not in _SKIPPED]
        stack.extend(reversed(subfolders))


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()  # follows a file symlink (hub-cache blobs)
    except OSError:
        return False


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def canonical_types(names: Iterable[str], registry: Registry) -> frozenset[str]:
    """``--supports`` names resolved through aliases (``su`` is longrope, ``mrope`` is default)."""
    resolved = set()
    for name in names:
        try:
            resolved.add(registry.scheme(name, path="supports").name)
        except UnknownRopeTypeError:
            raise
        except PluginError:
            resolved.add(name)
    return frozenset(resolved)


def scan(
    paths: Sequence[str],
    *,
    supports: Iterable[str] | None = None,
    audit: bool = False,
    jobs: int = 1,
    registry: Registry | None = None,
    strict: bool = True,
) -> Iterator[ScanRow]:
    """One :class:`ScanRow` per model under ``paths``, as they are found.

    ``supports`` names the rope_types a forward serves: a model declaring any other gets status
    ``unsupported``. ``audit`` also audits the artifacts found beside each config (ONNX packs,
    GGUFs), ``jobs`` at a time.
    """
    registry = registry or default_registry()
    supported = canonical_types(supports, registry) if supports is not None else None
    errors: list[ScanRow] = []

    def note(path: str, problem: str) -> None:
        errors.append(ScanRow(path, "refused", reason=problem))

    candidates = find_models(paths, on_error=note)

    def row(candidate: Candidate) -> ScanRow:
        caught: list[str] = []
        _CAUGHT.rows = caught  # this thread's warnings are this row's
        try:
            made = _row(candidate, registry, supported, audit, strict)
        except Exception as error:  # a bad model never stops the scan; its row says what broke
            made = ScanRow(candidate.path, "refused", reason=f"cannot read: {type(error).__name__}: {error}")
        finally:
            del _CAUGHT.rows
        return attrs.evolve(made, warnings=tuple(dict.fromkeys(caught))) if caught else made

    if audit and jobs > 1:
        with _recording(), ThreadPoolExecutor(max_workers=jobs) as pool:
            yield from pool.map(row, candidates)
    else:
        for candidate in candidates:
            with _recording():
                made = row(candidate)
            yield made
            while errors:
                yield errors.pop(0)
    yield from errors


_CAUGHT = threading.local()
"""``rows``: the list a thread building a row keeps its warnings in (absent between rows)."""


@contextlib.contextmanager
def _recording() -> Iterator[None]:
    """Warnings raised in a thread building a row go to that row (every one, whatever the filters
    outside: a scan reports, it does not stop); those of other code go where they went before."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        elsewhere = warnings.showwarning

        def keep(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
            rows = getattr(_CAUGHT, "rows", None)
            if rows is None:
                elsewhere(message, category, filename, lineno, file, line)
            else:
                rows.append(str(message))

        warnings.showwarning = keep
        yield


def _row(
    candidate: Candidate, registry: Registry, supported: frozenset[str] | None, audit: bool, strict: bool
) -> ScanRow:
    if candidate.kind == "gguf":
        return _gguf_row(candidate, audit)
    if candidate.kind == "onnx_pack":
        return ScanRow(candidate.path, "refused", reason="an ONNX pack without config.json: nothing declares its RoPE "
                       "(put the model's config.json beside it or in the folder above it to scan or audit it)",
                       artifacts=candidate.artifacts)
    from ..config.source import read_config
    from ..loader import load

    config_path = candidate.config or (
        candidate.path if candidate.kind == "config_file" else os.path.join(candidate.path, "config.json"))
    model_type = None
    try:  # parsed once: the mapping is what load() gets
        config = candidate.document if candidate.document is not None else read_config(config_path)[0]
        model_type = _model_type(config)
        model = load(config, strict=strict, registry=registry)
    except UnknownRopeTypeError as error:
        return ScanRow(candidate.path, "unregistered", model_type, reason=str(error), artifacts=candidate.artifacts,
                       config=candidate.config)
    except UnknownModelTypeError as error:
        return ScanRow(candidate.path, "unknown_model", model_type, reason=str(error), artifacts=candidate.artifacts,
                       config=candidate.config)
    except RopeConfigError as error:
        return ScanRow(candidate.path, "refused", model_type, reason=str(error), artifacts=candidate.artifacts,
                       config=candidate.config)
    except PluginError as error:
        return ScanRow(candidate.path, "plugin_error", model_type, reason=str(error), artifacts=candidate.artifacts,
                       config=candidate.config)
    layers: dict[str, Any] = {}
    for name, table in model.tables.items():
        owner = registry.owner(table.rope_type)
        layers[name] = {"rope_type": table.rope_type, "distribution": owner.distribution if owner else "?"}
    for name in sorted(model.no_rope_types - set(model.tables)):
        layers[name] = {"no_rope": True}
    if model.no_rope_layers:
        layers["no_rope_layers"] = list(model.no_rope_layers)
    status, reason = "ok", ""
    if supported is not None:
        missing = sorted({table.rope_type for table in model.tables.values()} - supported)
        if missing:
            status = "unsupported"
            reason = (f"declares {', '.join(missing)}, which this forward does not serve (it serves "
                      f"{', '.join(sorted(supported))})")
    audits: dict[str, Any] | None = None
    if audit and candidate.artifacts:
        audits, problem = _audit_artifacts(model, candidate.artifacts, candidate.path)
        if problem and status == "ok":
            status, reason = "mismatch", problem
    return ScanRow(candidate.path, status, model_type, layers, reason, candidate.artifacts, audits, candidate.config)


def _model_type(config: Any) -> str | None:
    text = config.get("text_config")
    found = config.get("model_type") or (text.get("model_type") if isinstance(text, dict) else None)
    return found if isinstance(found, str) else None


def _audit_artifacts(model: Any, artifacts: tuple[str, ...], base: str | None = None) -> tuple[dict[str, Any], str]:
    """Each artifact audited against ``model``: per path, the verdict, ``served_as``, ``repairable``
    and the mismatching layers; and one line of problems, each naming its artifact relative to
    ``base`` (the model's folder; else by its file name)."""
    from ..artifacts.audit import audit_artifact
    from ..artifacts.read import read_for_audit
    from ..artifacts.repair import annotate

    results: dict[str, Any] = {}
    problems = []
    for path in artifacts:
        shown = os.path.relpath(path, base) if base is not None else os.path.basename(path)
        try:
            artifact = read_for_audit(model, path)  # as `ropekit audit` and `ropekit repair` read it
            report = annotate(model, audit_artifact(model, artifact))
        except Exception as error:  # one unreadable artifact is this row's problem, not the scan's
            results[path] = {"verdict": "error", "reason": str(error)}
            problems.append(f"{shown}: cannot audit: {error}")
            continue
        served_as = {name: layer.served_as for name, layer in report.layers.items() if layer.served_as is not None}
        results[path] = {"verdict": report.verdict, **({"served_as": served_as} if served_as else {})}
        if report.repairable is not None:
            results[path]["repairable"] = report.repairable
        wrong_layers = [entry.to_json() for entry in report.artifact.layers or () if entry.verdict == "mismatch"]
        if wrong_layers:
            results[path]["layers"] = wrong_layers
        if report.verdict == "no_table":
            problems.append(f"{shown}: carries no RoPE table (its runtime builds one)")
        elif report.verdict != "match":
            first = next(iter(served_as.items()))
            problems.append(f"{shown}: [{first[0]}] serves {first[1]}")
    return results, "; ".join(problems)


def _gguf_row(candidate: Candidate, audit: bool) -> ScanRow:
    from ..artifacts.read import read_artifact

    try:
        artifact = read_artifact(candidate.path)
    except MissingDependencyError as error:
        return ScanRow(candidate.path, "refused", reason=str(error))
    except RopekitError as error:
        return ScanRow(candidate.path, "refused", reason=str(error))
    engine = artifact.engine
    layers = {"full_attention": {"rope_type": f"gguf:{engine.get('scaling_type')}",
                                 "distribution": "llama.cpp (GGUF)"}}
    if audit and artifact.flags:
        return ScanRow(candidate.path, "mismatch", engine.get("arch"), layers, "; ".join(artifact.flags),
                       audit={"verdict": "red_flags", "flags": list(artifact.flags)})
    return ScanRow(candidate.path, "ok", engine.get("arch"), layers,
                   audit={"verdict": "no_red_flags"} if audit else None)


def summarize(rows: Iterable[ScanRow]) -> dict[str, Any]:
    """Counts per status and per rope_type (a model counts once per rope_type it declares)."""
    statuses: Counter[str] = Counter()
    types: Counter[str] = Counter()
    total = 0
    for row in rows:
        total += 1
        statuses[row.status] += 1
        for rope_type in {layer.get("rope_type") for layer in row.layers.values() if isinstance(layer, dict)}:
            if rope_type:
                types[rope_type] += 1
    return {"models": total, "status": dict(sorted(statuses.items())), "rope_types": dict(sorted(types.items()))}
