"""A sample of ``benchmarks/fuzz_inputs.py``: a few hundred seeded hostile inputs across every
surface (bundle tar headers, bundle records, rpmdb, dpkg status, reports), each in a forked child
with an address-space limit and a time limit, end in the project's error types or in a result:
no other exception, no death by signal, no timeout, and none over the memory bound."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support import REPO
from tests.treerss import MAX_RSS_MIB


@pytest.mark.slow
def test_a_sample_of_hostile_inputs_never_crashes() -> None:
    # in a fresh interpreter: a case forked from a test worker would inherit (and be charged) the
    # worker's whole memory, hundreds of MiB after other tests
    args = ["--cases", "200", "--seed", "22", "--timeout", "30", "--progress", "0"]
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "fuzz_inputs.py"), *args],
        capture_output=True, text=True, cwd=REPO, timeout=900, check=False,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-2000:]
    assert "unique crash signatures: 0" in out
    # each case runs in a forked child that starts nothing: wait4's ru_maxrss is its whole tree
    peak = re.search(r"peak RSS of a case: (\d+) MiB", out)
    assert peak is not None and int(peak.group(1)) <= MAX_RSS_MIB, out
