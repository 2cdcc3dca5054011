"""Derive llama.cpp's RoPE rules for every architecture from its source, and write them to
``core/artifacts/formats/gguf/llama_cpp_rules.json`` (read by :mod:`ropekit.artifacts.formats.gguf.llama_cpp`).

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcpp
    tar xzf /tmp/lcpp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcpp
    python scripts/llama_cpp_rules.py --llama-cpp-src /tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp

(``ROPEKIT_LLAMA_CPP_SRC`` may name the folder instead; ``--check`` compares with the committed file
and writes nothing.) Every fact is read from the source and cited by file and line:

* the architecture names (``LLM_ARCH_NAMES`` in ``src/llama-arch.cpp``) and the class each is built
  with (``llama_model_mapping`` in ``src/llama-model.cpp``; the class's file in ``src/models/``,
  its parent class in ``src/models/models.h``);
* the rope type (``llama_model_rope_type``: NONE, NORM, NEOX, MROPE, IMROPE, or MROPE chosen by
  ``use_mrope()``, i.e. when the file's ``rope.dimension_sections`` give two non-zero sections);
* the loader's rules (``load_arch_hparams``): the SWA pattern (``load_swa_pattern``) and when it
  is turned on, the base and scale SWA layers start from, the YaRN keys read and their defaults,
  the ``yarn_log_multiplier`` divisor, the NoPE step, granite's ``rope.scaling.finetuned`` switch,
  whether ``rope.dimension_sections`` is required; the common loader's n_rot check;
* the graph's rules: every ``ggml_rope_ext`` / ``ggml_rope_multi`` call, its arguments (frequency
  factors, n_rot, base, scale, YaRN and magnitude arguments) and the condition it sits under
  (NoPE steps, SWA-only rotation, plain SWA layers, ``use_mrope``).

Anything in those places that the rules ropekit applies do not cover is *not modelled*: the
architecture is then written with a refusal that cites the line (``modelled: false``), never with
guessed rules. A few facts are not llama.cpp's source but its converter's (what
``convert_hf_to_gguf.py`` never writes) or a reviewer's reading of a line the parser cannot
judge: those live in :data:`OVERRIDES`, each with a snippet the generator checks is still at the
line it names (a stale override fails the run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "artifacts" / "formats" / "gguf" / "llama_cpp_rules.json"
SOURCE = "llama.cpp as vendored in llama-cpp-python 0.3.36"
COMMAND = "python scripts/llama_cpp_rules.py --llama-cpp-src LLAMA_CPP_DIR"

_NO_BASE = "rope.freq_base (llama.cpp serves 10000)"
_NO_SCALING = "rope.scaling.* (any declared scaling is served plain)"

# Facts that are not in llama.cpp's runtime source. ``not_written``: what the converter
# (convert_hf_to_gguf.py) never writes for the architecture, so llama.cpp's default applies; the
# audit names it when a declaration differs. ``reviewed``: a source line the parser flags, read by
# hand; the snippet must still be in the file (``file``) or the run fails.
OVERRIDES: dict[str, dict[str, Any]] = {
    "gemma": {"not_written": [_NO_BASE, _NO_SCALING]},
    "stablelm": {"not_written": [_NO_BASE, _NO_SCALING]},
    "gptneox": {"not_written": [_NO_BASE, _NO_SCALING]},
    "command-r": {"not_written": ["rope.scaling.type is written as none: scale 1"]},
    "smollm3": {"not_written": ["no_rope_layers (llama.cpp drops RoPE on every 4th layer, (il + 1) % 4 == 0)"]},
    "llama4": {"not_written": ["no_rope_layers (llama.cpp: every 4th layer, or the last one when "
                               "attention.sliding_window is 0)"]},
    "gemma2": {"not_written": [_NO_BASE, _NO_SCALING, "sliding_window_pattern (2)"]},
    "gemma3": {"not_written": ["sliding_window_pattern (llama.cpp: 5 sliding, 1 global)",
                               "the sliding layers' scaling (scale 1)"]},
    "gpt-oss": {"not_written": ["yarn truncate (ggml always truncates the correction range)"]},
    "cohere2": {"not_written": ["sliding_window_pattern (4)", "rope.scaling.type is written as none: scale 1"]},
}

_HEAD = re.compile(r"^(\s*)")


class Source:
    """One llama.cpp checkout: its files, read once, with line lookups."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.texts: dict[str, str] = {}

    def text(self, rel: str) -> str:
        if rel not in self.texts:
            self.texts[rel] = (self.root / rel).read_text(encoding="utf-8")
        return self.texts[rel]

    def line_of(self, rel: str, offset: int) -> int:
        return self.text(rel).count("\n", 0, offset) + 1

    def cite(self, rel: str, offset: int) -> str:
        return f"{rel}:{self.line_of(rel, offset)}"


def _body(text: str, start: int) -> tuple[int, int]:
    """The span of the brace block that opens at or after ``start``."""
    open_at = text.index("{", start)
    depth = 0
    for index in range(open_at, len(text)):
        depth += text[index] == "{"
        depth -= text[index] == "}"
        if depth == 0:
            return open_at, index + 1
    raise ValueError("unbalanced braces")


def _strip_comments(text: str) -> str:
    """``text`` with // and /* */ comments blanked (offsets and line numbers kept)."""
    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.S)


