"""Producer: llama.cpp's ``convert_hf_to_gguf.py`` (from the llama-cpp-python 0.3.36 sdist; only
``convert_hf_to_gguf.py``, ``conversion/`` and ``gguf-py/`` are used, nothing is compiled) -> ``model.gguf``, for every
``llama.cpp`` case of ``cases.py``. Converters that name the vocab's pre-tokenizer by hashing how it splits a test text
run through ``BPE_RUNNER``, which names it "gpt-2" and changes nothing else. The per-layer cases (Gemma-3, SmolLM3,
Llama-4, gpt-oss, StableLM, GPT-NeoX) record transformers' own per-layer plan in the manifest
(``measured.transformers_layers``/``transformers_tables``); tests/artifacts/test_gguf_rules.py holds what llama.cpp
serves per layer. Requirements and conventions: ``common.py``.

Run from the repository root::

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcpp
    tar xzf /tmp/lcpp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcpp
    python scripts/artifacts/gguf_convert.py --llama-cpp-src /tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp
    # or: LLAMA_CPP_SRC=... python scripts/artifacts/gguf_convert.py [--only NAME ...] [--keep-work DIR]
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from cases import Case
from common import build, build_checkpoint, lcpp_version, run
from gguf_measure import measure

# The converter names a GPT-2-style vocab's pre-tokenizer by hashing how it splits a test text and refuses a vocab it
# does not recognise (a tiny trained one never is). This runner names it "gpt-2" and changes nothing else: the
# pre-tokenizer name is vocab metadata, RoPE keys are written as usual.
BPE_RUNNER = '''
import runpy, sys
src = sys.argv[1]
sys.path[:0] = [src, src + "/gguf-py"]
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = [src + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
'''


def produce_gguf(case: Case, ckpt: Path, work: Path, dest: Path, lcpp: Path) -> list[str]:
    out = work / "gguf" / f"{case.name}.gguf"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(lcpp / "gguf-py"))  # the gguf-py bundled with the converter
    args = [str(ckpt), "--outfile", str(out), *case.args]
    if case.bpe:
        cmd = [sys.executable, "-c", BPE_RUNNER, str(lcpp), *args]
    else:
        cmd = [sys.executable, str(lcpp / "convert_hf_to_gguf.py"), *args]
    run(cmd, cwd=lcpp, env=env)
    shutil.copy(out, dest / "model.gguf")
    prefix = ["python", "-c", "BPE_RUNNER", "LLAMA_CPP_SRC"] if case.bpe else ["python", "convert_hf_to_gguf.py"]
    return [*prefix, "HF_DIR", "--outfile", "model.gguf", *case.args]


def make(case: Case, sp_model: Path, work: Path, dest: Path, lcpp: Path | None) -> tuple[list[str], str]:
    """The converter run on the case's checkpoint."""
    if lcpp is None:
        raise RuntimeError("llama.cpp sources not given (--llama-cpp-src / LLAMA_CPP_SRC)")
    ckpt = build_checkpoint(case, sp_model, work)
    return produce_gguf(case, ckpt, work, dest, lcpp), f"convert_hf_to_gguf.py from {lcpp_version(lcpp)}"


def main(argv: list[str] | None = None) -> int:
    return build("llama.cpp", make, measure, argv, description=__doc__.split("\n")[0], needs_llama_cpp=True)


if __name__ == "__main__":
    sys.exit(main())
