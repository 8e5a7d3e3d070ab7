"""Issue 26's figure: a whole ``imagelint audit`` of an image holding a 1,000,000-entry journal,
against journalctl's indexed query on that journal, in one run.

    .venv/bin/python benchmarks/journal_audit.py [--entries N] [--runs R]

The image is the cached cloud test rootfs (``scripts/build-test-rootfs.sh --flavour cloud``,
``~/.cache/imagelint-tests/bookworm-cloud``) copied as hard links (``cp -al``: no data copied, the
audit never writes) to ``~/.cache/imagelint-tests/journal-audit-<N>/``, with the benchmark journal
of ``journal_vs_journalctl.py`` (``journal-bench-<N>``, written by the real systemd-journal-remote,
six files, about 500 MiB) hard-linked into its ``/var/log/journal/<machine id>/``. So the audit
reads the journal the way it reads any image's: ``open_image`` through the rootfs target, not
``--journal``.

Measured, interleaved run by run (one warm-up round first, then the medians of R rounds; every
measurement a fresh process, its CPU time the child's user + system, descendants included):

* ``python -m imagelint audit IMAGE -f json:/dev/null`` (all built-in packs; PYTHONPATH = this
  checkout, bytecode compiled first as an installed package has it);
* ``journalctl --directory=D MESSAGE_ID=<restart id> -o json > /dev/null``, the baseline;
* the same audit of the rootfs without the journal, to show what the rest of the audit costs.

Printed: wall and CPU medians of each, and the ratios audit / journalctl (goal <= 0.6, wall and CPU
both given; a missed goal is printed as missed), (audit - audit without journal) / journalctl, the
journal's own share, and audit / audit without journal (issue 41's restated goal: <= 2.0).

``--baseline DIR`` adds the same audit run from another checkout (e.g. ``git archive main`` unpacked
in DIR), interleaved with the rest, and prints this checkout's audit against it.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.journal_vs_journalctl import cache_root, ensure_journal  # noqa: E402
from tests.facts.journal.exportgen import MACHINE_ID, RESTART_ID  # noqa: E402

GOAL = 0.6
WHOLE_GOAL = 2.0
"""The whole audit against the same audit of the image without its journal (issue 41)."""


def cloud_rootfs() -> Path:
    """The cached cloud test rootfs (built once by the script; building needs root)."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts/build-test-rootfs.sh"), "--flavour", "cloud"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def ensure_image(rootfs: Path, journal: Path, name: str) -> Path:
    """The rootfs with the journal in /var/log/journal, as hard links, made once (as ``name`` in the
    cache)."""
    image = cache_root() / name
    marker = cache_root() / f"{name}.complete"
    if marker.exists() and image.is_dir():
        return image
    if image.exists():
        shutil.rmtree(image)
    subprocess.run(["cp", "-al", str(rootfs), str(image)], check=True)
    target = image / "var" / "log" / "journal"
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(journal / MACHINE_ID), str(target / MACHINE_ID)], check=True)
    marker.write_text("ok\n")
    return image


