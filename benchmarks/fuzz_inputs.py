"""Fuzz what imagelint reads from hostile sources: bundle tars, their records, rpmdb, dpkg status, reports.

    .venv/bin/python benchmarks/fuzz_inputs.py [--cases N] [--seed S] [--timeout SECONDS]
                                               [--surface NAME ...] [--show K]

Bases are made once per run by the real tools: a bundle recorded by the collector with a short soak
on this host, an rpmdb.sqlite written by rpm itself (rpmbuild + ``rpm --justdb``), this host's dpkg
status file (cut to 256 KiB), and the JSON report of the sample image. Each case draws one surface
and one to four seeded mutations, builds its input, and runs it through the public function a
command calls, in a forked child with ``RLIMIT_AS`` (``--as-mib``, 1 GiB) and a wall-time limit:

- ``tar``: bytes and headers of the uncompressed bundle (pax ``x``/``g`` records, GNU long names,
  sparse members, size fields), read by :func:`imagelint.bundle.extract.extract`;
- ``records``: the collector's records in a well-formed bundle (manifest, soak samples, layout,
  live status and ``systemctl show`` output, probe timings), read by
  :func:`imagelint.bundle.run.bundle_reports` (the whole audit and soak of the bundle);
- ``rpmdb``: mutated pages of rpm's database, hostile schemas (views, recursive CTEs, generated
  columns, triggers, huge rows) and sparse size, read by :func:`imagelint.facts.packages.load_packages`;
- ``dpkg``: mutated lines and floods of tiny stanzas in the status file, same function;
- ``report``: JSON-level (deep nesting, NaN, huge numbers, wrong types) and byte-level mutations
  of the report, read by :func:`imagelint.report.baseline.load_baseline` and ``diff``'s
  :func:`imagelint.commands.diff.load_side`.

A *crash* is any exception other than the project's error types (``ImageLintError``), a death by
signal, or a case over the time limit. Prints the cases per surface, the unique crash signatures
(type + innermost frame) with the seed/case of the first, the slowest case, the peak RSS of a child
and the elapsed time. Exits 1 when any crash was found.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import select
import shutil
import signal
import sqlite3
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from imagelint.errors import ImageLintError  # noqa: E402

SURFACES = ("tar", "records", "rpmdb", "dpkg", "report")
INTERESTING_TEXT = [
    "0", "-1", "18446744073709551616", "9" * 400, "nan", "inf", "-inf", "1e999", "²", "٣", "1_000", "0x10",
    " ", "", "\x00", "\n", "\n\n", "@@ ", "=", ":", "é" * 10, "\udcff",
]  # fmt: skip
INTERESTING_BYTES = [0x00, 0xFF, 0x7F, 0x80, 0x0A, 0x20, 0x30, 0x39, 0x3A, 0x3D]


@dataclass
class Bases:
    items: list[tuple[tarfile.TarInfo, bytes | None]]  # the collector's bundle, member by member
    tar: bytes  # the same, uncompressed
    rpmdb: bytes
    status: bytes
    report: dict[str, Any]
    image: Path  # the sample image the report is of


def make_bases(scratch: Path) -> Bases:
    from tests.bundle.support import collect_soak_bundle, members
    from tests.facts.test_packages import _rpm_image
    from tests.formats.ci_helpers import sample_image
    from tests.support import run_cli

    bundle = collect_soak_bundle(scratch / "collect")
    items = members(bundle)
    probe = b"cgroups 12\nns 1234567\nbytes 4096\nerrors 1\ntimes-before 0m0.01s 0m0.02s 0m0.10s 0m0.20s\n"
    probe += b"times-after 0m0.01s 0m0.02s 0m0.15s 0m0.30s\n"
    for name in ("probe.start", "probe.end"):  # the collector on this host may not time the walk
        if not any(m.name == f"imagelint/soak/{name}" for m, _ in items):
            info = tarfile.TarInfo(f"imagelint/soak/{name}")
            items.append((info, probe))
    rpm_root = _rpm_image(
        scratch / "rpm/image",
        scratch / "rpm",
        [{"name": "imagelint-agent", "version": "1.2.3", "release": "4", "epoch": "2"},
         {"name": "imagelint-tools", "version": "0.9", "release": "1.el9"}],
    )  # fmt: skip
    status = Path("/var/lib/dpkg/status")
    text = status.read_bytes()[: 256 * 1024] if status.is_file() else b""
    text = text[: text.rfind(b"\n\n") + 2] or b"Package: a\nStatus: install ok installed\nVersion: 1\n\n"
    image = sample_image(scratch / "sample")
    proc = run_cli("audit", str(image), "-f", f"json:{scratch / 'report.json'}")
    assert proc.returncode in (0, 1), proc.stderr
    return Bases(
        items,
        gzip.decompress(bundle.read_bytes()),
        (rpm_root / "var/lib/rpm/rpmdb.sqlite").read_bytes(),
        text,
        json.loads((scratch / "report.json").read_text()),
        image,
    )


# -- mutations --------------------------------------------------------------------------------------


def mutate_bytes(rng: random.Random, data: bytes, *, align: int = 1) -> bytes:
    """One of: bit flip, interesting byte, overwritten number text, inserted or repeated chunk,
    deleted range, truncation."""
    buf = bytearray(data)
    if not buf:
        return bytes(rng.randbytes(rng.randint(1, 64)))
    op = rng.randrange(7)
    at = rng.randrange(len(buf)) // align * align
    if op == 0:
        buf[at] ^= 1 << rng.randrange(8)
    elif op == 1:
        buf[at] = rng.choice(INTERESTING_BYTES)
    elif op == 2:
        text = rng.choice(INTERESTING_TEXT).encode("utf-8", "surrogateescape")
        buf[at : at + len(text)] = text
    elif op == 3:
        buf[at:at] = rng.randbytes(rng.randint(1, 600))
    elif op == 4:
        chunk = bytes(buf[at : at + rng.randint(1, 256)])
        buf[at:at] = chunk * rng.choice([2, 10, 1000, 20000])
    elif op == 5:
        del buf[at : at + rng.randint(1, 4096)]
    else:
        del buf[at:]
    return bytes(buf)


def mutate_lines(rng: random.Random, data: bytes) -> bytes:
    """Line-level: a number replaced, a line repeated or removed, a blank or ``@@`` line inserted."""
    lines = data.split(b"\n")
    at = rng.randrange(len(lines))
    op = rng.randrange(5)
    if op == 0:
        words = lines[at].split(b" ")
        words[rng.randrange(len(words))] = rng.choice(INTERESTING_TEXT).encode("utf-8", "surrogateescape")
        lines[at] = b" ".join(words)
    elif op == 1:
        lines[at:at] = [lines[at]] * rng.choice([2, 100, 10000])
    elif op == 2:
        del lines[at]
    elif op == 3:
        lines[at:at] = [b""] * rng.choice([1, 1000, 100000])
    else:
        lines.insert(
            at,
            rng.choice([b"@@ memdirs 5", b"@@ cgroup.stat", b"@@ subtree x", b"stat 81a4 0 0 5 metadata /x"]),
        )
    return b"\n".join(lines)


def _header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.GNU_FORMAT)  # base-256 sizes past 8 GiB


def hostile_header(rng: random.Random) -> bytes:
    """An extended or odd header with content: pax records (also quadratic ones), a long name, a
    sparse member, or a size over what follows."""
    kind = rng.choice(
        [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_SPARSE, b"0"]
    )
    records = [
        b"30 path=./" + b"a" * 19 + b"\n",
        b"2 " * rng.randint(1, 20000) + b"=\n",
        b"20 GNU.sparse.major=1\n20 GNU.sparse.minor=0\n",
        b"99999999999 size=1\n",
        b"%d size=%s\n" % (12, rng.choice([b"-1", b"99999999999999999999", b"nan"])),
        rng.randbytes(rng.randint(0, 2000)),
    ]
    body = rng.choice(records)
    size = rng.choice([len(body), len(body), 10**9, 0, 1 << 33])
    return _header(f"./h{rng.randrange(1000)}", kind, size) + body + b"\0" * (-len(body) % 512)


def hostile_schema(rng: random.Random) -> list[str]:
    blob = "x'0000000100000010000003e80000000600000000000000016100'"
    choices = [
        ["CREATE TABLE t(x)", "CREATE VIEW Packages AS SELECT 1 AS hnum, zeroblob(900000000) AS blob"],
        ["CREATE VIEW Packages AS WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c) "
         f"SELECT n AS hnum, {blob} AS blob FROM c"],
        ["CREATE TABLE Packages (hnum INTEGER, blob BLOB GENERATED ALWAYS AS (zeroblob(100000000)))",
         "INSERT INTO Packages (hnum) VALUES (1)"],
        ["CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB)",
         f"INSERT INTO Packages (blob) VALUES (zeroblob({rng.choice([10, 20_000_000, 1000])}))"],
        ["CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB)",
         f"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c LIMIT {rng.choice([10, 50000])}) "
         f"INSERT INTO Packages (blob) SELECT {blob} FROM c"],
        ["CREATE TABLE Packages (blob BLOB, hnum INTEGER PRIMARY KEY) WITHOUT ROWID",
         f"INSERT INTO Packages VALUES ({blob}, 1)"],
        ["CREATE TABLE t(x)", "CREATE TRIGGER Packages AFTER INSERT ON t BEGIN SELECT 1; END"],
        ["CREATE VIRTUAL TABLE Packages USING fts5(blob)"],
        ["CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob TEXT)",
         "INSERT INTO Packages (blob) VALUES ('x')"],
        ["CREATE TABLE Packages (hnum, blob)", "CREATE INDEX i ON Packages (length(blob))",
         f"INSERT INTO Packages VALUES (1, {blob})"],
    ]  # fmt: skip
    return rng.choice(choices)


def mutate_json(rng: random.Random, document: Any) -> Any:
    """A random value of the report replaced by a hostile one; half the time a finding's evidence
    (free-form in the schema, so the value gets past it to what reads the report)."""
    document = json.loads(json.dumps(document))
    parent: Any = None
    key: Any = None
    node = document
    if document.get("findings") and rng.random() < 0.5:
        parent = rng.choice(document["findings"]).setdefault("evidence", {})
        key = rng.choice([*parent, "new"])
    for _ in range(rng.randint(1, 8) if parent is None else 0):
        if isinstance(node, dict) and node:
            parent, key = node, rng.choice(list(node))
        elif isinstance(node, list) and node:
            parent, key = node, rng.randrange(len(node))
        else:
            break
        node = parent[key]
    if parent is None:
        return document
    nested: Any = "x"
    for _ in range(rng.choice([10, 600, 900])):  # json.dumps itself recurses to 1,000
        nested = [nested] if rng.random() < 0.5 else {"k": nested}
    parent[key] = rng.choice(
        [nested, float("nan"), float("inf"), 10**rng.randint(20, 4000), None, [], {}, "é\n\x1b[31m", -1, True,
         [0] * rng.choice([10, 400_000]), "x" * rng.choice([10, 5_000_000])]
    )  # fmt: skip
    if rng.random() < 0.2 and isinstance(parent, dict):
        del parent[key]
    return document


# -- cases ------------------------------------------------------------------------------------------


def build_case(surface: str, rng: random.Random, bases: Bases, work: Path) -> Callable[[], object]:
    """Write the case's input under ``work``; return what reads it."""
    n = rng.randint(1, 4)
    if surface == "tar":
        data = bases.tar
        for _ in range(n):
            if rng.random() < 0.4:
                at = rng.randrange(max(1, len(data) // 512)) * 512
                data = data[:at] + hostile_header(rng) + data[at:]
            else:
                data = mutate_bytes(rng, data)
        path = work / "bundle.tar"
        path.write_bytes(gzip.compress(data, 1) if rng.random() < 0.5 else data)
        return lambda: _extract_and_read(path)
    if surface == "records":
        from tests.bundle.support import pack

        items = list(bases.items)
        records = [
            i for i, (m, data) in enumerate(items) if data is not None and m.name.startswith("imagelint/")
        ]
        for _ in range(n):
            i = rng.choice(records)
            member, data = items[i]
            assert data is not None
            data = mutate_lines(rng, data) if rng.random() < 0.6 else mutate_bytes(rng, data)
            items[i] = (member, data)
        path = pack(items, work / "bundle.tar.gz")
        return lambda: _bundle_reports(path)
    if surface == "rpmdb":
        db = work / "image/var/lib/rpm/rpmdb.sqlite"
        db.parent.mkdir(parents=True)
        if rng.random() < 0.4:
            with sqlite3.connect(db) as conn:
                for statement in hostile_schema(rng):
                    conn.execute(statement)
            conn.close()
        else:
            data = bases.rpmdb
            for _ in range(n):
                page = rng.choice([0, 1, 2, rng.randrange(max(1, len(data) // 4096))])
                head, tail = data[: page * 4096], data[page * 4096 :]
                data = head + mutate_bytes(rng, tail[:4096]) + tail[4096:]
            db.write_bytes(data)
        if rng.random() < 0.05:
            os.truncate(db, rng.choice([129, 400, 600]) * 1024 * 1024)
        return lambda: _packages(work / "image")
    if surface == "dpkg":
        status = work / "image/var/lib/dpkg/status"
        status.parent.mkdir(parents=True)
        if rng.random() < 0.1:
            unit = rng.choice(
                [b"\n", b"a: b\n\n", b"x\n", b"Package: x\n", b"Package: p\nStatus: install ok installed\n\n"]
            )
            data = unit * ((rng.choice([1, 16]) * 1024 * 1024 - 1) // len(unit))
        else:
            data = bases.status
            for _ in range(n):
                data = mutate_lines(rng, data) if rng.random() < 0.6 else mutate_bytes(rng, data)
        status.write_bytes(data)
        return lambda: _packages(work / "image")
    path = work / "report.json"
    if rng.random() < 0.6:
        path.write_text(json.dumps(mutate_json(rng, bases.report), allow_nan=True))
    else:
        data = json.dumps(bases.report).encode()
        for _ in range(n):
            data = mutate_bytes(rng, data)
        path.write_bytes(data)
    return lambda: _report(path, bases.image)


def _extract_and_read(path: Path) -> object:
    from imagelint.bundle import probes
    from imagelint.bundle.extract import extract

    extracted = extract(path)
    try:
        probes.live_state(extracted.meta)
        return probes.restart_snapshot(extracted.meta, "end")
    finally:
        extracted.cleanup()


def _prepared() -> object:
    from imagelint.config import Config
    from imagelint.rulepacks import builtin_pack_paths, load_packs
    from imagelint.session import PreparedRun, RunOptions

    return PreparedRun(RunOptions(outputs=[]), tuple(load_packs([], builtin=builtin_pack_paths())), Config())


def _bundle_reports(path: Path) -> object:
    from imagelint.session import bundle_reports

    return bundle_reports(_prepared(), path)  # type: ignore[arg-type]


def _packages(root: Path) -> object:
    from imagelint.facts.packages import load_packages
    from imagelint.targets import RootfsTarget

    return load_packages(RootfsTarget(root)).to_dict()


def _report(path: Path, image: Path) -> object:
    from imagelint.commands.diff import load_side
    from imagelint.report.baseline import load_baseline

    load_baseline(path)
    return load_side(path, _prepared())  # type: ignore[arg-type]


# -- running a case in a child ----------------------------------------------------------------------


@dataclass
class Outcome:
    status: str  # "ok", "documented" (an ImageLintError), "crash", "timeout", "signal"
    signature: str = ""
    detail: str = ""
    seconds: float = 0.0
    peak_kib: int = 0


def signature(exc: BaseException) -> str:
    """Exception type and innermost frame: what tells one crash from another."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno} {frames[-1].name}" if frames else "?"
    return f"{type(exc).__name__} at {where}"


def vm_size_kib() -> int:
    """This process's address space (VmSize of /proc/self/status), in KiB."""
    with open("/proc/self/status") as f:
        return next((int(line.split()[1]) for line in f if line.startswith("VmSize:")), 0)


def run_in_child(job: Callable[[], object], *, timeout: float, as_bytes: int) -> Outcome:
    """``job()`` in a forked child under ``RLIMIT_AS``; killed after ``timeout`` s."""
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        result: dict[str, str] = {"status": "ok"}
        try:
            # on top of what the fork inherited (a whole test session's memory, in the suite)
            space = vm_size_kib() * 1024 + as_bytes
            resource.setrlimit(resource.RLIMIT_AS, (space, space))
            job()
        except ImageLintError:
            result = {"status": "documented"}
        except BaseException as exc:  # every other exception is what the fuzzer looks for
            result = {
                "status": "crash",
                "signature": signature(exc),
                "detail": traceback.format_exc()[-3000:],
            }
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    timed_out = False
    try:
        while True:
            left = started + timeout - time.monotonic()
            if left <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status, usage = os.wait4(pid, 0)
    elapsed = time.monotonic() - started
    peak = usage.ru_maxrss
    if timed_out:
        return Outcome("timeout", f"timeout over {timeout:g} s", "", elapsed, peak)
    if os.WIFSIGNALED(status):
        return Outcome("signal", f"killed by signal {os.WTERMSIG(status)}", "", elapsed, peak)
    result = json.loads(b"".join(chunks) or b'{"status": "signal", "signature": "no result"}')
    return Outcome(result["status"], result.get("signature", ""), result.get("detail", ""), elapsed, peak)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one case may take")
    ap.add_argument("--as-mib", type=int, default=1024, help="RLIMIT_AS of a case's child")
    ap.add_argument("--surface", action="append", choices=SURFACES, help="only these (repeatable)")
    ap.add_argument("--show", type=int, default=5, help="print a traceback for the first K signatures")
    ap.add_argument("--progress", type=int, default=500, help="print a line every N cases (0: never)")
    args = ap.parse_args(argv)
    surfaces = tuple(args.surface or SURFACES)

    scratch = Path(tempfile.mkdtemp(prefix="fuzz-inputs-"))
    try:
        bases = make_bases(scratch / "bases")
        print(
            f"bases: bundle {len(bases.tar):,} bytes ({len(bases.items)} members), "
            f"rpmdb {len(bases.rpmdb):,}, status {len(bases.status):,}, "
            f"report {len(json.dumps(bases.report)):,}",
            flush=True,
        )
        return _fuzz(args, surfaces, bases, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _fuzz(args: argparse.Namespace, surfaces: tuple[str, ...], bases: Bases, scratch: Path) -> int:
    crashes: dict[str, tuple[int, str, str]] = {}
    counts: dict[str, int] = {}
    per_surface: dict[str, dict[str, int]] = {s: {} for s in surfaces}
    slowest = (0.0, -1, "")
    peak = (0, -1, "")
    mutator_errors = 0
    started = time.monotonic()
    for case in range(args.cases):
        rng = random.Random(f"{args.seed}:{case}")
        surface = surfaces[case % len(surfaces)]
        work = scratch / f"case-{case}"
        work.mkdir()
        try:
            job = build_case(surface, rng, bases, work)
        except Exception as exc:  # a fault of the mutator (this script), not of imagelint
            mutator_errors += 1
            print(f"case {case}: mutator failed ({signature(exc)})", flush=True)
            shutil.rmtree(work, ignore_errors=True)
            continue
        try:
            outcome = run_in_child(job, timeout=args.timeout, as_bytes=args.as_mib * 1024 * 1024)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        tally = per_surface[surface]
        tally[outcome.status] = tally.get(outcome.status, 0) + 1
        if outcome.seconds > slowest[0]:
            slowest = (outcome.seconds, case, surface)
        if outcome.peak_kib > peak[0]:
            peak = (outcome.peak_kib, case, surface)
        if outcome.status in ("crash", "timeout", "signal"):
            sig = f"{surface}: {outcome.signature}"
            counts[sig] = counts.get(sig, 0) + 1
            if sig not in crashes:
                crashes[sig] = (case, surface, outcome.detail)
                print(f"case {case}: NEW CRASH {sig}", flush=True)
        if args.progress and (case + 1) % args.progress == 0:
            rate = (case + 1) / (time.monotonic() - started)
            print(f"  {case + 1} cases, {len(crashes)} crash signature(s), {rate:.1f} cases/s", flush=True)
    elapsed = time.monotonic() - started
    print(f"cases run: {args.cases} (seed {args.seed}); mutator errors: {mutator_errors}; per surface:")
    for surface, tally in per_surface.items():
        print(f"  {surface:8s} " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    print(f"unique crash signatures: {len(crashes)}")
    for i, (sig, (case, _surface, detail)) in enumerate(sorted(crashes.items(), key=lambda kv: kv[1][0])):
        print(f"  {counts[sig]:6d} x {sig}   (first: seed {args.seed} case {case})")
        if i < args.show and detail:
            print("    " + detail.replace("\n", "\n    "))
    print(f"slowest case: {slowest[0]:.2f} s (case {slowest[1]}, {slowest[2]})")
    print(f"peak RSS of a case: {peak[0] / 1024:.0f} MiB (case {peak[1]}, {peak[2]})")
    print(f"elapsed: {elapsed:.1f} s ({args.cases / elapsed:.1f} cases/s)")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
