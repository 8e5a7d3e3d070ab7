"""Hostile inputs for tests and ``benchmarks/fuzz_inputs.py``: a real collector bundle with a soak,
rewritten member by member; and running the real CLI on an input, measuring it (exit code, stderr,
peak RSS).

The CLI runs through :func:`tests.support.run_cli` inside a fresh Python process whose only child it
is, so that process's ``RUSAGE_CHILDREN`` maximum is the CLI's own peak RSS (the test process's
would also count every tool an earlier test ran)."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO

MAX_RSS_MIB = 150
_MEASURE = """
import json, resource, sys
from tests.support import run_cli
proc = run_cli(*sys.argv[2:], timeout=float(sys.argv[1]))
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps([proc.returncode, proc.stderr, proc.stdout[-2000:], peak]))
"""


@dataclass
class Measured:
    returncode: int
    stderr: str
    stdout: str
    peak_mib: float

    def assert_one_line(self, code: int, *words: str) -> None:
        """Ended with ``code``, one stderr line holding ``words``, within the RSS bound."""
        lines = self.stderr.splitlines()
        assert self.returncode == code, (self.returncode, self.stderr[-2000:], self.stdout)
        assert len(lines) == 1, self.stderr[-2000:]
        assert "Traceback" not in self.stderr and "internal error" not in self.stderr
        for word in words:
            assert word in lines[0], lines[0]
        assert self.peak_mib <= MAX_RSS_MIB, f"peak RSS {self.peak_mib:.0f} MiB"


def run_cli_measured(*args: str, timeout: float = 90) -> Measured:
    """``imagelint ARGS`` as a user runs it; a CLI still running after ``timeout`` s fails the test."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(timeout), *args],
        capture_output=True, text=True, env=env, timeout=timeout + 30, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]  # the measuring process itself (a timeout...)
    code, stderr, stdout, peak_kib = json.loads(proc.stdout)
    return Measured(code, stderr, stdout, peak_kib / 1024)


def collect_soak_bundle(work: Path) -> Path:
    """What the real collector records of a near-empty tree with a 0.2 s soak on this host
    (``systemctl show`` included: where no systemd runs, its failure is recorded)."""
    from imagelint.collector import script_text
    from imagelint.collector.plan import Plan, needs_for
    from imagelint.config import Config
    from imagelint.rulepacks import Scope
    from tests.collector.support import DEFAULT_LIMITS, PACKS

    (work / "root/etc").mkdir(parents=True)
    plan = Plan(
        needs_for(PACKS, Config(), (Scope.IMAGE,)),
        show=True, soak_seconds=0.2, soak_interval=0.1, limits=DEFAULT_LIMITS, root=str(work / "root"),
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
