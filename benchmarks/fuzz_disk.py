"""Fuzz the disk image opener with mutated headers of small real images, for as long as asked.

The corpus and the cases are the tests' (``tests/targets/disk/fuzzing.py``): qcow2, vmdk
(monolithicSparse and streamOptimized), vhdx, vhd, GPT, MBR, LVM (as root), ext4 and XFS images made
by the real tools, with seeded byte mutations and header fields set to lying values. Each case runs
``open_disk_file`` and a few reads in a forked child under ``RLIMIT_AS`` (1 GiB) and an alarm. A
refusal with the project's errors is an answer; any other exception, a death by signal or a timeout
is a crash, counted under its signature. Case N is ``make_case(seed, N, ...)``: any crash replays.

Run: .venv/bin/python benchmarks/fuzz_disk.py [--minutes 15 | --cases 5000] [--seed 0] [--timeout 20]
Prints the cases run (by image, by answer), the unique crashes with a count and one example each,
the slowest case, the peak RSS of a case and the elapsed time. Exit status 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout, for tests.targets.disk.fuzzing


def main() -> int:
    from tests.targets.disk.fuzzing import build_corpus, make_case, preload, prepare, run_case

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=0, help="stop after this many cases")
    parser.add_argument("--minutes", type=float, default=0.0, help="stop after this long")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds a case may take")
    parser.add_argument("--replay", type=int, help="run this case in this process and show its traceback")
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "imagelint-fuzz-disk")
    args = parser.parse_args()
    if not args.cases and not args.minutes:
        args.cases = 2000
    corpus = build_corpus(args.corpus)
    if args.replay is not None:
        return replay(args.seed, args.replay, corpus)
    preload()
    started = time.monotonic()
    deadline = started + args.minutes * 60 if args.minutes else float("inf")
    by_image: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    crashes: Counter[str] = Counter()
    examples: dict[str, str] = {}
    slowest = (0.0, "")
    peak = (0, "")
    with tempfile.TemporaryDirectory(prefix="imagelint-fuzz-work-") as work:
        copies, sizes = prepare(corpus, Path(work))
        n = 0
        while (not args.cases or n < args.cases) and time.monotonic() < deadline:
            case = make_case(args.seed, n, corpus, sizes)
            out = run_case(case, corpus[case.name], copies[case.name], args.timeout)
            label = f"case {n} ({case.name}, {case.kind}: {[(at, raw.hex()) for at, raw in case.patches]})"
            by_image[case.name] += 1
            answers[out.result] += 1
            if out.result == "crash":
                crashes[out.signature] += 1
                examples.setdefault(out.signature, label)
            slowest = max(slowest, (out.seconds, label))
            peak = max(peak, (out.maxrss_kib, label))
            n += 1
    elapsed = time.monotonic() - started
    print(f"cases: {n} in {elapsed:.0f} s (seed {args.seed!r}, timeout {args.timeout} s, RLIMIT_AS 1 GiB)")
    print("by image: " + ", ".join(f"{k} {v}" for k, v in sorted(by_image.items())))
    print("answers: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())))
    print(f"unique crashes: {len(crashes)}")
    for signature, count in crashes.most_common():
        print(f"  {count:6d}  {signature}\n          e.g. {examples[signature]}")
    print(f"slowest case: {slowest[0]:.2f} s, {slowest[1]}")
    print(f"peak RSS of a case: {peak[0] / 1024:.1f} MiB, {peak[1]}")
    return 1 if crashes else 0


def replay(seed: str, number: int, corpus: dict[str, Path]) -> int:
    """One case, in this process: its patches applied to a copy, its traceback shown if it crashes."""
    import shutil

    from tests.targets.disk.fuzzing import exercise, make_case

    case = make_case(seed, number, corpus, {name: p.stat().st_size for name, p in corpus.items()})
    with tempfile.TemporaryDirectory(prefix="imagelint-fuzz-replay-") as work:
        copy = Path(work) / corpus[case.name].name
        shutil.copyfile(corpus[case.name], copy)
        with open(copy, "r+b") as f:
            for at, raw in case.patches:
                f.seek(at)
                f.write(raw)
        print(f"case {number}: {case.name}, {case.kind}: {[(at, raw.hex()) for at, raw in case.patches]}")
        print(exercise(copy))  # a crash raises, with its traceback
    return 0


if __name__ == "__main__":
    sys.exit(main())
