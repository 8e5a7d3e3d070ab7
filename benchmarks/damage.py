"""Damage never passes, at scale: the seeded cases of ``tests/support_damage.py`` (the test runs a few
hundred), each a real audit of the bundled failing sample with one structure damaged.

Classes: inodes, extent headers and directory blocks of the ext4 filesystem (in a raw GPT disk and
in its qcow2 conversion), the partition table (MBR, GPT header, GPT entry), the bundle's tar headers,
and the objects of the sample's real journal (DATA payloads, object headers, ENTRY items) in all
three; corruptions: zeroed, bits flipped, random bytes, a count field set to a lying value.
Case N of seed S is ``make_case(S, N, corpus)`` whatever the number of workers: a defect replays.

Run: .venv/bin/python benchmarks/damage.py [--cases 10000] [--seed 0] [--workers 2] [--timeout 60]
Prints the cases per class and outcome, every defect (a pass, exit 2, a crash or timeout, changed
findings without an error) with its case, and the elapsed time. Exit status 1 when any case is a defect.
"""

from __future__ import annotations

import argparse
import multiprocessing
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, for tests.support_damage


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("the case took longer than --timeout")


def _worker(args: tuple[str, list[int], float]) -> list[tuple[int, str, str, str]]:
    """(case number, class, outcome, detail) of each case given, on this worker's own copies."""
    from tests.support_damage import DEFECTS, Work, build_corpus, make_case

    seed, numbers, timeout = args
    corpus = build_corpus()
    signal.signal(signal.SIGALRM, _alarm)
    out = []
    with tempfile.TemporaryDirectory(prefix="imagelint-damage-") as work_dir:
        work = Work(corpus, Path(work_dir))
        for number in numbers:
            case = make_case(seed, number, corpus)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                answer = work.run_case(case)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            detail = f"{case.label()}: {answer.detail}" if answer.outcome in DEFECTS else ""
            out.append((number, case.structure.cls, answer.outcome, detail))
    return out


def main() -> int:
    from tests.support_damage import CLASSES, DEFECTS, OUTCOMES, build_corpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one case may take")
    args = parser.parse_args()
    build_corpus()  # once, before the workers look for it
    started = time.monotonic()
    workers = range(args.workers)
    chunks = [(args.seed, list(range(w, args.cases, args.workers)), args.timeout) for w in workers]
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        results = [row for part in pool.map(_worker, chunks) for row in part]
    elapsed = time.monotonic() - started
    counts: Counter[tuple[str, str]] = Counter((cls, outcome) for _, cls, outcome, _ in results)
    print(f"cases: {len(results)} in {elapsed:.0f} s ({args.workers} workers, seed {args.seed!r})")
    width = max(len(o) for o in OUTCOMES)
    print(f"{'class':16} " + " ".join(f"{o:>{width}}" for o in OUTCOMES))
    for cls in CLASSES:
        print(f"{cls:16} " + " ".join(f"{counts[(cls, o)]:>{width}}" for o in OUTCOMES))
    defects = sorted((n, d) for n, _, outcome, d in results if outcome in DEFECTS)
    print(f"defects: {len(defects)}")
    for _, detail in defects[:50]:
        print(f"  {detail}")
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
