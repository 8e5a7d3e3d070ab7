"""Decompression bombs: a problem on the entry (inconclusive), never a crash, never a pass, and
never more than 150 MiB of peak RSS, whatever the algorithm and whatever the payload claims.

Each journal is real (systemd-journal-remote), with one DATA object's payload replaced by a bomb
(see ``tests/facts/journal/bombs.py``). Peak RSS is that of a fresh process reading the journal through
every public path (all entries, the restart analysis, every built-in signal). Before the fix a
60 KB zstd object of 1.5 GiB of zeros took the reader to 1.6 GB.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.facts.journal.bombs import KINDS, bomb_journal, normal_journal, peak_rss
from tests.facts.journal.conftest import have_tools
from tests.support import os_root, run_cli_measured
from tests.treerss import MAX_RSS_MIB

MIB = 1024 * 1024
# under the old 64 MiB cap (decoded, then copied) and far beyond it; the gigabyte-sized ones only for
# the algorithms whose bombs are quick to build (xz compresses zeros at ~180 MB/s)
CASES = [(kind, 60 * MIB) for kind in KINDS] + [
    (kind, 1536 * MIB) for kind in ("zstd", "zstd-undeclared", "lz4", "lz4-lying")
]


@pytest.mark.parametrize(("kind", "size"), CASES, ids=[f"{k}-{s // MIB}MiB" for k, s in CASES])
def test_bomb_stays_under_the_memory_bound(tmp_path: Path, kind: str, size: int) -> None:
    have_tools()
    result = peak_rss(bomb_journal(kind, tmp_path, size))
    assert result["peak_mib"] <= MAX_RSS_MIB, result  # type: ignore[operator]
    ((status, reason),) = result["files"]  # type: ignore[misc]
    assert status == "partial", result
    assert "limit" in reason or "cannot decompress" in reason, reason
    # the rest of the journal is still read: every entry but the bomb's
    assert result["entries"] == 200


def test_the_unbombed_journal_reads_in_full(tmp_path: Path) -> None:
    have_tools()
    normal_journal(tmp_path)
    result = peak_rss(tmp_path)
    assert result["files"] == [["read", None]] and result["entries"] == 201 and result["signals"] == 1


def test_a_bomb_makes_the_audit_inconclusive(tmp_path: Path) -> None:
    have_tools()
    root = os_root(tmp_path / "image")
    bomb_journal("zstd", root / "var/log/journal", 1536 * MIB)
    report_path = tmp_path / "report.json"
    run = run_cli_measured("audit", str(root), "--select", "pack:journal", "-f", f"json:{report_path}")
    assert "Traceback" not in run.stderr
    report = json.loads(report_path.read_text())
    assert run.returncode == 3 and report["verdict"] == "inconclusive"
    run.assert_within_memory()
    assert any("size limit" in e["message"] for e in report["errors"]), report["errors"]


def test_a_large_legitimate_value_is_read(tmp_path: Path) -> None:
    """A value just under the cap (15 MiB, compressed by journal-remote) is read, within the bound."""
    have_tools()
    import random

    from tests.facts.journal.exportgen import Host, export_entry, kubelet_line, write_journal

    host = Host(3)
    host.new_boot(1_736_000_000_000_000)
    rng = random.Random(1)
    message = "ena 0000:00:05.0 eth0: Trigger reset is on " + rng.randbytes(15 * MIB // 2).hex()
    export = export_entry([*host._base(), ("_TRANSPORT", "kernel"), ("MESSAGE", message)])
    export += b"".join(kubelet_line(host, i) for i in range(50))
    write_journal(export, tmp_path)
    result = peak_rss(tmp_path)
    assert result["files"] == [["read", None]] and result["signals"] == 1
    assert result["peak_mib"] <= MAX_RSS_MIB, result  # type: ignore[operator]
    shutil.rmtree(tmp_path)
