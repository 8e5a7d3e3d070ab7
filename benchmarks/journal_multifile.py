"""Issue 41 item 1's figure: a whole ``imagelint audit`` of an image holding a large journal split
over many files, against journalctl's indexed query on that journal, in one run.

    .venv/bin/python benchmarks/journal_multifile.py [--entries N] [--files F] [--boots B] [--runs R]

The journal (default: 1,000,000 entries, 5 boots, about 580 MB) is written once by the real
``systemd-journal-remote`` rotating to a new file about every ``N / (F - 0.5)`` entries, as journald
rotates a busy system's journal (``--files`` 12 by default: one writer's rotated files, one seqnum
id), and cached under ``~/.cache/imagelint-tests/journal-multifile-<N>-<F>/``
(``IMAGELINT_TEST_CACHE`` overrides the cache root); the image is the cloud test rootfs with it
hard-linked into ``/var/log/journal/<machine id>/``, as in ``journal_audit.py``, whose helpers this
uses.

Measured, interleaved run by run (a warm-up round, then the medians of R rounds, each measurement a
fresh process; CPU is the child's user + system):

* ``python -m imagelint audit IMAGE -f json:/dev/null`` (all built-in packs);
* ``journalctl --directory=D MESSAGE_ID=<restart id> -o json > /dev/null``, the baseline;
* the same audit of the rootfs without the journal.

Then the peak RSS of the audit's whole process tree (``tests/treerss.py``), once. Printed: the
medians, audit / journalctl (goal <= 1.0, wall and CPU), audit / audit without the journal, and the
peak RSS (goal <= 150 MiB); a missed goal is printed as missed. ``--baseline DIR`` adds the same
audit run from another checkout (e.g. ``git archive main`` unpacked in DIR), interleaved with the
rest, as ``journal_audit.py`` does.
"""

from __future__ import annotations

import argparse
import compileall
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.journal_audit import (  # noqa: E402
    against_journalctl,
    audit_commands,
    cloud_rootfs,
    ensure_image,
    interleaved,
)
from benchmarks.journal_vs_journalctl import cached_journal  # noqa: E402
from tests.facts.journal.exportgen import MACHINE_ID, large_history, write_journal  # noqa: E402
from tests.treerss import MAX_RSS_MIB, run_tree  # noqa: E402

GOAL = 1.0
DATA_PER_MAX_BYTE = 768
"""journal-remote (systemd 252) sizes a file's DATA hash table for ``max_size / 768 * 4 / 3``
buckets and rotates at 75 % fill: about one new DATA object per entry here (each message is new)."""


def ensure_multifile_journal(entries: int, files: int, boots: int, cycles: int) -> Path:
    """The journal directory, written once: ``entries`` entries over ``boots`` boots, ``cycles`` of
    them crash-loop turns (7 entries each), in about ``files`` files of one writer."""
    per_file = entries / (files - 0.5)
    max_size = -(-int(per_file * DATA_PER_MAX_BYTE) // 2**20) * 2**20  # whole MiB, rounded up
    return cached_journal(
        f"journal-multifile-{entries}-{files}-{boots}-{cycles}",
        f"a {entries}-entry journal in ~{files} files",
        lambda d: write_journal(
            large_history(entries, boots=boots, restart_cycles=cycles), d, max_file_size=max_size
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--boots", type=int, default=5)
    ap.add_argument("--cycles", type=int, help="crash-loop turns (default: one per 330 entries)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", type=Path, help="another checkout whose audit to time alongside")
    args = ap.parse_args()
    cycles = args.cycles if args.cycles is not None else max(10, args.entries // 330)
    journal = ensure_multifile_journal(args.entries, args.files, args.boots, cycles)
    rootfs = cloud_rootfs()
    image = ensure_image(rootfs, journal, f"{journal.name}-image")
    compileall.compile_dir(str(REPO / "imagelint"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    jdir = journal / MACHINE_ID
    files = sorted(jdir.glob("*.journal*"))
    size = sum(p.stat().st_size for p in files)
    print(f"image: {image}; journal: {len(files)} files, {size / 1e6:.0f} MB ({size / 2**20:.0f} MiB)")
    commands = audit_commands(image, jdir, rootfs)
    audit = commands["imagelint audit IMAGE -f json:/dev/null"][0]
    envs = dict.fromkeys(commands, env)
    if args.baseline is not None:
        compileall.compile_dir(str(args.baseline / "imagelint"), quiet=1)
        commands["baseline audit IMAGE"] = (audit, (0, 1))
        envs["baseline audit IMAGE"] = {**env, "PYTHONPATH": str(args.baseline.resolve())}
    med = interleaved(commands, envs, args.runs)
    aw, ac, jw, jc, rw, rc = against_journalctl(med, GOAL)
    print(f"  audit / audit without journal: wall {aw / rw:.2f}, CPU {ac / rc:.2f}")
    if args.baseline is not None:
        bw, bc = med["baseline audit IMAGE"]
        print(f"  baseline audit / journalctl: wall {bw / jw:.2f}, CPU {bc / jc:.2f}")
        print(f"  audit / baseline audit ({args.baseline}): wall {aw / bw:.2f}, CPU {ac / bc:.2f}")
    tree = run_tree(audit, timeout=600, env=env, cwd=str(REPO))
    if tree.returncode not in (0, 1):
        raise SystemExit(f"the measured audit exited {tree.returncode}: {tree.stderr[-1000:]}")
    verdict = "MET" if tree.peak_mib <= MAX_RSS_MIB else "MISSED"
    print(f"  peak RSS of the audit's process tree: {tree.peak_mib:.1f} MiB  goal <= {MAX_RSS_MIB} {verdict}")


if __name__ == "__main__":
    main()
