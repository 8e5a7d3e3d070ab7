"""A sample of ``benchmarks/fuzz_disk.py``: 300 mutated headers of small real images, no crash.

Each case runs the public opener and a few reads in a forked child under RLIMIT_AS 1 GiB and an
alarm (``tests/targets/disk/fuzzing.py``). Seed "1" is the run that found a ValueError from an LVM
metadata offset past 2^63, an OSError escaping the root search of an XFS with a corrupt inode
number and an EOFError from a VHDX's block allocation table; the long run is the benchmark.
"""

from __future__ import annotations

import fcntl
import shutil

from tests.support import need
from tests.targets.disk import fuzzing, images

CASES = 300


def test_a_sample_of_the_disk_fuzzer_finds_no_crash(tmp_path) -> None:
    for tool in ("mke2fs", "sfdisk", "qemu-img", "mkfs.xfs", "debugfs"):
        need(shutil.which(tool) is not None, f"{tool} is not installed")
    where = images.cache_dir() / "fuzz-corpus"
    where.mkdir(exist_ok=True)
    with open(where / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        corpus = fuzzing.build_corpus(where)
    copies, sizes = fuzzing.prepare(corpus, tmp_path)
    fuzzing.preload()
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
