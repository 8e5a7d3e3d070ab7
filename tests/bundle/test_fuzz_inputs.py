"""A sample of ``benchmarks/fuzz_inputs.py``: a few hundred seeded hostile inputs across every
surface (bundle tar headers, bundle records, rpmdb, dpkg status, reports), each in a forked child
with an address-space limit and a time limit, end in the project's error types or in a result:
no other exception, no death by signal, no timeout."""

from __future__ import annotations

import sys

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import fuzz_inputs


@pytest.mark.slow
def test_a_sample_of_hostile_inputs_never_crashes(capsys) -> None:  # type: ignore[no-untyped-def]
    code = fuzz_inputs.main(["--cases", "200", "--seed", "22", "--timeout", "30", "--progress", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "unique crash signatures: 0" in out
