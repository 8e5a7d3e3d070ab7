"""A sample of ``benchmarks/fuzz_disk.py``: 300 mutated headers of small real images, no crash.

Each case runs the public opener and a few reads in a forked child under RLIMIT_AS 1 GiB and an
alarm (``tests/targets/disk/fuzzing.py``). Seed "1" is the run that found a ValueError from an LVM
metadata offset past 2^63, an OSError escaping the root search of an XFS with a corrupt inode
number and an EOFError from a VHDX's block allocation table; the long run is the benchmark, and
what it found (seed "long-1") is replayed case by case.
"""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest

from tests.support import need
from tests.targets.disk import fuzzing, images

CASES = 300


def _corpus(tmp_path: Path) -> tuple[dict[str, Path], dict[str, Path], dict[str, int]]:
    for tool in ("mke2fs", "sfdisk", "qemu-img", "mkfs.xfs", "debugfs"):
        need(shutil.which(tool) is not None, f"{tool} is not installed")
    where = images.cache_dir() / "fuzz-corpus"
    where.mkdir(exist_ok=True)
    with open(where / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        corpus = fuzzing.build_corpus(where)
    copies, sizes = fuzzing.prepare(corpus, tmp_path)
    fuzzing.preload()
    return corpus, copies, sizes


@pytest.mark.parametrize(
    "number",
    [
        7138,  # a qcow2 backing file offset past what lseek takes: OSError (EINVAL) from the check
        12749,  # a hybrid MBR entry in a GPT disk: AttributeError (no last_lba)
        6926,  # a qcow2 with extended L2 entries: dissect's zero runs took 14 GiB
    ],
)
def test_the_long_run_s_crashes_stay_fixed(tmp_path: Path, number: int) -> None:
    corpus, copies, sizes = _corpus(tmp_path)
    case = fuzzing.make_case("long-1", number, corpus, sizes)
    out = fuzzing.run_case(case, corpus[case.name], copies[case.name], timeout=20)
    assert out.result != "crash", out.signature


def test_a_sample_of_the_disk_fuzzer_finds_no_crash(tmp_path: Path) -> None:
    corpus, copies, sizes = _corpus(tmp_path)
    crashes = {}
    answers = set()
    for n in range(CASES):
        case = fuzzing.make_case("1", n, corpus, sizes)
        out = fuzzing.run_case(case, corpus[case.name], copies[case.name], timeout=20)
        answers.add(out.result)
        if out.result == "crash":
            crashes.setdefault(out.signature, (n, case.name, case.patches))
    assert not crashes, crashes
    assert answers == {"opened", "refused"}  # the mutations both break and spare images
