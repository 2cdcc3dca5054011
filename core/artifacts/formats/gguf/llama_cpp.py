"""llama.cpp's RoPE rules per architecture and per layer, as its source states them.

The rules are *derived* from the llama.cpp copy vendored in the llama-cpp-python 0.3.36 sdist by
``scripts/llama_cpp_rules.py`` and committed as ``llama_cpp_rules.json`` beside this module (one
entry per ``general.architecture`` llama.cpp names, each with the source lines it was read from);
``tests/artifacts/test_llama_cpp_rules.py`` regenerates it when the source is at hand. The file is
read on the first GGUF audit, never at import, and only the architecture asked for becomes an
:class:`Arch`. The places read
(:data:`LLAMA_CPP_SOURCE`): ``src/llama-model.cpp`` (common hparams, ``llama_model_rope_type``,
``get_rope_freq_base``/``get_rope_freq_scale``: SWA layers use the ``_swa`` values),
``src/models/<arch>.cpp`` (each architecture's ``load_arch_hparams`` and graph: which layers call
``ggml_rope_ext`` and with which base, scale and frequency factors), ``src/llama-hparams.cpp``
(``set_swa_pattern``, ``n_rot(il)``) and ``src/llama-context.cpp`` (the YaRN magnitude). The
multimodal architectures (qwen2vl, qwen3vl, qwen3vlmoe) call ``ggml_rope_multi`` with
``rope.dimension_sections``; which pair follows which of the four position streams is
``ggml_mrope_cache_init`` in ``ggml/src/ggml-cpu/ops.cpp`` (:func:`mrope_streams`).

:func:`rules_for` gives the :class:`Arch` of an architecture whose rules were derived; any other
architecture is refused by name (:func:`unknown_architecture`: the rule ropekit cannot model, or
that llama.cpp applies no RoPE, or that it does not know the name), never judged by Llama's
rules. :func:`layer_plan` lays out, for one file, which layers are SWA and which rotate.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs

__all__ = ["LLAMA_CPP_SOURCE", "MROPE_SOURCE", "RULES_FILE", "Arch", "LayerPlan", "Swa", "entry", "layer_plan",
           "modelled", "mrope_streams", "rules_for", "unknown_architecture"]

LLAMA_CPP_SOURCE = "llama.cpp as vendored in llama-cpp-python 0.3.36"
"""The source the rules were derived from."""

RULES_FILE = Path(__file__).with_name("llama_cpp_rules.json")
"""The derived rules (``scripts/llama_cpp_rules.py`` writes it)."""

Rotates = Literal["all", "swa", "llama4", "smollm3", "finetuned"]


@attrs.frozen
class Swa:
    """How an architecture lays out its sliding-window (SWA) layers and what they rotate with.

    ``pattern``/``dense_first`` are ``load_swa_pattern``'s defaults (a file's
    ``attention.sliding_window_pattern``, a bool array or a period, overrides them); ``when`` says
    when the loader turns SWA on (``always``; ``window``: ``attention.sliding_window`` > 0;
    ``layers64``: exaone4 at 64 layers; ``llama4``: unless ``attention.sliding_window`` is 0).
    ``base`` is the SWA base before ``rope.freq_base_swa`` is read: ``default`` (hparams' 10000)
    or ``global`` (copied from ``rope.freq_base``); ``scale`` is ``one`` or ``global``.
    ``per_layer``: the graph passes SWA layers the SWA base/scale; otherwise every layer rotates
    with the global ones. ``plain``: SWA layers rotate with scale 1, no YaRN and magnitude 1 (olmo2).
    """

    pattern: int
    dense_first: bool = False
    when: Literal["always", "window", "layers64", "llama4"] = "always"
    base: Literal["default", "global"] = "global"
    scale: Literal["one", "global"] = "global"
    per_layer: bool = True
    plain: bool = False


@attrs.frozen
class Arch:
    """llama.cpp's RoPE rules for one architecture.

    ``neox`` is ``llama_model_rope_type`` (NEOX: pairs ``i, i + n_rot/2``; NORM: adjacent pairs,
    the converter permuting Q/K to match); ``factors``: the graph passes ``rope_freqs`` /
    ``rope_factors_long|short`` (otherwise they are ignored); ``rotates``: which layers apply RoPE
    (``all``, ``swa`` only, llama4's or smollm3's NoPE step, or ``finetuned``: granite's
    ``rope.scaling.finetuned`` switch); ``betas``: the YaRN beta defaults when the loader reads
    the file's beta keys (``None``: 32/1 whatever the file says); ``ext_attn``: it reads
    ``yarn_ext_factor`` and ``yarn_attn_factor``; ``log_mul``: it reads ``yarn_log_multiplier``,
    divided by this; ``head_rot``: the loader refuses an ``n_rot`` other than the head size;
    ``not_written``: RoPE facts the converter never writes (what llama.cpp then assumes);
    ``mrope``: the graph rotates with ``ggml_rope_multi`` over ``rope.dimension_sections``
    (``sections``: LLAMA_ROPE_TYPE_MROPE, consecutive sections; ``interleaved``:
    LLAMA_ROPE_TYPE_IMROPE), NEOX pairs, the key required by the loader; ``mrope_optional``: the
    rope type is MROPE only when the file's ``rope.dimension_sections`` turn ``use_mrope()`` on
    (its first two sections non-zero; glm4, glm4moe), else ``neox`` decides; ``n_rot_per_layer``:
    the graph rotates ``hparams.n_rot(il)`` channels (SWA layers ``rope.dimension_count_swa``);
    ``cites``: the source lines each fact was read from.
    """

    name: str
    source: str
    neox: bool
    factors: bool = False
    swa: Swa | None = None
    rotates: Rotates = "all"
    betas: tuple[float, float] | None = None
    ext_attn: bool = False
    log_mul: float | None = None
    head_rot: bool = False
    not_written: tuple[str, ...] = ()
    mrope: Literal["sections", "interleaved"] | None = None
    mrope_optional: bool = False
    n_rot_per_layer: bool = False
    cites: tuple[str, ...] = ()


@attrs.frozen
class LayerPlan:
    """Per layer of one file: SWA or not, rotating or not, and why (one line per layer)."""

    swa: tuple[bool, ...]
    rotates: tuple[bool, ...]
    why: tuple[str, ...]
    swa_on: bool
    notes: tuple[str, ...] = ()


@functools.cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    return data


def entry(arch: str) -> dict[str, Any] | None:
    """The committed entry for ``arch`` (its rope type, cited source lines, and rules or refusal), or None."""
    found: dict[str, Any] | None = _data()["architectures"].get(arch)
    return found


def modelled() -> list[str]:
    """Every architecture whose rules were derived, sorted."""
    return sorted(name for name, found in _data()["architectures"].items() if "rules" in found)


@functools.lru_cache(maxsize=64)
def rules_for(arch: str) -> Arch | None:
    """The derived :class:`Arch` of ``arch``, or None when it is refused (:func:`unknown_architecture` says why)."""
    found = entry(arch)
    if found is None or "rules" not in found:
        return None
    rules = dict(found["rules"])
    swa = rules.pop("swa", None)
    betas = rules.pop("betas", None)
    not_written = rules.pop("not_written", ())
    cites = tuple(f"{fact}: {', '.join(lines)}" for fact, lines in sorted(found["cites"].items()))
    return Arch(arch, found["source"], swa=None if swa is None else Swa(**swa),
                betas=None if betas is None else (float(betas[0]), float(betas[1])), not_written=tuple(not_written),
                cites=cites, **rules)


MROPE_SOURCE = ("ggml_mrope_cache_init (ggml/src/ggml-cpu/ops.cpp; rope_multi in ggml-cuda/rope.cu agrees), text "
                "positions from llm_graph_input_pos::set_input (src/llama-graph.cpp)")
"""Where :func:`mrope_streams` and the text-token positions were read."""


def mrope_streams(composition: str, sections: tuple[int, ...], pairs: int) -> list[int]:
    """Per rotary pair, the position stream ggml's ``ggml_rope_multi`` rotates it by (0 temporal,
    1 height, 2 width, 3 the fourth stream), from the file's four ``sections``.

    ``sector = pair % sum(sections)``; consecutive (MROPE): ``sector < s0`` temporal, then
    ``s1`` height, ``s2`` width pairs, the rest the fourth stream; interleaved (IMROPE): sectors
    ``1 mod 3`` below ``3 * s1`` height, ``2 mod 3`` below ``3 * s2`` width, ``0 mod 3`` below
    ``3 * s0`` temporal, every other sector the fourth stream. For a text token llama.cpp sets the
    first three streams to its position and the fourth to 0 (a pair on it does not rotate).
    """
    total = sum(sections)
    s0, s1, s2 = sections[0], sections[1], sections[2]
    streams = []
    for pair in range(pairs):
        sector = pair % total
        if composition == "interleaved":
            if sector % 3 == 1 and sector < 3 * s1:
                stream = 1
            elif sector % 3 == 2 and sector < 3 * s2:
                stream = 2
            elif sector % 3 == 0 and sector < 3 * s0:
                stream = 0
            else:
                stream = 3
        else:
            stream = 0 if sector < s0 else 1 if sector < s0 + s1 else 2 if sector < s0 + s1 + s2 else 3
        streams.append(stream)
    return streams


def unknown_architecture(arch: str) -> str:
    """The refusal for an architecture without derived rules: the rule ropekit cannot model (cited), or that
    llama.cpp does not know the name; and what to do instead."""
    found = entry(arch)
    advice = "dump the tables the forward uses and audit those"
    if found is None:
        return (f"audit does not know llama.cpp's rules for architecture {arch!r}: {LLAMA_CPP_SOURCE} has no such "
                f"architecture (it rebuilds {len(modelled())} architectures, listed in docs/audit.md); {advice}")
    return f"{found['refusal']} ({LLAMA_CPP_SOURCE}); {advice}"


Read = Callable[[str], Any]
"""Reads one ``{arch}.`` key (without the prefix): its value, or ``None`` when absent."""


def layer_plan(rules: Arch, n_layer: int, read: Read) -> LayerPlan:
    """Which of ``n_layer`` layers are SWA and which rotate, as ``rules``' loader and graph decide from the keys."""
    swa_on, swa, notes = _swa_layers(rules, n_layer, read)
    rotates: list[bool] = []
    why: list[str] = []
    for il in range(n_layer):
        on, reason = _rotates(rules, il, n_layer, swa_on, swa[il], read)
        rotates.append(on)
        why.append(reason)
    return LayerPlan(tuple(swa), tuple(rotates), tuple(why), swa_on, tuple(notes))