def _args(text: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose ``(`` is at ``open_paren``, and the offset after ``)``."""
    depth, current, out = 0, "", []
    for index in range(open_paren, len(text)):
        char = text[index]
        if char in "([{":
            depth += 1
            if depth == 1:
                continue
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                out.append(" ".join(current.split()))
                return out, index + 1
        if char == "," and depth == 1:
            out.append(" ".join(current.split()))
            current = ""
            continue
        current += char
    raise ValueError("unbalanced call")


def architectures(src: Source) -> list[tuple[str, str, str]]:
    """(enum, name, citation) for every ``LLM_ARCH_NAMES`` entry but UNKNOWN."""
    rel = "src/llama-arch.cpp"
    text = src.text(rel)
    found = []
    for match in re.finditer(r"\{\s*(LLM_ARCH_\w+),\s*\"([^\"]+)\"\s*\}", text):
        if match.group(1) != "LLM_ARCH_UNKNOWN":
            found.append((match.group(1), match.group(2), src.cite(rel, match.start())))
    return found


def _switch_cases(src: Source, rel: str, function: str) -> list[tuple[list[str], str, int]]:
    """(case labels, the statement they lead to, its offset) in ``function``'s switch."""
    text = _strip_comments(src.text(rel))
    start = text.index(function)
    begin, end = _body(text, start)
    body = text[begin:end]
    out: list[tuple[list[str], str, int]] = []
    labels: list[str] = []
    for match in re.finditer(r"case\s+(LLM_ARCH_\w+)\s*:|return\b([^;]*);|\bif\s*\(", body):
        if match.group(1):
            labels.append(match.group(1))
        elif labels:
            statement = match.group(0) if match.group(2) is None else match.group(2).strip()
            out.append((labels, statement, begin + match.start()))
            labels = []
    return out


def rope_types(src: Source) -> dict[str, tuple[str, str]]:
    """enum -> (rope type, citation) from ``llama_model_rope_type``."""
    rel = "src/llama-model.cpp"
    simple = {"LLAMA_ROPE_TYPE_NONE": "none", "LLAMA_ROPE_TYPE_NORM": "norm", "LLAMA_ROPE_TYPE_NEOX": "neox",
              "LLAMA_ROPE_TYPE_MROPE": "mrope", "LLAMA_ROPE_TYPE_IMROPE": "imrope"}
    conditional = re.compile(r"model->hparams\.use_mrope\(\)\s*\?\s*LLAMA_ROPE_TYPE_MROPE\s*:\s*(LLAMA_ROPE_TYPE_\w+)")
    out = {}
    for labels, statement, offset in _switch_cases(src, rel, "llama_rope_type llama_model_rope_type("):
        if statement in simple:
            kind = simple[statement]
        elif (match := conditional.fullmatch(statement)) and match.group(1) in simple:
            kind = f"{simple[match.group(1)]}|mrope"
        else:
            kind = f"unparsed: {statement}"
        for label in labels:
            out[label] = (kind, src.cite(rel, offset))
    return out


def classes(src: Source) -> dict[str, tuple[str, str]]:
    """enum -> (class, citation) from ``llama_model_mapping``."""
    rel = "src/llama-model.cpp"
    out = {}
    for labels, statement, offset in _switch_cases(src, rel, "llama_model_mapping("):
        match = re.fullmatch(r"new\s+(llama_model_\w+)\(params\)", statement)
        if match:
            for label in labels:
                out[label] = (match.group(1), src.cite(rel, offset))
    return out


def parents(src: Source) -> dict[str, str]:
    text = src.text("src/models/models.h")
    return {match.group(1): match.group(2) for match in
            re.finditer(r"^struct\s+(llama_model_\w+)\s*:\s*public\s+(llama_model_\w+)", text, flags=re.M)}


def graph_aliases(src: Source) -> dict[str, str]:
    """class -> the class whose graph it builds (``using graph = llama_model_X::graph;`` in models.h)."""
    text = src.text("src/models/models.h")
    out = {}
    for match in re.finditer(r"^struct\s+(llama_model_\w+)\s*:[^{]*\{(.*?)^\};", text, flags=re.M | re.S):
        alias = re.search(r"using\s+graph\s*=\s*(llama_model_\w+)::graph\s*;", match.group(2))
        if alias:
            out[match.group(1)] = alias.group(1)
    return out


def class_file(src: Source, cls: str) -> str | None:
    for path in sorted((src.root / "src" / "models").glob("*.cpp")):
        rel = f"src/models/{path.name}"
        if re.search(rf"\b{cls}::", src.text(rel)):
            return rel
    return None


def common_head_rot(src: Source) -> tuple[set[str], str]:
    """The architectures whose common loader refuses an n_rot other than the head size."""
    rel = "src/llama-model.cpp"
    text = src.text(rel)
    match = re.search(r"if\s*\(((?:\s*(?:\|\|)?\s*arch\s*==\s*LLM_ARCH_\w+)+)\s*\)\s*\{\s*if\s*\(hparams\.n_rot_full\s*"
                      r"!=\s*hparams\.n_embd_head_k_full\)", text)
    assert match, "the common loader's n_rot check moved"
    return set(re.findall(r"LLM_ARCH_\w+", match.group(1))), src.cite(rel, match.start())


# --- one architecture -----------------------------------------------------------------------------------------------

_ROPE_CALL = re.compile(r"\b(ggml_rope_ext|ggml_rope_multi)\s*\(")
_RELEVANT_HPARAMS = re.compile(r"LLM_KV_ROPE_\w+|LLM_KV_ATTENTION_SLIDING_WINDOW\w*|hparams\.(?:rope_\w+|n_rot\w*|"
                               r"yarn_\w+|n_no_rope_layer_step|swa_type|is_swa_impl)\b|load_swa_pattern|"
                               r"set_swa_pattern|rope_finetuned")


class Derivation:
    """The rules of one architecture, read from its class's files; ``unmodelled`` collects what ropekit cannot apply."""

    def __init__(self, src: Source, name: str, enum: str, kind: str, files: list[str], hparams: tuple[str, int, int]
                 | None, head_rot: bool) -> None:
        self.src, self.name, self.enum, self.kind, self.files = src, name, enum, kind, files
        self.hparams_span = hparams
        self.unmodelled: list[str] = []
        self.cites: dict[str, list[str]] = {}
        self.rules: dict[str, Any] = {"head_rot": head_rot}
        reviewed = OVERRIDES.get(name, {}).get("reviewed", [])
        self.reviewed = {(entry["file"], " ".join(entry["snippet"].split())) for entry in reviewed}

    def cite(self, fact: str, rel: str, offset: int) -> None:
        self.cites.setdefault(fact, []).append(self.src.cite(rel, offset))

    def refuse(self, rel: str, offset: int, what: str) -> None:
        self.unmodelled.append(f"{what} ({self.src.cite(rel, offset)})")

    # the loader ------------------------------------------------------------------------------------------------------

    def loader(self) -> None:
        rules = self.rules
        if self.hparams_span is None:
            return
        rel, begin, end = self.hparams_span
        text = _strip_comments(self.src.text(rel))
        body = text[begin:end]
        known: list[tuple[int, int]] = []

        def find(pattern: str) -> re.Match[str] | None:
            match = re.search(pattern, body)
            if match:
                known.append((begin + match.start(), begin + match.end()))
            return match

        def find_all(pattern: str) -> list[re.Match[str]]:
            matches = list(re.finditer(pattern, body))
            known.extend((begin + m.start(), begin + m.end()) for m in matches)
            return matches

        swa_on = find_all(r"hparams\.swa_type\s*=\s*LLAMA_SWA_TYPE_(STANDARD|CHUNKED)\s*;")
        find_all(r"hparams\.swa_type\s*=\s*LLAMA_SWA_TYPE_NONE\s*;")
        pattern = find(r"load_swa_pattern\(ml,\s*(\d+)\s*(?:,\s*(true|false)\s*)?\)\s*;")
        find_all(r"(?:const\s+bool\s+found_swa\s*=\s*)?ml\.get_key\(LLM_KV_ATTENTION_SLIDING_WINDOW,\s*hparams\.n_swa"
                 r"(?:,\s*(?:true|false))?\)\s*;")
        if swa_on:
            if pattern is None:
                self.refuse(rel, begin + swa_on[0].start(), "SWA turned on without load_swa_pattern")
                return
            self.cite("swa", rel, begin + pattern.start())
            swa: dict[str, Any] = {"pattern": int(pattern.group(1)), "dense_first": pattern.group(2) == "true"}
            swa["when"] = self._swa_when(rel, text, begin + pattern.start())
            if swa["when"] is None:
                self.refuse(rel, begin + pattern.start(), "SWA turned on under a condition ropekit does not model")
                return
            base = find(r"hparams\.rope_freq_base_train_swa\s*=\s*hparams\.rope_freq_base_train\s*;")
            swa["base"] = "global" if base else "default"
            scale = find(r"hparams\.rope_freq_scale_train_swa\s*=\s*(hparams\.rope_freq_scale_train|1\.0f?)\s*;")
            swa["scale"] = "global" if scale and scale.group(1).startswith("hparams") else "one"
            for match in (base, scale):
                if match:
                    self.cite("swa", rel, begin + match.start())
            if not find(r"ml\.get_key\(LLM_KV_ROPE_FREQ_BASE_SWA,\s*hparams\.rope_freq_base_train_swa,\s*false\)\s*;"):
                self.refuse(rel, begin + pattern.start(), "SWA layers without the optional rope.freq_base_swa key")
            rules["swa"] = swa
        else:
            no_swa = find(r"hparams\.set_swa_pattern\(\s*1\s*\)\s*;")  # period 1: no layer is SWA (phi3)
            if pattern or (no_swa is None and "set_swa_pattern" in body):
                self.refuse(rel, begin, "an SWA pattern without SWA turned on")
        # YaRN keys read by this loader, and their defaults
        fast = find(r"hparams\.yarn_beta_fast\s*=\s*([0-9.]+)f?\s*;")
        slow = find(r"hparams\.yarn_beta_slow\s*=\s*([0-9.]+)f?\s*;")
        reads = {key: find(rf"ml\.get_key\(LLM_KV_ROPE_SCALING_{key},\s*hparams\.\w+,\s*false\)\s*;")
                 for key in ("YARN_BETA_FAST", "YARN_BETA_SLOW", "YARN_EXT_FACTOR", "YARN_ATTN_FACTOR")}
        if reads["YARN_BETA_FAST"] or reads["YARN_BETA_SLOW"]:
            if not (reads["YARN_BETA_FAST"] and reads["YARN_BETA_SLOW"]):
                self.refuse(rel, begin, "only one of the YaRN beta keys read")
            rules["betas"] = [float(fast.group(1)) if fast else 32.0, float(slow.group(1)) if slow else 1.0]
            self.cite("betas", rel, begin + (reads["YARN_BETA_FAST"] or reads["YARN_BETA_SLOW"]).start())  # type: ignore[union-attr]
        elif fast or slow:
            self.refuse(rel, begin + (fast or slow).start(), "a YaRN beta default set without the key read")  # type: ignore[union-attr]
        if reads["YARN_EXT_FACTOR"] or reads["YARN_ATTN_FACTOR"]:
            if not (reads["YARN_EXT_FACTOR"] and reads["YARN_ATTN_FACTOR"]):
                self.refuse(rel, begin, "only one of yarn_ext_factor / yarn_attn_factor read")
            rules["ext_attn"] = True
            self.cite("ext_attn", rel, begin + (reads["YARN_EXT_FACTOR"] or reads["YARN_ATTN_FACTOR"]).start())  # type: ignore[union-attr]
        log_mul = find(r"(?:if\s*\()?ml\.get_key\(LLM_KV_ROPE_SCALING_YARN_LOG_MUL,\s*hparams\.rope_yarn_log_mul,\s*"
                       r"false\)\)?\s*[;{]?")
        if log_mul:
            divisor = find(r"hparams\.rope_yarn_log_mul\s*/=\s*([0-9.]+)f?\s*;")
            rules["log_mul"] = float(divisor.group(1)) if divisor else 1.0
            self.cite("log_mul", rel, begin + log_mul.start())
        step = find(r"hparams\.n_no_rope_layer_step\s*=\s*(\d+|hparams\.n_layer\(\))\s*;")
        if step:
            self.cite("rotates", rel, begin + step.start())
            rules["nope_step"] = step.group(1)
        finetuned = find(r"bool\s+rope_finetuned\s*=\s*true\s*;")
        if finetuned:
            find(r"ml\.get_key\(LLM_KV_ROPE_SCALING_FINETUNED,\s*rope_finetuned,\s*false\)\s*;")
            find(r"hparams\.rope_finetuned\s*=\s*rope_finetuned\s*;")
            if find(r"std::fill\(hparams\.rope_pattern\.begin\(\),\s*hparams\.rope_pattern\.end\(\),\s*rope_finetuned\)"
                    r"\s*;"):
                rules["finetuned"] = True
                self.cite("rotates", rel, begin + finetuned.start())
        sections = find(r"ml\.get_key_or_arr\(LLM_KV_ROPE_DIMENSION_SECTIONS,\s*hparams\.rope_sections,\s*4,\s*"
                        r"(true|false)\)\s*;")
        if sections:
            rules["sections_required"] = sections.group(1) == "true"
            self.cite("mrope", rel, begin + sections.start())
        for match in _RELEVANT_HPARAMS.finditer(body):
            offset = begin + match.start()
            if not any(start <= offset < stop for start, stop in known):
                line = self._line(rel, offset)
                self.refuse(rel, offset, f"the loader's `{line}`")

    def _swa_when(self, rel: str, text: str, offset: int) -> str | None:
        """When the loader turns SWA on: the condition of the block holding ``offset``."""
        head = text.rfind("\n", 0, offset)
        indent = len(_HEAD.match(text[head + 1:]).group(1))  # type: ignore[union-attr]
        if indent <= 4:
            return "always"
        before = text[:head]
        for line in reversed(before.splitlines()):
            stripped = line.strip()
            if not stripped:
                continue
            width = len(line) - len(line.lstrip())
            if width < indent:
                if re.fullmatch(r"if\s*\(found_swa\s*&&\s*hparams\.n_swa\s*>\s*0\)\s*\{", stripped):
                    return "window"
                if re.fullmatch(r"if\s*\(hparams\.n_layer\(\)\s*==\s*64\)\s*\{", stripped):
                    return "layers64"
                if stripped == "} else {":
                    opened = re.findall(r"if\s*\(([^{}]*)\)\s*\{", before)
                    if opened and " ".join(opened[-1].split()) == "found_swa && hparams.n_swa == 0":
                        return "llama4"
                return None
        return None

    def _line(self, rel: str, offset: int) -> str:
        text = self.src.text(rel)
        start = text.rfind("\n", 0, offset) + 1
        stop = text.find("\n", offset)
        return " ".join(text[start:stop].split())

    # the graph -------------------------------------------------------------------------------------------------------

    def graph(self, spans: list[tuple[str, int, int]]) -> None:
        """Every rope call of the graph code, judged together: which layers rotate, with which arguments."""
        found: list[tuple[str | None, str, str, str, int]] = []  # (condition, kind, signature, file, offset)
        for rel, begin, end in spans:
            text = _strip_comments(self.src.text(rel))
            for match in _ROPE_CALL.finditer(text, begin, end):
                args, after = _args(text, match.end() - 1)
                call = " ".join(text[match.start():after].split())
                if (rel, call) in self.reviewed:
                    self.cite("reviewed", rel, match.start())
                    continue
                condition = self._condition(text, match.start())
                live = self._evaluate(text, match.start(), condition)
                if live is False:  # a branch for another architecture sharing this class
                    continue
                if live is True:
                    condition = None
                judged = self._call(rel, text, match.start(), match.group(1), args)
                if judged is not None:
                    found.append((condition, judged, f"{match.group(1)}{args[3:]}", rel, match.start()))
        other = re.compile(r"\b(ggml_rope(?!_ext\b|_multi\b|_set_offset\b)\w*|build_rope\w*)\s*\(")
        for rel, begin, end in spans:
            text = _strip_comments(self.src.text(rel))
            for match in other.finditer(text, begin, end):  # a rope op whose arguments ropekit does not read
                self.refuse(rel, match.start(), f"{match.group(1)} (a rope op ropekit does not model)")
        for rel, begin, end in spans:
            text = _strip_comments(self.src.text(rel))
            match = re.compile(r"GGML_ASSERT\(n_embd_head\s*==\s*n_rot\)").search(text, begin, end)
            if match and self._defined(text, match.start(), r"n_embd_head\s*=\s*hparams\.n_embd_head_[kv]\(\)"):
                self.rules["head_rot"] = True
                self.cite("head_rot", rel, match.start())
                break
        if not found:
            if not self.unmodelled:
                self.unmodelled.append(f"no ggml_rope_ext / ggml_rope_multi call in {', '.join(self.files)} (RoPE "
                                       "applied through code ropekit does not read)")
            return
        self._conditions(found)

    def _evaluate(self, text: str, offset: int, condition: str | None) -> bool | None:
        """A condition on which architecture is loaded (``is_ocr = model.arch == LLM_ARCH_X``), decided for this one."""
        if condition is None:
            return None
        name = condition.lstrip("!")
        match = re.search(rf"bool\s+{re.escape(name)}\s*=\s*model\.arch\s*==\s*(LLM_ARCH_\w+)\s*;",
                          text[max(0, offset - 8000):offset])
        if not match:
            return None
        value = match.group(1) == self.enum
        return not value if condition.startswith("!") else value

    def _conditions(self, found: list[tuple[str | None, str, str, str, int]]) -> None:
        rules = self.rules
        by_condition: dict[str | None, set[str]] = {}
        signatures: dict[str | None, set[str]] = {}
        for condition, kind, signature, _, _ in found:
            by_condition.setdefault(condition, set()).add(kind)
            signatures.setdefault(condition, set()).add(signature)
        for condition, kind, _, rel, offset in found:
            if condition in (None, "use_mrope", "!use_mrope"):
                if kind == "plain":
                    self.refuse(rel, offset, "a rope call with scale 1, no YaRN and magnitude 1 on every layer")
                continue
            if condition == "is_swa":
                if kind == "plain":
                    rules["plain_swa"] = True
                elif "!is_swa" not in by_condition:
                    rules["rotates"] = "swa"
                continue
            if condition == "!is_swa":
                if "is_swa" not in by_condition:
                    self.refuse(rel, offset, "RoPE applied only on the non-SWA layers")
                elif kind == "plain":
                    self.refuse(rel, offset, "plain RoPE on the non-SWA layers")
                continue
            if condition == "use_rope":
                rule = self._use_rope(self.src.text(rel), offset)
                if rule is None:
                    self.refuse(rel, offset, "a use_rope rule ropekit does not model")
                else:
                    rules["rotates"] = rule
                continue
            if condition == "hparams.has_rope(il)" and rules.get("finetuned"):
                rules["rotates"] = "finetuned"
                continue
            other = condition[1:] if condition.startswith("!") else f"!{condition}"
            if other in by_condition and signatures[other] == signatures[condition] and kind != "plain":
                continue  # both branches rotate alike (deepseek2's is_mla): not a per-layer rule
            self.refuse(rel, offset, f"RoPE applied only when {condition}")

    def _call(self, rel: str, text: str, offset: int, function: str, args: list[str]) -> str | None:
        """``plain`` or ``normal`` for a call ropekit models; None (and a refusal) for one it does not."""
        rules = self.rules
        multi = function == "ggml_rope_multi"
        expected = 14 if multi else 13
        if len(args) != expected:
            self.refuse(rel, offset, f"{function} with {len(args)} arguments")
            return None
        self.cite("graph", rel, offset)
        before = len(self.unmodelled)
        pos, factors, n_rot = args[2], args[3], args[4]
        rest = args[6:] if multi else args[5:]
        mode, n_ctx_orig, base, scale, ext, attn, beta_fast, beta_slow = rest
        if multi:
            rules["multi"] = True
        if pos != "inp_pos":
            self.refuse(rel, offset, f"{function} at positions {pos!r}, not the token positions")
        if factors == "rope_factors" and self._defined(text, offset, r"rope_factors\s*=\s*model\.get_rope_factors\("
                                                       r"cparams,\s*il\)"):
            rules["factors"] = True
        elif factors not in ("nullptr", "NULL"):
            self.refuse(rel, offset, f"{function} with frequency factors {factors!r}")
        if n_rot == "n_rot_l" and self._defined(text, offset, r"n_rot_l\s*=\s*hparams\.n_rot\(il\)"):
            rules["n_rot_per_layer"] = True
        elif n_rot != "n_rot":
            self.refuse(rel, offset, f"{function} rotating {n_rot!r} channels (not the file's n_rot)")
        if mode not in ("rope_type", "hparams.rope_type"):
            self.refuse(rel, offset, f"{function} with mode {mode!r} (not the architecture's rope type)")
        if (n_ctx_orig, beta_fast, beta_slow) != ("n_ctx_orig", "beta_fast", "beta_slow"):
            self.refuse(rel, offset, f"{function} with its own YaRN context or betas "
                                     f"{n_ctx_orig, beta_fast, beta_slow}")
        if (scale, ext, attn) in (("1.0", "0.0", "1.0"), ("1.0f", "0.0f", "1.0f")):
            if base != "freq_base":
                self.refuse(rel, offset, f"{function} with scale 1 and base {base!r}")
            return None if len(self.unmodelled) > before else "plain"
        if (ext, attn) != ("ext_factor", "attn_factor"):
            self.refuse(rel, offset, f"{function} with its own YaRN or magnitude arguments {ext, attn}")
        if (base, scale) == ("freq_base_l", "freq_scale_l"):
            if self._defined(text, offset, r"freq_base_l\s*=\s*model\.get_rope_freq_base\s*\(cparams,\s*il\)") and \
                    self._defined(text, offset, r"freq_scale_l\s*=\s*model\.get_rope_freq_scale\s*\(cparams,\s*il\)"):
                rules["per_layer"] = True
            else:
                self.refuse(rel, offset, f"{function} with a per-layer base/scale ropekit does not recognise")
        elif (base, scale) != ("freq_base", "freq_scale"):
            self.refuse(rel, offset, f"{function} with base/scale {base, scale}")
        if multi and not self.kind.endswith("mrope"):
            self.refuse(rel, offset, f"{function} for rope type {self.kind}")
        return None if len(self.unmodelled) > before else "normal"

    @staticmethod
    def _defined(text: str, offset: int, pattern: str) -> bool:
        return re.search(pattern, text[max(0, offset - 6000):offset]) is not None

    def _condition(self, text: str, offset: int) -> str | None:
        """The innermost ``if (...)`` (or its ``else``) the call at ``offset`` sits in; None when there is none
        (``if constexpr`` template switches are looked through)."""
        depth, index = 0, offset
        while index > 0:
            index -= 1
            char = text[index]
            if char == "}":
                depth += 1
            elif char == "{" and depth:
                depth -= 1
            elif char == "{":
                head = text[:index].rstrip()
                if head.endswith("else"):
                    inner = self._if_before(text, text.rfind("}", 0, len(head)))
                    return None if inner is None else f"!{inner}"
                if head.endswith(")"):
                    opened = self._open_paren(head, len(head) - 1)
                    keyword = head[:opened].rstrip()
                    if re.search(r"\bif\s*constexpr$", keyword):
                        continue
                    if re.search(r"\bif$", keyword):
                        return " ".join(head[opened + 1:-1].split())
                    return None  # a function, loop or lambda body
                if not re.search(r"[=,(]$", head) and not head.endswith("{") and not head.endswith(";") \
                        and not head.endswith("}"):
                    return None
        return None

    @staticmethod
    def _open_paren(text: str, close: int) -> int:
        depth = 0
        for index in range(close, -1, -1):
            depth += text[index] == ")"
            depth -= text[index] == "("
            if depth == 0:
                return index
        return 0

    def _if_before(self, text: str, close: int) -> str | None:
        """The condition of the ``if (...) { ... }`` block whose ``}`` is at ``close``."""
        depth = 0
        for index in range(close, -1, -1):
            depth += text[index] == "}"
            depth -= text[index] == "{"
            if depth == 0:
                head = text[:index].rstrip()
                if not head.endswith(")"):
                    return None
                opened = self._open_paren(head, len(head) - 1)
                if not re.search(r"\bif$", head[:opened].rstrip()):
                    return None
                return " ".join(head[opened + 1:-1].split())
        return None

    def _use_rope(self, text: str, offset: int) -> str | None:
        window = text[max(0, offset - 6000):offset]
        found = list(re.finditer(r"const\s+bool\s+use_rope\s*=\s*([^;]+);", window))
        if not found:
            return None
        rule = " ".join(found[-1].group(1).split())
        step = self.rules.get("nope_step")
        if rule == "(il + 1) % hparams.n_no_rope_layer_step != 0" and step == "4":
            return "smollm3"
        if rule == "hparams.n_no_rope_layer_step > 0 && (il + 1) % hparams.n_no_rope_layer_step != 0" and \
                step == "hparams.n_layer()" and self.rules.get("swa", {}).get("when") == "llama4":
            return "llama4"
        if rule == "hparams.is_swa(il) || hparams.swa_type == LLAMA_SWA_TYPE_NONE":
            return "swa"
        return None


def _spans(src: Source, rel: str, cls: str) -> tuple[tuple[str, int, int] | None, list[tuple[str, int, int]]]:
    """(load_arch_hparams's body, the graph code's spans) of ``cls`` in ``rel``."""
    text = _strip_comments(src.text(rel))
    hparams = None
    graph: list[tuple[str, int, int]] = []
    skip: list[tuple[int, int]] = []
    for method in ("load_arch_hparams", "load_arch_tensors"):
        match = re.search(rf"\b{cls}::{method}\s*\(", text)
        if match:
            begin, end = _body(text, match.end())
            skip.append((match.start(), end))
            if method == "load_arch_hparams":
                hparams = (rel, begin, end)
    cursor = 0
    for start, stop in sorted(skip):
        graph.append((rel, cursor, start))
        cursor = stop
    graph.append((rel, cursor, len(text)))
    return hparams, graph


def hybrids(src: Source) -> dict[str, str]:
    """enum -> citation for the architectures ``llm_arch_is_hybrid`` or ``llm_arch_is_recurrent`` lists."""
    rel = "src/llama-arch.cpp"
    out = {}
    for function in ("bool llm_arch_is_hybrid(", "bool llm_arch_is_recurrent("):
        for labels, statement, offset in _switch_cases(src, rel, function):
            if statement == "true":
                out.update(dict.fromkeys(labels, src.cite(rel, offset)))
    return out


def derive(src: Source) -> dict[str, Any]:
    """Every architecture's entry: its derived rules, or the refusal naming what ropekit cannot model."""
    kinds, mapping, parent_of, hybrid = rope_types(src), classes(src), parents(src), hybrids(src)
    aliases = graph_aliases(src)
    head_rot, head_rot_cite = common_head_rot(src)
    entries: dict[str, Any] = {}
    for enum, name, name_cite in architectures(src):
        kind, kind_cite = kinds.get(enum, ("unlisted", "src/llama-model.cpp"))
        entry: dict[str, Any] = {"enum": enum, "rope_type": kind,
                                 "cites": {"name": [name_cite], "rope_type": [kind_cite]}}
        entries[name] = entry
        if kind == "none":
            entry["refusal"] = f"llama.cpp applies no RoPE for {name} (llama_model_rope_type: LLAMA_ROPE_TYPE_NONE)"
            continue
        if enum in hybrid:
            entry["cites"]["hybrid"] = [hybrid[enum]]
            entry["refusal"] = (f"audit cannot model llama.cpp's {name}: a hybrid of attention and recurrent layers "
                                "(llm_arch_is_hybrid), whose per-layer plan ropekit does not rebuild")
            continue
        if enum not in mapping:
            entry["refusal"] = f"llama.cpp builds no model for {name} (not in llama_model_mapping)"
            continue
        cls, cls_cite = mapping[enum]
        entry["cites"]["class"] = [cls_cite]
        chain = [cls]
        while chain[-1] in parent_of and parent_of[chain[-1]] != "llama_model_base":
            chain.append(parent_of[chain[-1]])
        files: list[str] = []
        hparams = None
        graphs: list[tuple[str, int, int]] = []
        for member in chain:  # the loader: the nearest class that defines load_arch_hparams
            rel = class_file(src, member)
            if rel is not None and hparams is None:
                hparams = _spans(src, rel, member)[0]
                if hparams is not None:
                    files.append(rel)
        owner = next((aliases[member] for member in chain if member in aliases), None)
        if owner is None:
            owner = next((member for member in chain if (rel := class_file(src, member)) is not None and
                          re.search(rf"\b{member}::graph\b", _strip_comments(src.text(rel)))), None)
        owner_file = class_file(src, owner) if owner else None
        if owner_file is not None:
            graphs = _spans(src, owner_file, owner)[1]  # type: ignore[arg-type]
            if owner_file not in files:
                files.append(owner_file)
        entry["source"] = files[0] if files else None
        if not files:
            entry["refusal"] = f"ropekit found no source file for {cls}"
            continue
        derivation = Derivation(src, name, enum, kind, files, hparams, enum in head_rot)
        if enum in head_rot:
            derivation.cites["head_rot"] = [head_rot_cite]
        if kind.startswith("unparsed") or kind == "unlisted":
            derivation.unmodelled.append(f"llama_model_rope_type gives {kind}")
        derivation.loader()
        derivation.graph(graphs)
        rules = _rules(derivation, kind)
        entry["cites"].update(derivation.cites)
        if derivation.unmodelled:
            entry["refusal"] = (f"audit cannot model llama.cpp's {name} ({entry['source']}): "
                                + "; ".join(dict.fromkeys(derivation.unmodelled)))
        else:
            entry["rules"] = rules
    return {"source": SOURCE, "command": COMMAND, "architectures": dict(sorted(entries.items()))}


def _rules(derivation: Derivation, kind: str) -> dict[str, Any]:
    """The fields of ``ropekit.artifacts.formats.gguf.llama_cpp.Arch`` from what was derived."""
    found = derivation.rules
    rules: dict[str, Any] = {"neox": kind.startswith("neox") or kind in ("mrope", "imrope")}
    if found.get("factors"):
        rules["factors"] = True
    swa = found.get("swa")
    if swa is not None:
        rules["swa"] = {**swa, "per_layer": bool(found.get("per_layer")), "plain": bool(found.get("plain_swa"))}
        if found.get("plain_swa"):
            rules["swa"]["per_layer"] = False
    elif found.get("per_layer") or found.get("plain_swa"):
        derivation.unmodelled.append("a per-layer SWA base in the graph without SWA layers in the loader")
    if found.get("rotates"):
        rules["rotates"] = found["rotates"]
    elif found.get("nope_step") or found.get("finetuned"):
        derivation.unmodelled.append("a NoPE rule in the loader that the graph does not apply as ropekit models it")
    for key in ("betas", "ext_attn", "log_mul", "head_rot", "n_rot_per_layer"):
        if found.get(key):
            rules[key] = found[key]
    if kind in ("mrope", "imrope"):
        rules["mrope"] = "sections" if kind == "mrope" else "interleaved"
        if not found.get("sections_required"):
            derivation.unmodelled.append("rope.dimension_sections optional for a multimodal rope type")
    elif kind.endswith("|mrope"):
        rules["mrope_optional"] = True  # ggml_rope_multi when the file's sections turn use_mrope() on
        if found.get("sections_required") is not False:
            derivation.unmodelled.append("use_mrope() without rope.dimension_sections read as optional")
    if found.get("multi") and not kind.endswith("mrope"):
        derivation.unmodelled.append("ggml_rope_multi for a rope type without sections")
    not_written = OVERRIDES.get(derivation.name, {}).get("not_written")
    if not_written:
        rules["not_written"] = list(not_written)
    return rules


def check_overrides(src: Source) -> list[str]:
    """Overrides that name an architecture llama.cpp lacks, or a reviewed snippet no longer in its file."""
    names = {name for _, name, _ in architectures(src)}
    stale = [f"OVERRIDES names {name!r}, not an architecture of this source" for name in OVERRIDES if name not in names]
    for name, override in OVERRIDES.items():
        for entry in override.get("reviewed", []):
            text = " ".join(_strip_comments(src.text(entry["file"])).split())
            if " ".join(entry["snippet"].split()) not in text:
                stale.append(f"{name}: reviewed snippet no longer in {entry['file']}: {entry['snippet']}")
    return stale


def build(root: Path) -> dict[str, Any]:
    src = Source(root)
    stale = check_overrides(src)
    if stale:
        raise SystemExit("stale overrides:\n" + "\n".join(stale))
    return derive(src)


def render(data: dict[str, Any]) -> str:
    """The committed form: one architecture per line, so a diff names the architectures that changed."""
    lines = ["{", f'"source": {json.dumps(data["source"])},', f'"command": {json.dumps(data["command"])},',
             '"architectures": {']
    items = list(data["architectures"].items())
    for index, (name, entry) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        lines.append(f"{json.dumps(name)}: {json.dumps(entry, sort_keys=True)}{comma}")
    lines += ["}", "}", ""]
    return "\n".join(lines)


DOC = ROOT / "docs" / "audit.md"
BEGIN = "<!-- generated by scripts/llama_cpp_rules.py: do not edit -->"
END = "<!-- end of the generated table -->"


def _summary(rules: dict[str, Any]) -> str:
    """One cell: the rules of a modelled architecture, in words."""
    parts = []
    if rules.get("factors"):
        parts.append("frequency factors (rope_freqs / rope_factors_*)")
    swa = rules.get("swa")
    if swa:
        when = {"always": "", "window": " when attention.sliding_window > 0", "layers64": " at 64 layers only",
                "llama4": " unless attention.sliding_window is 0"}[swa["when"]]
        if swa["plain"]:
            own = "global base, scale 1, no YaRN, magnitude 1"
        elif swa["per_layer"]:
            base = "10000" if swa["base"] == "default" else "the global base"
            own = f"freq_base_swa (default {base}), scale {'1' if swa['scale'] == 'one' else 'global'}"
        else:
            own = "the global set"
        parts.append(f"SWA pattern {swa['pattern']}{' dense first' if swa['dense_first'] else ''}{when}: {own}")
    rotates = {"swa": "only SWA layers rotate", "smollm3": "NoPE where (il + 1) % 4 == 0",
               "llama4": "NoPE where (il + 1) % 4 == 0 (step n_layer when attention.sliding_window is 0)",
               "finetuned": "no RoPE when rope.scaling.finetuned is false"}
    if rules.get("rotates"):
        parts.append(rotates[rules["rotates"]])
    if rules.get("betas"):
        parts.append(f"reads the YaRN betas (default {rules['betas'][0]:g}/{rules['betas'][1]:g})")
    if rules.get("ext_attn"):
        parts.append("reads yarn_ext_factor, yarn_attn_factor")
    if rules.get("log_mul"):
        parts.append(f"yarn_log_multiplier / {rules['log_mul']:g}")
    if rules.get("head_rot"):
        parts.append("n_rot must equal the head size")
    if rules.get("n_rot_per_layer"):
        parts.append("n_rot(il) per layer")
    if rules.get("mrope"):
        parts.append(f"{'interleaved' if rules['mrope'] == 'interleaved' else 'consecutive'} sections "
                     "(rope.dimension_sections required)")
    if rules.get("mrope_optional"):
        parts.append("MROPE (consecutive sections, NEOX pairs) when rope.dimension_sections turn use_mrope() on")
    return "; ".join(parts) or "one global set on every layer"


def markdown(data: dict[str, Any]) -> str:
    """The table docs/audit.md carries: every architecture, its rope type, and its rules or refusal."""
    rows = [BEGIN, "", "| architecture | rope type (llama_model_rope_type) | source | rules, or why refused |",
            "|---|---|---|---|"]
    for name, found in data["architectures"].items():
        kind = f"{found['rope_type'].replace('|', ', or ')} ({found['cites']['rope_type'][0]})"
        source = found.get("source") or ""  # llama.cpp's paths, not this repository's: no backticks
        if "rules" in found:
            cell = _summary(found["rules"])
        else:
            refusal = found["refusal"]
            prefix = f"audit cannot model llama.cpp's {name}"
            if refusal.startswith(prefix):
                refusal = refusal[len(prefix):].split(": ", 1)[-1]
            cell = "**refused**: " + refusal
        rows.append(f"| {name} | {kind} | {source} | {cell.replace('|', '/')} |")
    modelled = sum("rules" in found for found in data["architectures"].values())
    rows += ["", f"{len(data['architectures'])} architectures, {modelled} with rules ({data['source']}).", "", END]
    return "\n".join(rows)


def page_with(doc: str, data: dict[str, Any]) -> str:
    """``doc`` with its generated table replaced by the one ``data`` gives."""
    start, stop = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + markdown(data) + doc[stop:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-cpp-src", default=os.environ.get("ROPEKIT_LLAMA_CPP_SRC"),
                        help="llama.cpp's source folder (vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist)")
    parser.add_argument("--check", action="store_true", help="compare with the committed file; write nothing")
    args = parser.parse_args()
    if not args.llama_cpp_src:
        parser.error("name llama.cpp's source with --llama-cpp-src or ROPEKIT_LLAMA_CPP_SRC")
    text = render(build(Path(args.llama_cpp_src)))
    if args.check:
        doc = DOC.read_text(encoding="utf-8")
        same = OUT.read_text(encoding="utf-8") == text and doc == page_with(doc, json.loads(text))
        print("up to date" if same else f"stale: regenerate with {COMMAND}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    DOC.write_text(page_with(DOC.read_text(encoding="utf-8"), json.loads(text)), encoding="utf-8")
    data = json.loads(text)["architectures"]
    modelled = sorted(name for name, entry in data.items() if "rules" in entry)
    print(f"{len(data)} architectures, {len(modelled)} with rules, written to {OUT.relative_to(ROOT)} and "
          "docs/audit.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
