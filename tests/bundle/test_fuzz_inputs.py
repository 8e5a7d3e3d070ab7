"""A sample of ``benchmarks/fuzz_inputs.py``: a few hundred seeded hostile inputs across every
surface (bundle tar headers, bundle records, rpmdb, dpkg status, reports), each in a forked child
with an address-space limit and a time limit, end in the project's error types or in a result:
no other exception, no death by signal, no timeout, and none over the memory bound."""

from __future__ import annotations

import re
import sys

import pytest

from tests.support import REPO
from tests.treerss import MAX_RSS_MIB

sys.path.insert(0, str(REPO / "benchmarks"))

import fuzz_inputs


@pytest.mark.slow
def test_a_sample_of_hostile_inputs_never_crashes(capsys) -> None:  # type: ignore[no-untyped-def]
    code = fuzz_inputs.main(["--cases", "200", "--seed", "22", "--timeout", "30", "--progress", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "unique crash signatures: 0" in out
    # each case runs in a forked child that starts nothing: wait4's ru_maxrss is its whole tree
    peak = re.search(r"peak RSS of a case: (\d+) MiB", out)
    assert peak is not None and int(peak.group(1)) <= MAX_RSS_MIB, out
