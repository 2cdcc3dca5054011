"""Coverage-guided fuzz campaigns on ropekit's readers and on ``load`` (``pip install -e ".[fuzz]"``: atheris).

    python scripts/fuzz.py gguf --seconds 600            # one target, ten minutes, one process
    python scripts/fuzz.py all --seconds 600             # every target in turn
    python scripts/fuzz.py gguf --replay                 # the committed reproducers, against the contract

Each target (``tests/fuzzing.py``: gguf, onnx, openvino, genie, pte, safetensors, npy, load) takes the bytes of one
file, puts them where the format reads them (beside a committed seed's other files) and runs the real reader,
audit and, for formats ropekit rewrites, repair. The corpus starts from the committed artifacts
(``tests/data/artifacts``) and the reproducers already found. An input that breaks the contract is not a crash for
libFuzzer: its signature (exception type and the innermost ropekit frame, or the promise broken) is recorded and
the smallest input per signature kept under ``--out`` (default ``fuzz-findings/<target>/``); copy the ones worth
keeping into ``tests/data/fuzz/<target>/``, where ``tests/artifacts/test_fuzz.py`` replays them. A hang or a memory
blow-up is libFuzzer's own finding (``-timeout``, ``-rss_limit_mb``): its input is written as ``timeout-*`` or
``oom-*`` under ``--out``. At the end, ``summary.json`` under ``--out`` holds the inputs run and the signatures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> int:
    import fuzzing

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=[*fuzzing.TARGETS, "all"])
    parser.add_argument("--seconds", type=int, default=600, help="campaign length per target (default 600)")
    parser.add_argument("--out", default="fuzz-findings", help="where findings and summaries go")
    parser.add_argument("--replay", action="store_true", help="run the committed reproducers and stop")
    parser.add_argument("--timeout", type=int, default=20, help="seconds one input may take (a hang)")
    parser.add_argument("--rss-limit-mb", type=int, default=3072, help="memory one process may use (a blow-up)")
    args = parser.parse_args()
    names = list(fuzzing.TARGETS) if args.target == "all" else [args.target]
    if args.replay:
        failures = 0
        for name in names:
            for path in fuzzing.reproducers(name):
                found = fuzzing.check(name, path.read_bytes())
                print(f"{name}/{path.name}: {found or 'holds'}")
                failures += found is not None
        return 1 if failures else 0
    if len(names) > 1:  # one target per process: libFuzzer owns the process it runs in
        for name in names:
            status = os.spawnv(os.P_WAIT, sys.executable, [sys.executable, __file__, name, "--seconds",
                                                           str(args.seconds), "--out", args.out])
            if status:
                return status
        return 0
    return campaign(names[0], args.seconds, Path(args.out) / names[0], args.timeout, args.rss_limit_mb)


def campaign(name: str, seconds: int, out: Path, timeout: int, rss_limit_mb: int) -> int:
    """One target for ``seconds``, in this process; findings under ``out``."""
    import atheris
    import fuzzing

    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus"
    corpus.mkdir(exist_ok=True)
    for data in [*fuzzing.seeds(name), *(path.read_bytes() for path in fuzzing.reproducers(name))]:
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
    with atheris.instrument_imports(include=["ropekit"]):
        import ropekit  # noqa: F401
        from ropekit.artifacts import audit, read  # noqa: F401
        from ropekit.artifacts.repair import run  # noqa: F401
        from ropekit.cli import output  # noqa: F401

        for data in fuzzing.seeds(name)[:2]:  # every module the target reaches, imported under instrumentation
            fuzzing.check(name, data)
    state = {"inputs": 0, "signatures": {}, "started": time.time()}
    summary = out / "summary.json"

    def save() -> None:
        summary.write_text(json.dumps({"target": name, "inputs": state["inputs"],
                                       "seconds": round(time.time() - state["started"]),
                                       "signatures": state["signatures"]}, indent=1) + "\n")

    def one_input(data: bytes) -> None:
        state["inputs"] += 1
        found = fuzzing.check(name, data)
        if found is not None:
            known = state["signatures"].get(found)
            if known is None or known["size"] > len(data):  # the smallest input per signature
                if known is not None:
                    (out / known["file"]).unlink(missing_ok=True)
                file = f"{hashlib.sha1(data).hexdigest()[:16]}"
                (out / file).write_bytes(data)
                state["signatures"][found] = {"file": file, "size": len(data), "count": (known or {}).get("count", 0)}
                print(f"\nropekit fuzz: {name}: {found} ({len(data)} bytes: {out / file})", flush=True)
            state["signatures"][found]["count"] += 1
        if state["inputs"] % 500 == 0:
            save()

    import atexit

    atexit.register(save)
    atheris.Setup([sys.argv[0], str(corpus), f"-max_total_time={seconds}", f"-timeout={timeout}",
                   f"-rss_limit_mb={rss_limit_mb}", f"-artifact_prefix={out}/", "-print_final_stats=1"], one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
