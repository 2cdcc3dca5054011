"""Reading a Genie ``genie_config.json`` as the table Genie builds from it, and judging it.

qai-hub-models writes the file (``llm_helpers.create_genie_config``) in one of two forms: the ``QnnHtp``
backend's ``rope-theta`` (an int) and ``pos-id-dim`` (head_dim / 2, whatever ``partial_rotary_factor``
says), or, for a config carrying llama3's four keys, ``engine.model.positional-encoding`` with ``rope-dim``,
``rope-theta`` and a ``rope-scaling`` block. Genie is closed source: it is modelled as what it receives,
plain RoPE at ``rope-theta`` over ``rope-dim`` pairs (rotary width twice that), llama3's smoothing when the
block says so, cos/sin of magnitude 1 (no attention factor) and the same table at every length.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ....contract.scheme import plain_inv_freq
from ....errors import ArgumentError
from ....tables.table import ModelRope, RopeTable
from ...judge import judge_tables
from ...report import AuditScope, Judgement
from ...rules import Candidate, Rules
from ...served import ServedArtifact, ServedTable, read_json

__all__ = ["CONFIG_NAME", "GENIE_RULE", "GenieRules", "config_path", "genie_inv_freq", "judge_genie", "read_genie",
           "rope_keys"]

CONFIG_NAME = "genie_config.json"
GENIE_RULE = ("Genie builds cos/sin from genie_config.json's rope-theta over pos-id-dim (or rope-dim) pairs and "
              "llama3's rope-scaling block alone: no other scaling, no attention factor, one table at every length")
LLAMA3_KEYS = ("factor", "low-freq-factor", "high-freq-factor", "original-max-position-embeddings")
MAX_CONFIG_BYTES = 1 << 22


def config_path(path: str) -> str:
    """The ``genie_config.json`` of a bundle folder, or the file itself."""
    return os.path.join(path, CONFIG_NAME) if os.path.isdir(path) else path


def load_config(path: str) -> dict[str, Any]:
    """The parsed file (refused when it is not a Genie config, or when a block Genie reads is not an object)."""
    found = read_json(path, "served", MAX_CONFIG_BYTES, "a genie_config.json is a few kB")
    if not isinstance(found, dict) or not isinstance(found.get("dialog"), dict) or not isinstance(
            found["dialog"].get("engine"), dict):
        raise ArgumentError("served", f"{path}: not a Genie config (no dialog.engine)")
    rope_keys(found, path)  # every block the audit reads is checked once, here
    return found


def _block(parent: dict[str, Any], key: str, where: str, path: str) -> dict[str, Any]:
    """``parent[key]`` as an object (empty when absent or null); anything else refused by its JSON path."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ArgumentError("served", f"{path}: {where}.{key} is {_short(value)} ({type(value).__name__}); Genie reads "
                            "an object there")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def rope_keys(config: dict[str, Any], path: str = CONFIG_NAME) -> dict[str, Any]:
    """What Genie reads for RoPE: ``form`` (``positional-encoding`` or ``QnnHtp``), ``theta``, ``pairs``,
    the ``scaling`` block (or ``None``) and the context ``size``. A block that is not an object is refused by
    its JSON path (``dialog.engine.model``)."""
    dialog = config["dialog"]
    engine = dialog["engine"]
    model = _block(engine, "model", "dialog.engine", path)
    backend = _block(_block(engine, "backend", "dialog.engine", path), "QnnHtp", "dialog.engine.backend", path)
    size = _block(dialog, "context", "dialog", path).get("size")
    if "positional-encoding" in model:
        encoding = _block(model, "positional-encoding", "dialog.engine.model", path)
        form, theta, pairs, scaling = ("positional-encoding", encoding.get("rope-theta"), encoding.get("rope-dim"),
                                       encoding.get("rope-scaling"))
        kind = encoding.get("type", "rope")
    else:
        form, theta, pairs, scaling, kind = "QnnHtp", backend.get("rope-theta"), backend.get("pos-id-dim"), None, "rope"
    return {"form": form, "type": kind, "theta": theta, "pairs": pairs, "scaling": scaling, "size": size}


