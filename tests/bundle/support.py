"""Running the real CLI on a hostile input and measuring it: exit code, stderr and peak RSS.

The CLI runs through :func:`tests.support.run_cli` inside a fresh Python process whose only child it
is, so that process's ``RUSAGE_CHILDREN`` maximum is the CLI's own peak RSS (the test process's
would also count every tool an earlier test ran)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

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
