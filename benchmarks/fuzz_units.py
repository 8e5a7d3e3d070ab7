"""Fuzz the unit-file parser (and what reads its values) for as many cases as asked.

The generators and the property are the tests' (``tests/facts/systemd/fuzzing.py``): arbitrary bytes,
bytes of the syntax's own characters, files assembled from hostile lines, mutated copies of the
Debian test image's unit files, 1 MiB lines and long continuation chains. The parser must never
raise, must keep its promises (sizes, line numbers, stripped keys and values) and must answer each
case within ``--seconds``; word splitting, specifiers, ``Exec…=`` commands and time spans may only
raise their documented errors. Anything else is a crash: it is counted under its signature and the
run goes on. Case N is ``make_case(Random(f"{seed}:{N}"), corpus)``, so any crash is reproducible.

With ``--systemctl`` the cases (but the 1 MiB ones, which take systemctl seconds each) are also
written, 500 at a time, as the unit files of one tree, and every state the index gives must be the
one ``systemctl --root=TREE list-unit-files`` gives; a difference is counted like a crash.

Run: .venv/bin/python benchmarks/fuzz_units.py [--cases 250000] [--seed 0] [--jobs 1] [--root IMAGE]
     [--systemctl]
Prints the cases run (by kind), the unique crash signatures with a count and one example each, the
slowest case and the elapsed time. Exit status 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, for tests.facts.systemd.fuzzing


def default_root() -> Path | None:
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    root = Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg / "imagelint-tests")) / "bookworm"
    return root if (root / "usr/lib/systemd/system").is_dir() else None


Result = tuple[int, Counter[str], Counter[str], dict[str, str], float]


def run(first: int, count: int, seed: str, seconds: float, root: str | None, systemctl: bool) -> Result:
    """Cases ``first`` .. ``first + count - 1``: (cases, kinds, crash counts, examples, slowest).

    A case still running after twice its time bound is stopped (SIGALRM) and counted as too slow."""
    from tests.facts.systemd.fuzzing import (
        SLOW_FOR_SYSTEMCTL,
        Case,
        ParserProblem,
        check_case,
        load_corpus,
        make_case,
        signature,
        systemctl_mismatches,
    )

    def stop(signum: int, frame: object) -> None:
        raise ParserProblem("too slow (stopped)", f"still running after {2 * seconds:.0f} s")

    signal.signal(signal.SIGALRM, stop)

    corpus = load_corpus(Path(root) if root else None)
    kinds: Counter[str] = Counter()
    crashes: Counter[str] = Counter()
    examples: dict[str, str] = {}
    slowest = 0.0
    batch: list[tuple[int, Case]] = []

    def compare() -> None:
        with tempfile.TemporaryDirectory(prefix="imagelint-fuzz-units-") as tmp:
            for position, why in systemctl_mismatches(Path(tmp), [case for _, case in batch]):
                index, case = batch[position]
                sig = f"differs from systemctl ({case.kind}): {why}"
                crashes[sig] += 1
                examples.setdefault(sig, f"case {index} ({len(case.data)} bytes): {case.data[:160]!r}")
        batch.clear()

    for index in range(first, first + count):
        case = make_case(random.Random(f"{seed}:{index}"), corpus)
        kinds[case.kind] += 1
        if systemctl and case.kind not in SLOW_FOR_SYSTEMCTL:
            batch.append((index, case))
            if len(batch) == 500:
                compare()
        started = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, 2 * seconds)
        try:
            check_case(case.data, seconds)
        except Exception as exc:  # every crash is a finding of the fuzzer, not the end of the run
            sig = signature(exc)
            crashes[sig] += 1
            examples.setdefault(
                sig, f"case {index} ({case.kind}, {len(case.data)} bytes): {case.data[:160]!r}"
            )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        slowest = max(slowest, time.perf_counter() - started)
    if batch:
        compare()
    return count, kinds, crashes, examples, slowest


def _job(args: tuple[int, int, str, float, str | None, bool]) -> Result:
    return run(*args)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=250_000, help="cases to run (default 250000)")
    parser.add_argument("--seed", default="0", help="run seed (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--seconds", type=float, default=5.0, help="time bound of one case (default 5)")
    parser.add_argument("--root", type=Path, default=default_root(), help="image whose unit files to mutate")
    parser.add_argument("--systemctl", action="store_true", help="also compare states with systemctl --root")
    args = parser.parse_args()
    root = str(args.root) if args.root else None
    started = time.perf_counter()
    jobs = max(1, args.jobs)
    share = -(-args.cases // jobs)
    chunks = [
        (i * share, min(share, args.cases - i * share), args.seed, args.seconds, root, args.systemctl)
        for i in range(jobs)
        if args.cases - i * share > 0
    ]
    if jobs == 1:
        results = [_job(chunks[0])] if chunks else []
    else:
        with multiprocessing.Pool(jobs) as pool:
            results = pool.map(_job, chunks)
    total = 0
    kinds: Counter[str] = Counter()
    crashes: Counter[str] = Counter()
    examples: dict[str, str] = {}
    slowest = 0.0
    for count, k, c, e, s in results:
        total += count
        kinds.update(k)
        crashes.update(c)
        for sig, example in e.items():
            examples.setdefault(sig, example)
        slowest = max(slowest, s)
    elapsed = time.perf_counter() - started
    import imagelint

    print(f"imagelint: {Path(imagelint.__file__).parent}  corpus: {root or 'built-in seeds only'}")
    against = "; states compared with systemctl" if args.systemctl else ""
    print(f"cases run: {total:,} (seed {args.seed}, {jobs} job(s){against})")
    print("by kind: " + ", ".join(f"{kind} {n:,}" for kind, n in sorted(kinds.items())))
    print(f"unique crash signatures: {len(crashes)} ({sum(crashes.values()):,} crashing cases)")
    for sig, n in crashes.most_common():
        print(f"  {n:7,}  {sig}\n           e.g. {examples[sig]}")
    print(f"slowest case: {slowest * 1000:.0f} ms")
    print(f"elapsed: {elapsed:.1f} s ({total / elapsed:,.0f} cases/s)")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
