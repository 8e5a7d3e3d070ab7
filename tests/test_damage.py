"""Damage never passes (issue 40): a structure an audit reads, damaged, is never read as an absent,
empty or different file. The seeded property runs a sample here; ``benchmarks/damage.py`` runs
thousands of cases of the same generator (:mod:`tests.support_damage`)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.support_damage import CLASSES, DEFECTS, Corpus, Work, audit, build_corpus, make_case, sample_run
from tests.targets.disk import small_images

CASES = 240  # ~20 ms each


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    from tests.facts.journal.conftest import have_tools

    for tool in ("mke2fs", "debugfs", "dumpe2fs", "sfdisk", "qemu-img"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    have_tools()  # systemd-journal-remote writes the sample's journal
    return build_corpus()


def test_damage_never_passes(corpus: Corpus, tmp_path: Path) -> None:
    work = Work(corpus, tmp_path)
    seen: Counter[tuple[str, str]] = Counter()
    defects = []
    for number in range(CASES):
        case = make_case("make-test", number, corpus)
        answer = work.run_case(case)
        seen[(case.structure.cls, answer.outcome)] += 1
        if answer.outcome in DEFECTS:
            defects.append(f"{case.label()}: {answer.outcome} {answer.detail}")
    print("\n".join(f"{cls}: {outcome}: {n}" for (cls, outcome), n in sorted(seen.items())))
    assert not defects, "\n".join(defects[:20])
    assert {cls for cls, _ in seen} == set(CLASSES), "every class of structure is damaged at least once"


def _zeroed_extent_header(corpus: Corpus, tmp_path: Path, image_path: str) -> Path:
    """The sample's filesystem with ``image_path``'s extent header zeroed and its inode resealed, as
    a crafted (or unluckily damaged) image carries it: only the extent tree is wrong."""
    fs = tmp_path / "sample.ext4"
    shutil.copyfile(corpus.files["fs"], fs)
    small_images.patch(fs, small_images.inode_offset(fs, image_path) + 40, bytes(12))
    small_images.reseal(fs, image_path)
    return fs


def test_a_unit_file_whose_extent_header_is_zeroed_is_an_error_not_a_milder_finding(
    corpus: Corpus, tmp_path: Path
) -> None:
    """The issue: IL201 (high) read the unreadable unit file as empty and became IL204 (medium)."""
    unit = "/usr/lib/systemd/system/ecs.service"
    report = audit(sample_run(), _zeroed_extent_header(corpus, tmp_path, unit))
    outcomes = {r.rule_id: r.outcome.value for r in report.rules}
    assert outcomes["IL201"] == "error", outcomes
    assert any(e.where == unit and e.rule_id == "IL201" for e in report.errors), report.errors
    assert not [f for f in report.findings if f.path == unit and f.failing], "read as a unit without data"


def test_an_unreadable_os_release_marks_the_run_and_the_inventory(corpus: Corpus, tmp_path: Path) -> None:
    """No rule reads /etc/os-release, but the inventory does (a diff compares it): the report carries
    the damage as an error (the run cannot pass) and the inventory is incomplete."""
    report = audit(sample_run(), _zeroed_extent_header(corpus, tmp_path, "/etc/os-release"))
    assert any(e.where == "/etc/os-release" for e in report.errors), report.errors
    assert report.inventory is not None and report.inventory["complete"] is False
    assert report.verdict.value == "fail"  # the sample's findings still fail; damage alone: inconclusive


def test_a_bit_flipped_in_a_directory_block_is_damage(corpus: Corpus, tmp_path: Path) -> None:
    """metadata_csum: a flipped bit in a name of /etc/cron.d would list another file, never damage,
    without the directory block's checksum."""
    fs = tmp_path / "sample.ext4"
    shutil.copyfile(corpus.files["fs"], fs)
    out = subprocess.run(["debugfs", "-R", "blocks /etc/cron.d", str(fs)], capture_output=True, text=True)
    block = int(out.stdout.split()[0]) * small_images.block_size(fs)
    with open(fs, "r+b") as f:  # the first entry after "." and "..": "sync" (each 12 bytes)
        f.seek(block + 24 + 8)
        name = f.read(1)
        f.seek(block + 24 + 8)
        f.write(bytes([name[0] ^ 0x20]))
    report = audit(sample_run(), fs)
    assert any(e.where == "/etc/cron.d" for e in report.errors), report.errors
    assert "IL109" not in {f.rule_id for f in report.findings if f.failing}
