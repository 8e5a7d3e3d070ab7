"""Peak memory of reading journals that carry decompression bombs, next to a normal journal.

    .venv/bin/python benchmarks/journal_bombs.py [--size-mib N] [--kinds xz,lz4,zstd,...]

For each kind (``tests/facts/journal/bombs.py``: ``xz``, ``lz4``, ``zstd`` as systemd writes them, plus a
zstd frame without a declared size and an LZ4 payload whose size prefix lies), a real journal is
written by ``systemd-journal-remote`` and its kernel MESSAGE's DATA object is given a payload that
expands to ``--size-mib`` MiB (default 1536: the 1.5 GiB of zeros of the incident, a ~60 KB zstd
object). Each journal is then read in a fresh process through every public path (all entries, the
restart analysis, every built-in signal); the figure is the peak RSS of its process tree
(``tests/treerss.py``), printed next to the same reading of the journal before the bomb was planted,
with the ratio.
Goal: every bomb under 150 MiB, and the file reported as read in part (inconclusive), not read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.facts.journal.bombs import KINDS, bomb_payload, normal_journal, peak_rss, plant  # noqa: E402

GOAL_MIB = 150


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1536, help="what each bomb expands to")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    args = ap.parse_args(argv)
    size = args.size_mib * 1024 * 1024
    missed = 0
    with tempfile.TemporaryDirectory(prefix="journal-bombs-") as tmp:
        base = Path(tmp)
        normal_journal(base / "normal")
        baseline = peak_rss(base / "normal")
        base_mib = float(baseline["peak_mib"])  # type: ignore[arg-type]
        print(f"normal journal: peak RSS {base_mib:.1f} MiB; {baseline['files']}")
        for kind in args.kinds.split(","):
            t = time.perf_counter()
            bomb = bomb_payload(kind, size)
            directory = plant(base / kind, bomb)
            built = time.perf_counter() - t
            t = time.perf_counter()
            result = peak_rss(directory)
            read = time.perf_counter() - t
            mib = float(result["peak_mib"])  # type: ignore[arg-type]
            ((status, reason),) = result["files"]  # type: ignore[misc]
            ok = mib < GOAL_MIB and status != "read"
            missed += not ok
            print(
                f"{kind:>16}: {len(bomb[0]) / 1024:8.1f} KiB payload -> {args.size_mib} MiB; "
                f"peak RSS {mib:6.1f} MiB (normal {base_mib:.1f} MiB, ratio {mib / base_mib:.2f}); "
                f"read in {read:.2f} s (built in {built:.1f} s); file {status}: {reason}; "
                f"{'meets' if ok else 'MISSES'} goal < {GOAL_MIB} MiB and not read"
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