def genie_inv_freq(theta: float, pairs: int, scaling: dict[str, Any] | None) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The frequencies Genie builds: plain RoPE at ``theta`` over ``pairs`` pairs, smoothed by llama3's block."""
    inv_freq = plain_inv_freq(theta, 2 * pairs, pairs)
    if scaling is None:
        return inv_freq
    factor, low, high, original = (float(scaling[key]) for key in LLAMA3_KEYS)
    wavelength = 2 * np.pi / inv_freq
    low_wavelength, high_wavelength = original / low, original / high
    scaled = np.where(wavelength > low_wavelength, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    middle = ~(wavelength < high_wavelength) & ~(wavelength > low_wavelength)
    result: np.ndarray[Any, np.dtype[np.float64]] = np.where(middle, smoothed, scaled)
    return result


def read_genie(path: str) -> ServedArtifact:
    """The table Genie builds from the bundle's ``genie_config.json`` (none, with the reason, when the file
    names an encoding Genie's LLM path does not build from these keys; a non-finite value it states is named
    as a mismatch, ``engine["non_finite"]``)."""
    file = config_path(path)
    keys = rope_keys(load_config(file), file)
    engine = {"form": keys["form"], "rope_theta": keys["theta"], "pairs": keys["pairs"],
              "rope_scaling": keys["scaling"], "context_size": keys["size"]}
    where = (f"{CONFIG_NAME} engine.model.positional-encoding" if keys["form"] == "positional-encoding"
             else f"{CONFIG_NAME} engine.backend.QnnHtp rope-theta / pos-id-dim")
    theta, pairs, scaling = keys["theta"], keys["pairs"], keys["scaling"]
    key = "rope-theta"
    stated = [(key, theta)] + ([(f"rope-scaling.{name}", scaling.get(name)) for name in LLAMA3_KEYS]
                               if isinstance(scaling, dict) else [])
    for name, value in stated:
        if isinstance(value, float) and not math.isfinite(value):
            engine = {**engine, "rope_theta": None if name == key else theta, "rope_scaling": None,
                      "non_finite": f"{where} states {name} {value!r}: not a finite number, so no table Genie "
                                    "builds from it is the declared one"}
            return ServedArtifact(path, "genie", (), "qai-hub-models (Genie)", (GENIE_RULE,), engine=engine)
    if not isinstance(theta, (int, float)) or isinstance(theta, bool) or not 1 < theta < 1e300:
        return ServedArtifact(path, "genie", (), "qai-hub-models (Genie)", (GENIE_RULE,),
                              engine={**engine, "refused": f"{where} has no usable rope-theta ({_short(theta)})"})
    if not isinstance(pairs, int) or isinstance(pairs, bool) or not 1 <= pairs <= MAX_PAIRS:
        return ServedArtifact(path, "genie", (), "qai-hub-models (Genie)", (GENIE_RULE,), engine={
            **engine, "refused": f"{where} has no usable pos-id-dim / rope-dim ({_short(pairs)}; 1 to {MAX_PAIRS})"})
    if scaling is not None and (not isinstance(scaling, dict) or scaling.get("rope-type") != "llama3" or any(
            not isinstance(scaling.get(key), (int, float)) or isinstance(scaling.get(key), bool)
            or abs(scaling[key]) > 1e300 for key in LLAMA3_KEYS)):
        return ServedArtifact(path, "genie", (), "qai-hub-models (Genie)", (GENIE_RULE,), engine={
            **engine, "refused": f"{where}'s rope-scaling {_short(scaling)} is not llama3's block, the one this audit "
                                 "models (a VLM's mrope block needs the host's positions)"})
    if scaling is not None:
        _check_llama3(scaling, where, file)
    served = ServedTable(where, "inv_freq", genie_inv_freq(float(theta), pairs, scaling), "float32", magnitude=1.0)
    return ServedArtifact(path, "genie", (served,), "qai-hub-models (Genie)", (GENIE_RULE,), engine=engine)


MAX_PAIRS = 1 << 15
"""The most rotary pairs a ``pos-id-dim`` / ``rope-dim`` may state (a head of 65536 channels)."""


def _check_llama3(scaling: dict[str, Any], where: str, path: str) -> None:
    """llama3's block as its smoothing can use it: factor, low and original positive, high above low."""
    factor, low, high, original = (float(scaling[key]) for key in LLAMA3_KEYS)
    problems = [(name, value, valid) for name, value, valid, ok in (
        ("factor", factor, "a number > 0", factor > 0), ("low-freq-factor", low, "a number > 0", low > 0),
        ("high-freq-factor", high, f"a number > low-freq-factor ({low:g})", high > low),
        ("original-max-position-embeddings", original, "a number > 0", original > 0)) if not ok]
    if problems:
        name, value, valid = problems[0]
        raise ArgumentError("served", f"{path}: {where} rope-scaling.{name} is {value:g}; llama3's smoothing needs "
                            f"{valid}")


class GenieRules(Rules):
    """Genie's run-time rules: one table at every length up to the context size, magnitude 1."""

    def __init__(self, artifact: ServedArtifact) -> None:
        self.artifact = artifact

    def comparisons(self, table: RopeTable, served: ServedTable) -> list[tuple[str, RopeTable]] | None:
        """A seq-len-dependent declaration must hold at every length Genie serves its one table."""
        if table.switch_at is None:
            return None
        size = self.artifact.engine.get("context_size")
        longest = int(size) if isinstance(size, int) and size > table.switch_at else 2 * table.switch_at
        return [(f"seq_len <= {table.switch_at}", table), (f"seq_len {longest}", table.at(longest))]

    def candidates(self, table: RopeTable, served: ServedTable) -> Iterator[Candidate]:
        """Plain RoPE at the file's rope-theta over its pairs (the theta cast to an int, another layer type's base)."""
        theta = self.artifact.engine.get("rope_theta")
        if isinstance(theta, (int, float)) and float(theta) != table.geometry.theta:
            yield Candidate(f"plain RoPE at Genie's rope-theta {theta:g} (declared {table.geometry.theta:g})",
                            plain_inv_freq(float(theta), table.rotary_dim, len(table.inv_freq)))


def judge_genie(model: ModelRope, artifact: ServedArtifact, scope: AuditScope) -> Judgement:
    """Genie's one table against every layer type (it has one table for all layers)."""
    if scope.layer_type is None and len(model.tables) > 1:
        artifact = _for_every_layer_type(model, artifact)
    return judge_tables(model, artifact, scope, GenieRules(artifact))


def _for_every_layer_type(model: ModelRope, artifact: ServedArtifact) -> ServedArtifact:
    """Genie serves its table to every layer: one copy per layer type, each judged against that type."""
    import attrs

    tables = tuple(attrs.evolve(table, layer_type=name) for table in artifact.tables for name in model.tables)
    return attrs.evolve(artifact, tables=tables)