def _swa_layers(rules: Arch, n_layer: int, read: Read) -> tuple[bool, list[bool], list[str]]:
    spec = rules.swa
    off = [False] * n_layer
    if spec is None:
        return False, off, []
    window = read("attention.sliding_window")
    if spec.when == "window" and not (isinstance(window, int) and window > 0):
        return False, off, ["attention.sliding_window absent or 0: no sliding layers"]
    if spec.when == "layers64" and n_layer != 64:
        return False, off, [f"{rules.name} turns sliding layers on only at 64 layers (this file has {n_layer})"]
    if spec.when == "llama4" and window == 0:
        return False, off, ["attention.sliding_window is 0: no chunked layers, RoPE dropped on the last layer"]
    pattern = read("attention.sliding_window_pattern")
    if isinstance(pattern, list):
        flags = [bool(value) for value in pattern[:n_layer]] + [False] * max(0, n_layer - len(pattern))
        return True, flags, [f"attention.sliding_window_pattern: {sum(flags)} of {n_layer} layers sliding"]
    stated = isinstance(pattern, int) and not isinstance(pattern, bool)
    period = int(pattern) if stated else spec.pattern
    if spec.dense_first:
        flags = [period == 0 or il % period != 0 for il in range(n_layer)]
    else:
        flags = [period == 0 or il % period < period - 1 for il in range(n_layer)]
    source = "attention.sliding_window_pattern" if stated else f"{rules.name}'s default pattern"
    return True, flags, [f"{source} {period}: {sum(flags)} of {n_layer} layers sliding"]


