"""Start ``vllm.LLM`` on a local checkpoint and write each prompt's per-token prompt log-probabilities
as JSON: ``python tests/engines/vllm_serve.py CHECKPOINT OUT.json PROMPTS.json [MAX_MODEL_LEN]``.

Run in a subprocess by ``tests/engines/vllm_engine_check.py`` (a vLLM start is a process of its
own, with vLLM's engine and worker processes, as ``vllm serve`` runs it). Eager mode, float32,
seed 0. ``OUT.json`` is ``{"seconds": {"load": ..., "prompts": ...}, "logprobs": [[...], ...]}``:
for prompt ``p``, entry ``i`` is ``log P(p[i + 1] | p[: i + 1])``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    """Serve the prompts; 0 on success (a refused load raises, and the exit status is vLLM's)."""
    checkpoint, out, prompts_file = argv[:3]
    max_model_len = int(argv[3]) if len(argv) > 3 else None
    prompts: list[list[int]] = json.loads(Path(prompts_file).read_text())
    started = time.perf_counter()
    from vllm import LLM, SamplingParams

    llm = LLM(checkpoint, enforce_eager=True, dtype="float32", seed=0, max_model_len=max_model_len)
    loaded = time.perf_counter()
    outputs = llm.generate([{"prompt_token_ids": prompt} for prompt in prompts],
                           SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0), use_tqdm=False)
    logprobs: list[list[float]] = []
    for prompt, output in zip(prompts, outputs, strict=True):
        rows: Any = output.prompt_logprobs
        logprobs.append([float(rows[i][prompt[i]].logprob) for i in range(1, len(prompt))])
    done = time.perf_counter()
    written = Path(out).with_suffix(".partial")
    written.write_text(json.dumps({"seconds": {"load": loaded - started, "prompts": done - loaded},
                                   "logprobs": logprobs}))
    written.replace(out)  # whole or absent: the caller reads it even if vLLM's teardown then aborts
    return 0


if __name__ == "__main__":  # vLLM starts its engine with multiprocessing's spawn: guard the entry point
    sys.exit(main(sys.argv[1:]))
