"""Repair what an engine serves: a corrected copy of an ONNX pack or a GGUF, never the original.

One function, :func:`plan_repair`, decides what a repair would rewrite, or why the format or the
engine's own rules cannot serve the declaration; ``ropekit audit``'s ``repairable`` is that
decision, and ``ropekit repair`` carries it out. Every repair is then proved: the copy is written
into a hidden temporary folder beside ``--out``, read back by the readers ``ropekit audit`` uses and
audited; only a copy that audits as ``match`` is moved into place (never over an existing path),
and the moved copy is audited again. Anything else leaves no output behind.

- **ONNX packs** (onnxruntime-genai): every ``cos_cache``/``sin_cache`` (float32 or float16; the
  longrope ``If`` branches' small/large caches; DirectML's concatenated cache; Gemma-3's
  global/local) recomputed from the declared table with the same shape, dtype, one column per
  pair and the attention factor multiplied in; a NoPE layer's rotation removed (its
  ``RotaryEmbedding`` nodes bypassed, or its attention op's ``do_rotary`` turned off), a layer
  wired to the other layer type's cache rewired; external data rewritten into one file beside the
  copy (``<out>.data`` for a single ``.onnx``); every other file copied.
- **GGUF**: the keys and rope tensors that make llama.cpp's rules serve the declared tables (base,
  scaling keys, ``rope.scaling.attn_factor``, ``rope_freqs`` factors where the architecture's
  loader creates the tensor, the sliding layers' ``rope.freq_base_swa``), every other key and
  tensor copied byte for byte. The planned keys are first run through the reader ``audit`` uses;
  where llama.cpp's own rule cannot serve the declaration whatever the file says (ggml always
  truncates yarn's correction range, a loader that ignores the file's betas, longrope regimes
  chosen by n_ctx, which layers rotate or share a set), the repair is refused naming the rule.
- Rotary kept in a graph, ExecuTorch programs and array dumps are refused by name.
"""

from __future__ import annotations

from ..fixing import VERDICTS, NotRepairableError, RepairPlan, RepairResult
from .decide import annotate, plan_repair, repairability
from .run import repair

__all__ = ["VERDICTS", "NotRepairableError", "RepairPlan", "RepairResult", "annotate", "plan_repair", "repair",
           "repairability"]
