"""The fuzzing contract, shared by the suite's property tests (``tests/artifacts/test_fuzz.py``) and the
campaign runner (``scripts/fuzz.py``): one target per reader and one for ``load``, each taking the bytes of one
file, placing them where that format reads them (beside a committed seed's other files), and running the real
reader, audit and (for formats ropekit rewrites) repair on them.

The contract every input must keep (:func:`check` returns ``None``, or the failure's signature):

- only ropekit's own errors escape (``RopekitError``: a config error naming its JSON path, an artifact error
  naming the file; :class:`~ropekit.artifacts.fixing.NotRepairableError` is a refusal);
- every error message is one line;
- an audit's ``--json`` document is valid JSON (``allow_nan=False``) and every served table it judged is
  what the artifact states (non-finite values are a mismatch, never a crash);
- a repair writes only inside its ``--out`` and leaves no staging behind; the input is never changed;
- a table ``load`` returns is finite, and ``load`` never mutates its input.

A signature is ``ExceptionType at ropekit/path.py:line`` (the innermost frame inside ropekit), or
``contract: what`` for a broken promise, so one reproducer is kept per distinct failure.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import shutil
import tempfile
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
ARTIFACTS = DATA / "artifacts"
REPRODUCERS = DATA / "fuzz"
"""One folder per target, one file per failure signature found (named by the input's hash): each replayed by
``tests/artifacts/test_fuzz.py``."""


class Target:
    """One fuzz target: ``name``, the ``seed`` folder whose ``file`` the input replaces (the other files of the
    folder are copied beside it), the ``config`` audited against, and whether ``repair`` is tried."""

    def __init__(self, name: str, seed: Path, file: str, config: Path | None, repair: bool, *,
                 served: str | None = None) -> None:
        self.name, self.seed, self.file, self.config, self.repair = name, seed, file, config, repair
        self.served = served
        """What ``--served`` names inside the folder (``None``: the file itself)."""

    def seeds(self) -> list[bytes]:
        """The committed files of this format: the campaign's starting corpus."""
        found = []
        for path in sorted(ARTIFACTS.rglob(self.file)):
            if path.is_file() and path.stat().st_size <= 1 << 20:
                found.append(path.read_bytes())
        return found or [(self.seed / self.file).read_bytes()]


TARGETS: dict[str, Target] = {
    "gguf": Target("gguf", ARTIFACTS / "gguf_llama3", "model.gguf", ARTIFACTS / "gguf_llama3" / "config.json", True),
    "onnx": Target("onnx", ARTIFACTS / "onnx_llama3_fp32", "model.onnx", ARTIFACTS / "onnx_llama3_fp32" / "config.json",
                   True, served="."),
    "openvino": Target("openvino", ARTIFACTS / "openvino" / "llama3", "openvino_model.xml",
                       ARTIFACTS / "openvino" / "llama3" / "config.json", True, served="."),
    "genie": Target("genie", ARTIFACTS / "genie" / "llama3", "genie_config.json",
                    ARTIFACTS / "genie" / "llama3" / "config.json", True),
    "pte": Target("pte", ARTIFACTS / "pte_llama32_xnnpack", "model.pte",
                  ARTIFACTS / "pte_llama32_xnnpack" / "config.json", False),
    "safetensors": Target("safetensors", ARTIFACTS / "onnx_llama_yarn" / "checkpoint", "model.safetensors",
                          ARTIFACTS / "onnx_llama_yarn" / "checkpoint" / "config.json", False),
    "npy": Target("npy", ARTIFACTS / "gguf_llama3", "inv_freq.npy", ARTIFACTS / "gguf_llama3" / "config.json", False),
    "load": Target("load", ARTIFACTS / "gguf_llama3", "config.json", None, False),
}
"""Every target: each reader, and ``load`` (config JSON)."""


def _npy_seed() -> bytes:
    import io

    import ropekit

    buffer = io.BytesIO()
    np.save(buffer, ropekit.load(ARTIFACTS / "gguf_llama3" / "config.json").for_layer(0).inv_freq)  # type: ignore[union-attr]
    return buffer.getvalue()


def seeds(name: str) -> list[bytes]:
    """The starting corpus of target ``name``."""
    if name == "npy":
        return [_npy_seed()]
    if name == "load":
        return [path.read_bytes() for path in sorted((DATA / "artifacts").rglob("config.json"))
                if path.stat().st_size < 1 << 16][:40]
    return TARGETS[name].seeds()


def signature(error: BaseException) -> str:
    """``Type at ropekit/module.py:line``: the innermost frame inside ropekit (else the innermost frame)."""
    frames = traceback.extract_tb(error.__traceback__)
    inside = [frame for frame in frames if f"{os.sep}core{os.sep}" in frame.filename
              or f"{os.sep}ropekit{os.sep}" in frame.filename or f"{os.sep}plugins{os.sep}" in frame.filename]
    chosen = inside or list(frames)
    where = f"{_short_path(chosen[-1].filename)}:{chosen[-1].lineno}" if chosen else "?"
    return f"{type(error).__name__} at {where}"


def _short_path(filename: str) -> str:
    for marker in (f"{os.sep}core{os.sep}", f"{os.sep}ropekit{os.sep}", f"{os.sep}plugins{os.sep}"):
        if marker in filename:
            return "ropekit/" + filename.split(marker, 1)[1].replace(os.sep, "/")
    return os.path.basename(filename)


def _allowed(error: BaseException) -> bool:
    import ropekit
    from ropekit.artifacts.fixing import NotRepairableError

    return isinstance(error, (ropekit.RopekitError, NotRepairableError))


def _one_line(error: BaseException) -> str | None:
    text = str(error)
    return None if "\n" not in text and "\r" not in text and "\x1b" not in text else \
        f"contract: a {type(error).__name__} message of several lines"


def check(name: str, data: bytes) -> str | None:
    """Run target ``name`` on ``data``: ``None`` when the contract holds, else the failure's signature."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if name == "load":
                return _check_load(data)
            return _check_artifact(TARGETS[name], data)
        except ContractError as error:
            return str(error)
        except RecursionError as error:
            return signature(error)
        except Exception as error:  # the contract: only ropekit's errors
            if _allowed(error):
                return _one_line(error)
            return signature(error)


def _check_load(data: bytes) -> str | None:
    import ropekit

    try:
        config = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(config, dict):
        return None
    before = copy.deepcopy(config)
    try:
        model = ropekit.load(config)
        tables = list(model.tables.values())
        for table in tables[:4]:
            if not np.all(np.isfinite(table.inv_freq)) or not math.isfinite(table.attention_factor):
                return "contract: a non-finite table"
            table.cos_sin(range(8))
            if table.seq_len_dependent:
                table.at(int(table.switch_at or 1) + 1)
        for index in range(min(len(model.layer_types), 4)):
            with contextlib.suppress(LookupError):
                model.for_layer(index)
    except ropekit.RopekitError as error:
        if config != before:
            return "contract: load mutated its input"
        return _one_line(error)
    if config != before:
        return "contract: load mutated its input"
    return None


def _check_artifact(target: Target, data: bytes) -> str | None:
    import ropekit
    from ropekit.artifacts.audit import audit_artifact
    from ropekit.artifacts.read import read_for_audit

    assert target.config is not None
    model = ropekit.load(target.config)
    with tempfile.TemporaryDirectory(prefix="ropekit-fuzz-") as work:
        folder = Path(work) / "in"
        shutil.copytree(target.seed, folder)
        (folder / target.file).write_bytes(data)
        served = folder if target.served == "." else folder / target.file
        before = _digest(folder)
        report = audit_artifact(model, read_for_audit(model, str(served)))
        document = report.to_json()
        _finite_json(document)
        if target.repair and report.verdict == "mismatch":
            from ropekit.artifacts.repair.run import repair

            out = Path(work) / "out" / (target.file if target.served is None else "copy")
            out.parent.mkdir()
            try:
                repair(model, str(served), str(out), report=report)
            except Exception:
                _strays(out)  # a refusal too leaves nothing behind
                raise
            _strays(out)
        if _digest(folder) != before:
            return "contract: the input was changed"
    return None


class ContractError(AssertionError):
    """A promise of the contract broken (not an exception a reader raised)."""


def _strays(out: Path) -> None:
    strays = [entry for entry in os.listdir(out.parent) if entry != out.name]
    if strays:
        raise ContractError(f"contract: repair left {strays} beside --out")


def _finite_json(document: Any) -> None:
    """The audit document as ``--json`` prints it: valid JSON once non-finite values are named (the CLI's
    :func:`~ropekit.cli.output.finite_json`)."""
    from ropekit.cli.output import finite_json

    json.dumps(finite_json(document), allow_nan=False)


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def reproducers(name: str) -> list[Path]:
    """The committed reproducers of target ``name``."""
    folder = REPRODUCERS / name
    return sorted(path for path in folder.iterdir() if path.is_file()) if folder.is_dir() else []


def mutate(data: bytes, rng: np.random.Generator, count: int = 4) -> bytes:
    """``data`` with ``count`` random edits: bytes flipped, set to edge values, runs duplicated or cut, integers
    at aligned offsets replaced by lies (0, -1, 2**32 - 1, 2**64 - 1): the structure-aware part of the mutations
    the property tests apply (the campaign adds libFuzzer's own)."""
    buffer = bytearray(data)
    for _ in range(count):
        if not buffer:
            buffer.extend(b"\0")
        choice = int(rng.integers(6))
        at = int(rng.integers(len(buffer)))
        if choice == 0:
            buffer[at] ^= 1 << int(rng.integers(8))
        elif choice == 1:
            buffer[at] = int(rng.choice([0, 1, 0x7F, 0x80, 0xFF]))
        elif choice == 2 and len(buffer) > 8:
            at -= at % 4
            lie = [b"\0" * 8, b"\xff" * 8, b"\xff\xff\xff\xff\0\0\0\0", b"\0\0\0\x80\0\0\0\0"][int(rng.integers(4))]
            width = int(rng.choice([4, 8]))
            buffer[at:at + width] = lie[:width]
        elif choice == 3:
            end = min(len(buffer), at + int(rng.integers(1, 64)))
            del buffer[at:end]
        elif choice == 4:
            end = min(len(buffer), at + int(rng.integers(1, 64)))
            buffer[at:at] = buffer[at:end]
        else:
            del buffer[at:]
    return bytes(buffer)


CHECKS: dict[str, Callable[[bytes], str | None]] = {name: (lambda data, name=name: check(name, data))  # type: ignore[misc]
                                                    for name in TARGETS}
