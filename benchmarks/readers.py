"""Time per artifact of each reader on the committed artifacts and on the campaign's hostile inputs (issue #46):
a bounded reader must refuse a lying file in about the time it reads an honest one.

    python benchmarks/readers.py [--rounds 20]

Prints, per target (tests/fuzzing.py), the median wall time of one read + audit of each committed seed, and of
the reproducers under tests/data/fuzz/<target>/ (each refused or judged by the contract).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: tests.fuzzing


def main() -> None:
    from tests import fuzzing

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'target':<12} {'inputs':>6} {'seeds ms (median)':>18} {'reproducers ms (median, max)':>30}")
    for name in fuzzing.TARGETS:
        rows = []
        for group in (fuzzing.seeds(name)[:3], [path.read_bytes() for path in fuzzing.reproducers(name)]):
            times = []
            for data in group:
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    fuzzing.check(name, data)
                    times.append((time.perf_counter() - start) * 1e3)
            rows.append(times)
        seeds, hostile = rows
        tail = f"{statistics.median(hostile):.2f}, {max(hostile):.2f}" if hostile else "-"
        print(f"{name:<12} {len(fuzzing.seeds(name)[:3]) + len(fuzzing.reproducers(name)):>6} "
              f"{statistics.median(seeds):>18.2f} {tail:>30}")


if __name__ == "__main__":
    main()
