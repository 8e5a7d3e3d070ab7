"""Fuzz the pure-Python journal reader with mutated real journals; report distinct crashes.

    .venv/bin/python benchmarks/fuzz_journal.py [--cases N] [--seed S] [--timeout SECONDS] [--show K]

Base journals are written once per run by the real ``systemd-journal-remote`` (three layouts, plus
copies re-encoded with XZ and LZ4). Each case applies one to four mutations drawn from a seeded
stream (``tests/facts/journal/mutate.py``, shared with the hypothesis tests: truncation, zeroed ranges,
bit flips, noise, online state, huge counts and offsets, corrupt object headers, links, entry and
array items, hash buckets and compressed payloads, small decompression bombs) and reads the result
through every public path. One case in three also cuts the file while it is read (truncated to a
random size after a random number of entries, or right after opening), so the reads that follow
meet a file that shrank under them (each must be a ``FileShrank`` recorded as a problem, never
SIGBUS or a short buffer). A *crash* is any exception other than the documented ``JournalError``
types, a case slower than ``--timeout``, or a peak RSS growth past ``--max-growth-mib``.

Prints the cases run, the distinct crash signatures (exception type + innermost frame) with a count
and the seed/case that reproduces the first of each, the slowest case and the elapsed time. Exits 1
when any crash was found.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from imagelint.facts.journal import JournalError  # noqa: E402
from tests.facts.journal.mutate import (  # noqa: E402
    Timeout,
    apply,
    base_journals,
    random_mutations,
    read_all,
    signature,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=250_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds one case may take")
    ap.add_argument("--max-growth-mib", type=float, default=128.0, help="peak RSS growth one case may cause")
    ap.add_argument("--show", type=int, default=5, help="print a traceback for the first K signatures")
    ap.add_argument("--progress", type=int, default=5000, help="print a line every N cases (0: never)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="fuzz-journal-") as tmp:
        bases = base_journals(Path(tmp))
    print(
        f"bases: {', '.join(f'{b.name} ({len(b.data)} bytes, {len(b.objects)} objects)' for b in bases)}",
        flush=True,
    )
    crashes: dict[str, tuple[int, str]] = {}
    counts: dict[str, int] = {}
    documented = 0
    mutator_errors = 0
    statuses: dict[str, int] = {}
    slowest = (0.0, -1)
    started = time.perf_counter()
    for case in range(args.cases):
        rng = random.Random(f"{args.seed}:{case}")
        base = bases[case % len(bases)]
        mutations = random_mutations(rng)
        try:
            data = apply(base, mutations)
        except Exception as exc:  # a fault of the mutator (test code), not of the reader
            mutator_errors += 1
            print(f"case {case}: mutator failed ({signature(exc)}): {mutations}", flush=True)
            continue
        t = time.perf_counter()
        try:
            # one case in four reads the damaged file together with its pristine base (a merge)
            companion = base.data if case % 4 == 3 else None
            cut = (rng.randrange(0, 64), rng.randrange(0, len(data) + 1)) if case % 3 == 1 else None
            outcome = read_all(data, companion=companion, seconds=args.timeout, cut=cut)
        except JournalError:
            documented += 1
            continue
        except (Exception, Timeout) as exc:
            sig = signature(exc)
            counts[sig] = counts.get(sig, 0) + 1
            if sig not in crashes:
                import traceback

                text = "".join(traceback.format_exception(exc))
                crashes[sig] = (case, f"base={base.name} mutations={mutations} cut={cut}\n{text}")
                print(f"case {case}: NEW CRASH {sig}", flush=True)
            continue
        finally:
            elapsed = time.perf_counter() - t
            if elapsed > slowest[0]:
                slowest = (elapsed, case)
        for status in outcome.statuses[:1]:
            statuses[status] = statuses.get(status, 0) + 1
        if outcome.peak_growth_kib > args.max_growth_mib * 1024:
            sig = f"MemoryBound exceeded ({outcome.peak_growth_kib // 1024} MiB) on {base.name}"
            counts[sig] = counts.get(sig, 0) + 1
            crashes.setdefault(sig, (case, f"base={base.name} mutations={mutations} cut={cut}"))
        if args.progress and (case + 1) % args.progress == 0:
            rate = (case + 1) / (time.perf_counter() - started)
            print(f"  {case + 1} cases, {len(crashes)} crash signature(s), {rate:.0f} cases/s", flush=True)
    elapsed = time.perf_counter() - started
    print(
        f"cases run: {args.cases} (seed {args.seed}); documented JournalError escapes: {documented}; "
        f"mutator errors: {mutator_errors}"
    )
    print("mutated file read as: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    print(f"unique crash signatures: {len(crashes)}")
    for i, (sig, (case, detail)) in enumerate(sorted(crashes.items(), key=lambda kv: kv[1][0])):
        print(f"  {counts[sig]:6d} x {sig}   (first: case {case})")
        if i < args.show:
            print("    " + detail.replace("\n", "\n    "))
    print(f"slowest case: {slowest[0] * 1000:.0f} ms (case {slowest[1]})")
    print(f"elapsed: {elapsed:.1f} s ({args.cases / elapsed:.0f} cases/s)")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
