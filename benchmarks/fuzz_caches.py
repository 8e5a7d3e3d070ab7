"""Fuzz the cache readers (rule packs, audits, EBS blocks and listings) for as long as you like.

The cases and the property are those of the property tests (``tests/cache_fuzzing.py``): entries
planted in the cache directory (random bytes, genuine entries mutated or moved, guessed tags, under
any mode, as links, hard links or FIFOs) must be misses with the source read instead; payloads under
the user's own key must be read or missed without an exception; genuine entries must be hits;
nothing may block. Anything else is a crash; it is recorded and the run goes on.

Run: .venv/bin/python benchmarks/fuzz_caches.py [--cases 20000] [--seed 0]
Prints the cases run by reader, way and outcome, the unique crash signatures with a count and one
example each, and the elapsed time. Exit status 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _fuzzing import print_crashes


def main() -> None:
    from tests.cache_fuzzing import CacheProblem, check_case, make_case

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=int, default=10, help="a case running longer is a hang")
    args = parser.parse_args()
    started = time.monotonic()
    outcomes: Counter[tuple[str, str, str]] = Counter()
    crashes: Counter[str] = Counter()
    example: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="imagelint-fuzz-caches-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        for index in range(args.cases):
            case = make_case(random.Random(f"{args.seed}:{index}"))
            try:
                outcomes[case.reader, case.way, check_case(case, Path(tmp), args.seconds)] += 1
            except CacheProblem as exc:
                crashes[exc.signature] += 1
                example.setdefault(exc.signature, f"case {index}: {case} {exc}"[:400])
            except Exception as exc:  # a crash of the harness is a finding too
                sig = f"{type(exc).__name__}: {exc}"[:200]
                crashes[sig] += 1
                example.setdefault(sig, f"case {index}: {case}")
            if index % 500 == 0:
                print(
                    f"\r{index} cases, {len(crashes)} unique crash(es)", end="", file=sys.stderr, flush=True
                )
    print(file=sys.stderr)
    elapsed = time.monotonic() - started
    print(f"cases run: {sum(outcomes.values()) + sum(crashes.values())}")
    for (reader, way, outcome), n in sorted(outcomes.items()):
        print(f"  {reader:8s} {way:14s} {outcome:5s} {n:7d}")
    print_crashes(crashes, example)
    print(f"elapsed: {elapsed:.1f} s ({args.cases / elapsed:.0f} cases/s)")
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
