"""Fixtures: real journal files written by systemd-journal-remote, and journalctl as the oracle."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.facts.journal.exportgen import (
    MACHINE_ID,
    large_history,
    need_journal_remote,
    scenario,
    write_journal,
)
from tests.support import need

JOURNALCTL = shutil.which("journalctl")


def have_tools() -> None:
    need_journal_remote()
    need(JOURNALCTL is not None, "journalctl is not installed")


def journalctl_json(*args: str, all_fields: bool = True) -> list[dict[str, object]]:
    """Entries as the real journalctl prints them with ``-o json``."""
    cmd = [JOURNALCTL or "journalctl", "--no-pager", "-o", "json", *(["--all"] if all_fields else []), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    # journalctl exits 1 with "-- No entries --" on stderr-free empty results in some modes
    assert proc.returncode in (0, 1), proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def journal_file(d: Path) -> Path:
    (f,) = sorted((d / MACHINE_ID).glob("*.journal"))
    return f


@pytest.fixture(scope="session")
def journals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same multi-boot history written in each layout journal-remote 252 can produce.

    keyed: KEYED_HASH + ZSTD + COMPACT (the 252 default); legacy: Jenkins hash, 64-bit offsets, ZSTD;
    plain: keyed + compact, no compression. Each value is a directory holding MACHINE_ID/system.journal.
    """
    have_tools()
    base = tmp_path_factory.mktemp("journals")
    data = scenario(seed=11)
    return {
        "keyed": write_journal(data, base / "keyed"),
        "legacy": write_journal(data, base / "legacy", legacy=True),
        "plain": write_journal(data, base / "plain", compress=False),
    }


@pytest.fixture(scope="session")
def two_writers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two journal files from two writers (different seqnum ids) whose entries interleave in time."""
    have_tools()
    base = tmp_path_factory.mktemp("two")
    entries = scenario(seed=5, boots=2, loop_minutes=4).split(b"\n\n")
    entries = [e + b"\n\n" for e in entries if e.strip()]
    write_journal(b"".join(entries[0::2]), base, name="system.journal")
    write_journal(b"".join(entries[1::2]), base, name="user-1000.journal")
    return base


@pytest.fixture(scope="session")
def long_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal of 100,000 entries (10,000 crash-loop turns among noise): long enough to be read for
    a while, so that a test can change it under a reader. Copy it before changing it."""
    have_tools()
    return write_journal(large_history(100_000, restart_cycles=10_000), tmp_path_factory.mktemp("long"))


@pytest.fixture
def copied(long_journal: Path, tmp_path: Path) -> Path:
    """A private copy of the long journal, for a test that cuts it."""
    return Path(shutil.copytree(long_journal, tmp_path / "journal"))
