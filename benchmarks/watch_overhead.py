"""What `imagelint watch` costs on a host with a leak: CPU share of one core and resident memory.

Runs ``imagelint watch`` with its default periods (sample 10 s, systemctl 30 s, journal 10 s,
memory.stat walk 60 s, soak rules 5 min) serving ``--listen`` and writing ``--textfile``, while:

- a leaky restarter (``tests/soak/memcg.py``) makes one real dying memory cgroup every ``--leak-period``
  seconds on this kernel (cgroup v1 memory, needs root);
- a real ``systemd-journal-remote`` appends one kernel entry every ``--journal-period`` seconds to the
  journal the watch follows (an ENA reset line every tenth);
- ``/metrics`` is scraped every ``--scrape-every`` seconds, as Prometheus would.

The command runs in a boxed child of the process started here (``imagelint/cli/box.py``), which only
waits: both figures are of the whole process tree (``tests/treerss.py``'s ``tree_usage``, from
``/proc``). CPU is user + system time of every process of the tree (and of the children each reaped,
i.e. systemctl), over the run after a warm-up (start-up imports are a one-off), as a share of one
core; RSS is summed over the tree every 5 s (the peak is reported; the waiting parent's few MiB
are counted too, so the figure errs high). Both are printed
against the goals (CPU < 0.5 % of a core, RSS < 60 MiB) with their ratio to the goal.

    sudo .venv/bin/python benchmarks/watch_overhead.py [--duration 600]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.facts.journal.exportgen import JOURNAL_REMOTE, MACHINE_ID, Host  # noqa: E402
from tests.soak.memcg import MemcgLab, v1_memory_writable  # noqa: E402
from tests.treerss import tree_usage  # noqa: E402
from tests.watch.procs import IMAGELINT, free_port  # noqa: E402

CPU_GOAL = 0.005  # share of one core
RSS_GOAL = 60 * 1024 * 1024
WARMUP_S = 20.0
ENA_RESETS = 'imagelint_journal_signals_total{signal="ena-reset"}'


def journal_writer(directory: Path, period: float, stop: threading.Event) -> subprocess.Popen[bytes]:
    (directory / MACHINE_ID).mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [JOURNAL_REMOTE, f"--output={directory / MACHINE_ID / 'system.journal'}", "--split-mode=none", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    host = Host(11)
    host.new_boot(int(time.time() * 1e6) - 60_000_000)

    def feed() -> None:
        i = 0
        assert proc.stdin is not None
        while not stop.wait(period):
            host.at(int(time.time() * 1e6) - host.boot_realtime)
            text = "ena 0000:00:05.0 eth0: Trigger reset is on" if i % 10 == 0 else f"kernel noise line {i}"
            proc.stdin.write(host.kernel(text))
            proc.stdin.flush()
            i += 1

    threading.Thread(target=feed, daemon=True).start()
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds to watch (default 600)")
    parser.add_argument("--leak-period", type=float, default=2.0, help="seconds between leaked memcgs")
    parser.add_argument("--journal-period", type=float, default=1.0, help="seconds between journal entries")
    parser.add_argument("--scrape-every", type=float, default=15.0)
    args = parser.parse_args()
    ok, reason = v1_memory_writable()
    if not ok:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="imagelint-watch-bench-"))
    (work / "textfile").mkdir()
    stop = threading.Event()
    lab = MemcgLab("watch-bench")
    writer = journal_writer(work / "journal", args.journal_period, stop)
    port = free_port()
    argv = [IMAGELINT, "watch", f"--listen=127.0.0.1:{port}", f"--textfile={work / 'textfile'}"]
    argv += [f"--journal-dir={work / 'journal'}"]
    log = open(work / "watch.log", "wb")  # noqa: SIM115 - closed in finally
    watch = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    rss_peak = 0
    try:
        lab.start(args.leak_period)
        started = time.monotonic()
        deadline = started + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or watch.poll() is not None:
                    print(f"the watch did not come up; see {work / 'watch.log'}", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        time.sleep(max(0.0, WARMUP_S - (time.monotonic() - started)))
        cpu0, t0 = tree_usage(watch.pid)[1], time.monotonic()
        next_scrape = t0
        body = b""
        while (now := time.monotonic()) < t0 + args.duration:
            if now >= next_scrape:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
                next_scrape += args.scrape_every
            rss_peak = max(rss_peak, tree_usage(watch.pid)[0])
            assert watch.poll() is None, "the watch died"
            time.sleep(min(5.0, max(0.1, t0 + args.duration - now)))
        rss_end, cpu1 = tree_usage(watch.pid)
        t1 = time.monotonic()
        rss_peak = max(rss_peak, rss_end)
    finally:
        watch.terminate()
        try:
            watch.wait(timeout=15)
        except subprocess.TimeoutExpired:
            watch.kill()
        log.close()
        stop.set()
        if writer.stdin:
            writer.stdin.close()
        writer.wait(timeout=30)
        leaked = lab.leaked
        lab.cleanup()
    share = (cpu1 - cpu0) / (t1 - t0)
    lines = {
        ln.split()[0]: ln.split()[-1] for ln in body.decode().splitlines() if ln and not ln.startswith("#")
    }
    print(f"imagelint watch, {t1 - t0:.0f} s measured after a {WARMUP_S:.0f} s warm-up, default periods")
    print(f"  leaky restarter: {leaked} dying memcgs made (one per {args.leak_period:g} s)")
    print(
        f"  journal: one entry per {args.journal_period:g} s; /metrics scraped every {args.scrape_every:g} s"
    )
    print(
        f"  last scrape: dying {lines.get('imagelint_memcg_dying')}, "
        f"slope {lines.get('imagelint_memcg_dying_slope_per_hour')}/h, "
        f"journal entries {lines.get('imagelint_journal_entries_total')}, "
        f"ena resets {lines.get(ENA_RESETS)}"
    )
    print(
        f"CPU: {share * 100:.3f} % of a core ({cpu1 - cpu0:.2f} s CPU)   goal < {CPU_GOAL * 100:.1f} %   "
        f"ratio to goal {share / CPU_GOAL:.2f}   {'OK' if share < CPU_GOAL else 'OVER'}"
    )
    print(
        f"RSS: peak {rss_peak / 2**20:.1f} MiB, end {rss_end / 2**20:.1f} MiB   "
        f"goal < {RSS_GOAL / 2**20:.0f} MiB   ratio to goal {rss_peak / RSS_GOAL:.2f}   "
        f"{'OK' if rss_peak < RSS_GOAL else 'OVER'}"
    )
    return 0 if share < CPU_GOAL and rss_peak < RSS_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