def run(cmd: list[str], env: dict[str, str], ok: tuple[int, ...]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its descendants) of one run of ``cmd``, in the
    checkout named by its PYTHONPATH (``python -m`` puts the working directory first on the path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=env["PYTHONPATH"], check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(f"{cmd[:4]} exited {proc.returncode}: {proc.stderr.decode()[-1000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


Commands = dict[str, tuple[list[str], tuple[int, ...]]]


def interleaved(
    commands: Commands, envs: dict[str, dict[str, str]], runs: int
) -> dict[str, tuple[float, float]]:
    """(wall, CPU) medians of each named command over ``runs`` rounds, run after one another within
    a round after a warm-up round (page cache, bytecode); printed with the load average."""
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for i in range(runs + 1):
        for name, (cmd, ok) in commands.items():
            figure = run(cmd, envs[name], ok)
            if i:  # the first round warms the page cache and the bytecode
                figures[name].append(figure)
    med = {
        name: (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
        for name, got in figures.items()
    }
    print(f"medians of {runs} interleaved runs; load average {os.getloadavg()[0]:.2f}")
    for name, (wall, cpu) in med.items():
        print(f"  {name:42s} wall {wall:6.3f} s   CPU {cpu:6.3f} s")
    return med


def audit_commands(image: Path, jdir: Path, rootfs: Path) -> Commands:
    """The three timed commands: the whole audit of the image holding the journal ``jdir``,
    journalctl's query for the restart message on it, and the audit of the image without its journal."""
    return {
        "imagelint audit IMAGE -f json:/dev/null": (
            [sys.executable, "-m", "imagelint", "audit", str(image), "-f", "json:/dev/null"],
            (0, 1),
        ),
        "journalctl MESSAGE_ID=<restart> -o json": (
            ["sh", "-c", f"exec journalctl --directory='{jdir}' MESSAGE_ID={RESTART_ID} -o json >/dev/null"],
            (0,),
        ),
        "imagelint audit ROOTFS (no journal)": (
            [sys.executable, "-m", "imagelint", "audit", str(rootfs), "-f", "json:/dev/null"],
            (0, 1),
        ),
    }


def against_journalctl(med: dict[str, tuple[float, float]], goal: float = GOAL) -> tuple[float, ...]:
    """Print the audit's wall and CPU time against journalctl's (the first two of ``med``, from
    :func:`audit_commands`) with the goal; the (wall, CPU) pairs of the three commands, flat."""
    (aw, ac), (jw, jc), (rw, rc) = list(med.values())[:3]
    for what, ours, base in (("wall", aw, jw), ("CPU", ac, jc)):
        ratio = ours / base
        verdict = "MET" if ratio <= goal else "MISSED"
        print(f"  audit / journalctl ({what}): {ratio:.2f}  goal <= {goal}  {verdict}")
    return aw, ac, jw, jc, rw, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", type=Path, help="another checkout whose audit to time alongside")
    args = ap.parse_args()
    journal = ensure_journal(args.entries)
    rootfs = cloud_rootfs()
    image = ensure_image(rootfs, journal, f"journal-audit-{args.entries}")
    compileall.compile_dir(str(REPO / "imagelint"), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    base_env = dict(env)
    if args.baseline is not None:
        compileall.compile_dir(str(args.baseline / "imagelint"), quiet=1)
        base_env["PYTHONPATH"] = str(args.baseline.resolve())
    files = sorted((image / "var/log/journal" / MACHINE_ID).glob("*.journal*"))
    size = sum(p.stat().st_size for p in files)
    print(f"image: {image} (hard links of {rootfs}); journal: {len(files)} files, {size / 2**20:.0f} MiB")
    jdir = journal / MACHINE_ID
    commands = audit_commands(image, jdir, rootfs)
    envs = dict.fromkeys(commands, env)
    if args.baseline is not None:
        name = "baseline audit IMAGE -f json:/dev/null"
        commands[name] = commands["imagelint audit IMAGE -f json:/dev/null"]
        envs[name] = base_env
    med = interleaved(commands, envs, args.runs)
    aw, ac, jw, jc, rw, rc = against_journalctl(med)
    share = f"wall {(aw - rw) / jw:.2f}, CPU {(ac - rc) / jc:.2f}"
    print(f"  (audit - audit without journal) / journalctl: {share}")
    for what, ours, base in (("wall", aw, rw), ("CPU", ac, rc)):
        ratio = ours / base
        verdict = "MET" if ratio <= WHOLE_GOAL else "MISSED"
        print(f"  audit / audit without journal ({what}): {ratio:.2f}  goal <= {WHOLE_GOAL}  {verdict}")
    if args.baseline is not None:
        bw, bc = med["baseline audit IMAGE -f json:/dev/null"]
        print(f"  audit / baseline audit ({args.baseline}): wall {aw / bw:.2f}, CPU {ac / bc:.2f}")
        print(f"  baseline audit / journalctl: wall {bw / jw:.2f}, CPU {bc / jc:.2f}")


if __name__ == "__main__":
    main()
