"""Fuzz the rule-pack and config loaders with hostile YAML, for as long as you like.

The generators and the property are those of the property tests (``tests/rulepacks/fuzzing.py``):
random YAML documents, packs and configs shaped like the real ones with hostile values, random
bytes, and mutated copies of the built-in packs and ``examples/sample.imagelint.yaml``. Every input
must load, or be refused with the documented error: an ImageLintError with exit code 2 and one line
naming file:line. Anything else (another exception, a traceback, a missing location, a case running
longer than ``--seconds``) is a crash; it is recorded and the run goes on.

Run: .venv/bin/python benchmarks/fuzz_yaml.py [--cases 250000] [--seed 0] [--jobs 1]
Prints the cases run, the unique crash signatures (exception and where, or the broken promise) with
a count and one example input each, and the elapsed time. Exit status 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _fuzzing import print_crashes


def signature(exc: BaseException) -> str:
    """Equal problems group together: the broken promise or the exception's type, and the innermost
    imagelint frame it was raised in."""
    from tests.rulepacks.fuzzing import YamlProblem, raised_at

    if isinstance(exc, YamlProblem):
        return exc.signature
    return f"{type(exc).__name__} at {raised_at(exc)}"


def run(first: int, count: int, seed: int, seconds: int) -> tuple[int, Counter[str], dict[str, str]]:
    """Cases ``first`` .. ``first + count - 1``; each is ``make_case(Random(f"{seed}:{index}"))``."""
    from tests.rulepacks.fuzzing import check_case, make_case

    crashes: Counter[str] = Counter()
    example: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="imagelint-fuzz-yaml-") as tmp:
        for index in range(first, first + count):
            case = make_case(random.Random(f"{seed}:{index}"))
            try:
                check_case(case, Path(tmp), seconds)
            except Exception as exc:  # every crash is a finding of the fuzzer, not the end of it
                sig = signature(exc)
                crashes[sig] += 1
                example.setdefault(sig, f"case {index} ({case.origin}, {case.kind}): {case.data[:300]!r}")
    return count, crashes, example


def _job(args: tuple[int, int, int, int]) -> tuple[int, Counter[str], dict[str, str]]:
    return run(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=250_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=20, help="a case running longer is a hang")
    args = parser.parse_args()
    started = time.monotonic()
    chunk = 1000
    parts = [(i, min(chunk, args.cases - i), args.seed, args.seconds) for i in range(0, args.cases, chunk)]
    crashes: Counter[str] = Counter()
    example: dict[str, str] = {}
    done = 0
    with multiprocessing.Pool(args.jobs) as pool:
        for count, found, first in pool.imap_unordered(_job, parts):
            done += count
            crashes.update(found)
            for sig, text in first.items():
                example.setdefault(sig, text)
            print(f"\r{done} cases, {len(crashes)} unique crash(es)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    elapsed = time.monotonic() - started
    print(f"cases run: {done}")
    print_crashes(crashes, example)
    print(f"elapsed: {elapsed:.1f} s ({done / elapsed:.0f} cases/s)")
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
