"""Fuzz every output format with reports full of hostile strings, for as long as you like.

The strategies and the checks are those of the property tests (``tests/formats/fuzzing.py``): every
format must render without raising, produce valid UTF-8, JSON valid against the report schema,
well-formed XML, no raw control character on a terminal channel and no forged workflow command;
every ``--deep-every``-th case also validates SARIF against the 2.1.0 schema and renders the
Markdown as GitHub would. A crash is recorded, not fatal; the run goes on.

Run: .venv/bin/python benchmarks/fuzz_formats.py [--cases 250000] [--seed 0] [--jobs 1]
Prints the cases run, the unique crash signatures (format, exception, where) with a count and the
first message of each, and the elapsed time. Exit status 1 when anything crashed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: tests.formats.fuzzing


def signature(fmt: str, exc: BaseException) -> str:
    from tests.formats.fuzzing import FormatProblem

    if isinstance(exc, FormatProblem):
        return exc.signature
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/imagelint/" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{fmt}: {type(exc).__name__} at {where}"


CHUNK = 500  # cases per Hypothesis run: its engine keeps every case's choices, so memory stays bounded


def run(cases: int, seed: int, deep_every: int, progress: bool) -> tuple[int, Counter[str], dict[str, str]]:
    """``cases`` cases in chunks of ``CHUNK``, each chunk a Hypothesis run with its own derived seed."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from tests.formats.fuzzing import FORMAT_NAMES, check_format, reports

    crashes: Counter[str] = Counter()
    first: dict[str, str] = {}
    done = [0]
    started = time.monotonic()

    def one_case(report: object) -> None:
        done[0] += 1
        deep = deep_every > 0 and done[0] % deep_every == 0
        for fmt in FORMAT_NAMES:
            try:
                check_format(fmt, report, deep=deep, show_waived=done[0] % 2 == 0)  # type: ignore[arg-type]
            except Exception as exc:  # every crash is a finding of the fuzzer, not the end of it
                sig = signature(fmt, exc)
                crashes[sig] += 1
                first.setdefault(sig, f"{exc}"[:300])
        if progress and done[0] % 1000 == 0:
            rate = done[0] / (time.monotonic() - started)
            line = f"  {done[0]} cases, {len(crashes)} crash signature(s), {rate:.1f} cases/s"
            print(line, file=sys.stderr, flush=True)

    chunk = 0
    while done[0] < cases:
        size = min(CHUNK, cases - done[0])
        target = done[0] + size
        fuzz = hypothesis_seed(seed * 1_000_003 + chunk)(
            settings(
                max_examples=size,
                database=None,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )(given(reports())(one_case))
        )
        fuzz()
        chunk += 1
        if done[0] < target:  # Hypothesis ran fewer than asked (it never should): do not spin
            break
    return done[0], crashes, first


def _worker(args: tuple[int, int, int, bool]) -> tuple[int, Counter[str], dict[str, str]]:
    cases, seed, deep_every, progress = args
    return run(cases, seed, deep_every, progress)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=250_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (each gets its own seed)")
    parser.add_argument("--deep-every", type=int, default=50, help="SARIF schema + Markdown render every N")
    args = parser.parse_args()
    started = time.monotonic()
    jobs = max(1, args.jobs)
    shares = [args.cases // jobs + (1 if i < args.cases % jobs else 0) for i in range(jobs)]
    work = [(n, args.seed + i, args.deep_every, i == 0) for i, n in enumerate(shares) if n]
    if jobs == 1:
        results = [_worker(work[0])]
    else:
        with multiprocessing.Pool(jobs) as pool:
            results = pool.map(_worker, work)
    total = sum(r[0] for r in results)
    crashes: Counter[str] = Counter()
    first: dict[str, str] = {}
    for _, found, messages in results:
        crashes.update(found)
        for sig, message in messages.items():
            first.setdefault(sig, message)
    elapsed = time.monotonic() - started
    print(f"cases run: {total}")
    print(f"unique crash signatures: {len(crashes)}")
    for sig, count in crashes.most_common():
        print(f"  {count:7d}  {sig}\n           {first[sig]!r}")
    print(f"elapsed: {elapsed:.1f} s ({total / elapsed:.1f} cases/s, jobs={jobs}, seed={args.seed})")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
