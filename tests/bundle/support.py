"""Hostile inputs for tests and ``benchmarks/fuzz_inputs.py``: a real collector bundle with a soak,
rewritten member by member; and running the real CLI on an input, measuring it (exit code, stderr,
peak RSS).

The CLI runs through :func:`tests.support.run_cli` inside a fresh Python process whose only child it
is, so that process's ``RUSAGE_CHILDREN`` maximum is the CLI's own peak RSS (the test process's
would also count every tool an earlier test ran)."""

from __future__ import annotations

import gzip
import io
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path


def collect_soak_bundle(
    work: Path, seconds: float = 0.2, interval: float = 0.1, *, marks: bool = True
) -> Path:
    """What the real collector records of a near-empty tree (an OS root's marks only) with a short
    soak on this host (``systemctl show`` included: where no systemd runs, its failure is recorded)."""
    from imagelint.collector import script_text
    from imagelint.collector.plan import Plan, needs_for
    from imagelint.config import Config
    from imagelint.rulepacks import Scope
    from tests.collector.support import DEFAULT_LIMITS, PACKS
    from tests.support import os_root

    if marks:
        os_root(work / "root")
    else:  # an /etc and nothing else: not an OS root
        (work / "root/etc").mkdir(parents=True, exist_ok=True)
    plan = Plan(
        needs_for(PACKS, Config(), (Scope.IMAGE,)),
        show=True, soak_seconds=seconds, soak_interval=interval, limits=DEFAULT_LIMITS,
        root=str(work / "root"),
    )  # fmt: skip
    (work / "collect.sh").write_text(script_text())
    (work / "plan.txt").write_text(plan.text())
    proc = subprocess.run(
        ["sh", str(work / "collect.sh"), str(work)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


def members(bundle: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The members of a bundle with the content of its regular files."""
    with tarfile.open(bundle) as tar:
        return [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]  # type: ignore[union-attr]


def pack(
    items: list[tuple[tarfile.TarInfo, bytes | None]], dest: Path, *, fmt: int = tarfile.GNU_FORMAT
) -> Path:
    """A gzip-compressed tar of ``items`` (a regular file's size set from its content)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for member, data in items:
            if data is not None:
                member.size = len(data)
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    dest.write_bytes(gzip.compress(out.getvalue(), 1))
    return dest


def rewritten(bundle: Path, dest: Path, edits: dict[str, Callable[[bytes], bytes]]) -> Path:
    """``bundle`` with the content of the named members passed through their edit."""
    items = [
        (m, edits[m.name](data) if m.name in edits and data is not None else data)
        for m, data in members(bundle)
    ]
    return pack(items, dest)
