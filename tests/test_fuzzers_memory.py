"""Every fuzzer's sample, run as its benchmark script in a fresh interpreter: no crash, and the whole
process tree within the hostile-input bound (``tests.treerss.MAX_RSS_MIB``).

The in-process property tests (journal, disk, units, YAML, formats, caches) check each case's
growth inside a test worker, whose own memory is hundreds of MiB after other tests. Here the same
mutators run from a process that starts with nothing else: the tree's peak is the fuzzer's
interpreter plus its worst case, measured by ``wait4`` (``tests/treerss.py``). The bundle fuzzer
has its own test of this kind (``tests/bundle/test_fuzz_inputs.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tests.treerss import MAX_RSS_MIB, run_tree

# script, its arguments: a few hundred cases each (the scripts run millions for the benchmarks)
SAMPLES = {
    "fuzz_journal": ["--cases", "300", "--seed", "41", "--progress", "0"],
    "fuzz_formats": ["--cases", "300", "--seed", "41", "--deep-every", "100"],
    "fuzz_yaml": ["--cases", "200", "--seed", "41"],
    "fuzz_caches": ["--cases", "100", "--seed", "41"],
}


def _sample(script: str, args: list[str]) -> None:
    run = run_tree([sys.executable, str(REPO / "benchmarks" / f"{script}.py"), *args], timeout=600, cwd=REPO)
    out = run.stdout + run.stderr[-3000:]
    assert run.returncode == 0, out  # each script exits 1 when a case crashed, hung or grew too much
    assert run.peak_mib <= MAX_RSS_MIB, f"{script}: the tree's peak was {run.peak_mib:.0f} MiB\n{out}"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SAMPLES))
def test_a_fuzzers_sample_stays_within_the_bound(script: str) -> None:
    _sample(script, SAMPLES[script])


@pytest.mark.slow
def test_the_unit_file_fuzzers_sample_stays_within_the_bound(debian_rootfs: Path) -> None:
    _sample("fuzz_units", ["--cases", "1000", "--seed", "41", "--root", str(debian_rootfs)])


@pytest.mark.slow
def test_the_disk_fuzzers_sample_stays_within_the_bound(tmp_path_factory: pytest.TempPathFactory) -> None:
    corpus = tmp_path_factory.mktemp("disk-corpus")
    _sample("fuzz_disk", ["--cases", "200", "--seed", "41", "--corpus", str(corpus)])
