"""Benchmark imagelint's pure-Python journal reader against journalctl on a 1,000,000-entry journal.

    .venv/bin/python benchmarks/journal_vs_journalctl.py [--entries N] [--repeat R]

The journal (a few thousand crash-loop restart records among kubelet-like noise, several boots) is
written once by the real ``systemd-journal-remote`` and cached under
``~/.cache/imagelint-tests/journal-bench-<N>/`` (``IMAGELINT_TEST_CACHE`` overrides the cache root).
Then, in the same run, each measurement is a fresh process timed by wall clock (best of R; the
child's CPU seconds, user + system, are printed beside it, the steadier figure on a shared machine):

  (a) restart-loop detection: ``python -c`` importing imagelint and running ``analyze_restarts``
      vs ``journalctl --directory=D MESSAGE_ID=5eb0… -o json``            goal: ratio <= 1.0
  (b) full scan decoding every entry: imagelint ``Journal.entries()``
      vs ``journalctl --directory=D -o json > /dev/null``               goal: ratio <= 0.3
  (c) peak RSS of the imagelint child while analysing (``resource.getrusage(RUSAGE_CHILDREN)``,
      one child per measurement so the figure is that child's; journal pages are read into a page
      cache of at most 32 MiB, see ``facts/journal/paged.py``)            goal: <= 150 MiB

Figures and ratios are printed as measured; a missed goal is reported as missed. The journal
package's bytecode is compiled first (``compileall``), so that an edited module is not recompiled in
every child when ``PYTHONDONTWRITEBYTECODE`` is set: imports are timed as an installed package runs.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.facts.journal.exportgen import RESTART_ID, large_history, write_journal  # noqa: E402
from tests.treerss import run_tree  # noqa: E402

PYTHON = sys.executable

RESTART_CODE = """
import sys
from imagelint.facts.journal import open_path, analyze_restarts
with open_path(sys.argv[1]) as j:
    report = analyze_restarts(j)
    loops = [u for u in report.units if u.restarts >= 10]
    print(len(report.units), sum(u.restarts for u in report.units), len(loops), j.scan.entries_examined)
"""

SCAN_CODE = """
import sys
from imagelint.facts.journal import open_path
with open_path(sys.argv[1]) as j:
    n = 0
    for entry in j.entries():
        n += 1
    print(n, j.scan.files_found, len(j.scan.unreadable))
"""


def cache_root() -> Path:
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return Path(os.environ.get("IMAGELINT_TEST_CACHE", xdg / "imagelint-tests"))


def cached_journal(name: str, what: str, write: Callable[[Path], None]) -> Path:
    """The cache directory ``name``, written by ``write(dir)`` the first time (a directory left
    half-written by an interrupted run is written again)."""
    d = cache_root() / name
    marker = d / ".complete"
    if marker.exists():
        return d
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    print(f"generating {what} in {d} with systemd-journal-remote (once) ...", flush=True)
    t = time.perf_counter()
    write(d)
    marker.write_text("ok\n")
    print(f"  done in {time.perf_counter() - t:.0f} s", flush=True)
    return d


def ensure_journal(entries: int) -> Path:
    cycles = max(10, entries // 330)
    return cached_journal(
        f"journal-bench-{entries}",
        f"a {entries}-entry journal",
        lambda d: write_journal(large_history(entries, restart_cycles=cycles), d),
    )


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def best(cmd: list[str], repeat: int) -> tuple[float, str, float]:
    """Best wall time over ``repeat`` fresh child processes, the last one's stdout, and the least
    CPU time (user + system) one of them took."""
    times = []
    cpu = []
    out = ""
    for _ in range(repeat):
        t = time.perf_counter()
        c = _children_cpu()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t)
        cpu.append(_children_cpu() - c)
        if proc.returncode != 0:
            raise SystemExit(f"{cmd[:3]} failed: {proc.stderr[-2000:]}")
        out = proc.stdout
    return min(times), out, min(cpu)


def measure_rss(code: str, d: Path) -> int:
    """Peak RSS (KiB) of the process tree of one fresh child running ``code`` (``tests/treerss.py``)."""
    run = run_tree([PYTHON, "-c", code, str(d)], timeout=3600)
    if run.returncode != 0:
        raise SystemExit(f"measuring failed ({run.returncode}): {run.stderr[-2000:]}")
    return run.peak_kib


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    d = ensure_journal(args.entries)
    compileall.compile_dir(str(REPO / "imagelint" / "facts" / "journal"), quiet=1)
    files = sorted(p for p in d.rglob("*.journal*"))
    size = sum(p.stat().st_size for p in files)
    print(f"journal: {d} ({len(files)} files, {size / 2**20:.0f} MiB)")
    # warm the page cache so neither side pays for the first read
    for p in files:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass

    jc_restart, jc_out, _ = best(
        ["journalctl", f"--directory={d}", f"MESSAGE_ID={RESTART_ID}", "-o", "json"], args.repeat
    )
    il_restart, il_out, il_restart_cpu = best([PYTHON, "-c", RESTART_CODE, str(d)], args.repeat)
    print("\n(a) restart-loop detection")
    print(
        f"  journalctl MESSAGE_ID match -o json : {jc_restart:7.2f} s  ({len(jc_out.splitlines())} records)"
    )
    print(
        f"  imagelint analyze_restarts          : {il_restart:7.2f} s  ({il_restart_cpu:.2f} s CPU; units, "
        f"restarts, loops, examined: {il_out.strip()})"
    )
    ratio_a = il_restart / jc_restart
    print(f"  ratio {ratio_a:.2f}  goal <= 1.0  {'MET' if ratio_a <= 1.0 else 'MISSED'}")

    jc_scan, _, _ = best(
        ["sh", "-c", f"journalctl --directory='{d}' -o json > /dev/null"], max(1, args.repeat - 2)
    )
    il_scan, il_scan_out, il_scan_cpu = best([PYTHON, "-c", SCAN_CODE, str(d)], max(1, args.repeat - 2))
    print("\n(b) full scan of every entry")
    print(f"  journalctl -o json > /dev/null      : {jc_scan:7.2f} s")
    print(
        f"  imagelint Journal.entries()         : {il_scan:7.2f} s  ({il_scan_cpu:.2f} s CPU; "
        f"entries, files, unreadable: {il_scan_out.strip()})"
    )
    ratio_b = il_scan / jc_scan
    print(f"  ratio {ratio_b:.2f}  goal <= 0.3  {'MET' if ratio_b <= 0.3 else 'MISSED'}")

    rss_restart = measure_rss(RESTART_CODE, d)
    rss_scan = measure_rss(SCAN_CODE, d)
    print("\n(c) peak RSS of the imagelint child (ru_maxrss, its journal page cache included)")
    print(
        f"  restart-loop analysis : {rss_restart / 1024:7.1f} MiB  goal <= 150  "
        f"{'MET' if rss_restart <= 150 * 1024 else 'MISSED'}"
    )
    print(
        f"  full scan             : {rss_scan / 1024:7.1f} MiB  goal <= 150  "
        f"{'MET' if rss_scan <= 150 * 1024 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