def _rotates(rules: Arch, il: int, n_layer: int, swa_on: bool, is_swa: bool, read: Read) -> tuple[bool, str]:
    if rules.rotates == "swa":
        if not swa_on:
            return True, ""
        return (True, "") if is_swa else (False, f"{rules.name}: only sliding layers rotate ({rules.source})")
    if rules.rotates == "smollm3":
        on = (il + 1) % 4 != 0
        return on, "" if on else f"smollm3: RoPE dropped where (il + 1) % 4 == 0 ({rules.source})"
    if rules.rotates == "llama4":
        step = n_layer if read("attention.sliding_window") == 0 else 4
        on = step > 0 and (il + 1) % step != 0
        if on:
            return True, ""
        if step == n_layer:
            return False, (f"llama4: attention.sliding_window 0 sets n_no_rope_layer_step = n_layer ({n_layer}), so "
                           "(il + 1) % step == 0 drops RoPE on the last layer")
        return False, f"llama4: n_no_rope_layer_step 4, RoPE dropped where (il + 1) % 4 == 0 ({rules.source})"
    if rules.rotates == "finetuned":
        finetuned = read("rope.scaling.finetuned")
        on = finetuned is None or bool(finetuned)
        return on, "" if on else "granite: rope.scaling.finetuned is false, which turns RoPE off on every layer"
    return True, ""
