"""Damaged journal objects are damage, never other data (issue 40): real journals, corrupted by hand.

Each journal is written by systemd-journal-remote, then one object is changed as a flipped bit or an
overwrite would change it: a DATA payload (plain and compressed), a DATA object's stored hash, its
entry count, the name of a DATA object a selective read wants, an ENTRY's items, size, sequence
number and boot id. ``journalctl --verify`` rejects every one of them but the last; the reader must
record each as a problem on the file naming the object's offset (the rules relying on the file are
then inconclusive), and never read the changed bytes as a value: a flipped bit in
``UNIT=ecs.service`` used to move the crash loop to another unit, and one in the restart record's
entry count to hide restarts, with the file read "in full".
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.journal import FileStatus, analyze_restarts, open_directory
from imagelint.facts.journal.restarts import RESTART_SCHEDULED
from tests.facts.journal.conftest import have_tools, journal_file
from tests.facts.journal.craft import OBJECT_COMPRESSED_ZSTD, OBJECT_DATA, JournalBytes
from tests.facts.journal.exportgen import scenario, write_journal

LAYOUTS = ("keyed", "legacy")  # siphash24 keyed by the file id; Jenkins lookup3


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The bytes of one small real journal per layout (a crash-looping ecs.service among noise)."""
    have_tools()
    base = tmp_path_factory.mktemp("integrity")
    data = scenario(seed=3, boots=1, loop_minutes=3)
    return {
        layout: journal_file(write_journal(data, base / layout, legacy=layout == "legacy")).read_bytes()
        for layout in LAYOUTS
    }


def _copy(written: dict[str, bytes], layout: str, tmp_path: Path) -> tuple[Path, JournalBytes]:
    d = tmp_path / layout
    d.mkdir()
    path = d / "system.journal"
    path.write_bytes(written[layout])
    return path, JournalBytes(written[layout])


def _data(jb: JournalBytes, payload: bytes) -> int:
    (off,) = [o for o in jb.find_data(payload) if jb.data_payload(o) == payload]
    return off


def _verify_fails(path: Path) -> None:
    """The real tool's opinion: the file is damaged."""
    done = subprocess.run(["journalctl", "--verify", "--file", str(path)], capture_output=True, text=True)
    assert done.returncode != 0, done.stderr


def _problem(path: Path) -> str:
    """The restart analysis of the directory holding ``path``: the file must be read in part only,
    with the reason; what could still be read must not include the damaged value."""
    with open_directory(path.parent) as journal:
        report = analyze_restarts(journal)
    (f,) = report.scan.files
    assert f.status is FileStatus.PARTIAL, (f.status, f.reason, [u.unit for u in report.units])
    assert f.reason is not None
    return f.reason


def test_the_undamaged_journals_read_in_full(written: dict[str, bytes], tmp_path: Path) -> None:
    for layout in LAYOUTS:
        path, _jb = _copy(written, layout, tmp_path)
        with open_directory(path.parent) as journal:
            report = analyze_restarts(journal)
        assert report.scan.complete, report.scan.summary()
        assert report.for_unit("ecs.service")[0].restarts == 18


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_bit_flipped_in_a_data_payload_is_damage(
    written: dict[str, bytes], tmp_path: Path, layout: str
) -> None:
    path, jb = _copy(written, layout, tmp_path)
    off = _data(jb, b"UNIT=ecs.service")
    jb.data[off + jb.data_payload_offset + len("UNIT=ec")] ^= 0x01  # ecs.service -> ecr.service
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    reason = _problem(path)
    assert "does not match its hash" in reason and f"{off:#x}" in reason, reason


def test_a_compressed_payload_is_checked_once_decompressed(written: dict[str, bytes], tmp_path: Path) -> None:
    """The hash is of the decompressed payload: another text, validly compressed, is still damage."""
    import zstandard

    path, jb = _copy(written, "keyed", tmp_path)
    (off,) = [
        o.offset
        for o in jb.objects()
        if o.type == OBJECT_DATA
        and o.flags == OBJECT_COMPRESSED_ZSTD
        and zstandard.ZstdDecompressor().decompress(jb.data_payload(o.offset)).startswith(b"BIG_TEXT=")
    ]
    other = zstandard.ZstdCompressor().compress(b"BIG_TEXT=" + b"consectetur adipiscing elit " * 40)
    new = jb.relocate_data(off, other, OBJECT_COMPRESSED_ZSTD)  # the old object's stored hash, kept
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    with open_directory(path.parent) as journal:
        texts = [e.get("BIG_TEXT") for e in journal.entries(["BIG_TEXT"])]
        (f,) = journal.scan.files
    assert not any(isinstance(t, str) and "consectetur" in t for t in texts)
    assert f.status is FileStatus.PARTIAL and f.reason is not None
    assert "does not match its hash" in f.reason and f"{new:#x}" in f.reason, f.reason


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_bit_flipped_in_a_stored_hash_is_damage(
    written: dict[str, bytes], tmp_path: Path, layout: str
) -> None:
    """The lookup of MESSAGE_ID=<restart scheduled> walks a chain in which its own object no longer
    hashes as it should: without the check the lookup skipped it and found no restart at all."""
    path, jb = _copy(written, layout, tmp_path)
    off = _data(jb, b"MESSAGE_ID=" + RESTART_SCHEDULED.encode())
    jb.data[off + 16] ^= 0x04
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    reason = _problem(path)
    assert "hash" in reason and f"{off:#x}" in reason, reason


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_entry_count_cut_short_is_damage(written: dict[str, bytes], tmp_path: Path, layout: str) -> None:
    """The restart records' DATA object counting half its entries hid the other half."""
    path, jb = _copy(written, layout, tmp_path)
    off = _data(jb, b"MESSAGE_ID=" + RESTART_SCHEDULED.encode())
    (n,) = struct.unpack_from("<Q", jb.data, off + 56)
    struct.pack_into("<Q", jb.data, off + 56, n // 2)
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    reason = _problem(path)
    assert f"counts {n // 2} entries but links {n}" in reason and f"{off:#x}" in reason, reason


def test_a_damaged_name_of_a_wanted_field_is_damage_not_an_unwanted_field(
    written: dict[str, bytes], tmp_path: Path
) -> None:
    """A selective read learns which objects hold the wanted fields from the FIELD data lists; an
    object on that list whose name changed (TAG=beta read as TAF=beta) was taken for another field
    and silently left out of every entry."""
    path, jb = _copy(written, "keyed", tmp_path)
    off = _data(jb, b"TAG=beta")
    jb.data[off + jb.data_payload_offset + 2] ^= 0x01  # TAG -> TAF
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    with open_directory(path.parent) as journal:
        tags = [e.get("TAG") for e in journal.entries(["TAG"])]
        (f,) = journal.scan.files
    assert "alpha" not in tags, "the entry (TAG=alpha, TAG=beta) read without its damaged field"
    assert f.status is FileStatus.PARTIAL and f.reason is not None
    assert "does not match its hash" in f.reason and f"{off:#x}" in f.reason, f.reason


def _restart_entries(jb: JournalBytes) -> list[int]:
    """The restart records' entries, in file order."""
    restart = _data(jb, b"MESSAGE_ID=" + RESTART_SCHEDULED.encode())
    return [e for e in jb.entry_offsets() if any(item == restart for _p, item in jb.entry_items(e))]


def test_an_entry_item_pointing_at_another_data_object_is_damage(
    written: dict[str, bytes], tmp_path: Path
) -> None:
    """A compact item has no hash of its own: a flipped bit can point it at another valid DATA
    object. Here a restart record's _PID=1 item points at a service's _PID, which made PID 1's record
    look like another process's (ignored: no restart); writers sort items by offset, and this one is
    out of order."""
    path, jb = _copy(written, "keyed", tmp_path)
    pid1 = _data(jb, b"_PID=1")
    entry = _restart_entries(jb)[2]
    other = max(o for o in jb.find_data(b"_PID=") if o != pid1 and o < entry)
    (pos,) = [p for p, item in jb.entry_items(entry) if item == pid1]
    struct.pack_into("<I", jb.data, pos, other)
    assert sorted(i for _p, i in jb.entry_items(entry)) != [i for _p, i in jb.entry_items(entry)]
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    reason = _problem(path)
    assert "not sorted" in reason and f"{entry:#x}" in reason, reason


def test_an_entry_size_that_drops_items_is_damage(written: dict[str, bytes], tmp_path: Path) -> None:
    path, jb = _copy(written, "keyed", tmp_path)
    entry = _restart_entries(jb)[0]
    struct.pack_into("<Q", jb.data, entry + 8, jb.object_at(entry).size - 8)  # two compact items fewer
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    reason = _problem(path)
    assert "does not end where an object begins" in reason and f"{entry:#x}" in reason, reason


def test_an_entry_sequence_number_outside_the_file_is_damage(
    written: dict[str, bytes], tmp_path: Path
) -> None:
    """A flipped high bit of a restart record's sequence number, in a file closed cleanly."""
    path, jb = _copy(written, "keyed", tmp_path)
    entry = _restart_entries(jb)[3]
    jb.data[entry + 20] ^= 0x04
    path.write_bytes(bytes(jb))
    _verify_fails(path)
    reason = _problem(path)
    assert "outside the file's range" in reason and f"{entry:#x}" in reason, reason


def test_an_entry_boot_id_other_than_its_boot_id_field_is_damage(
    written: dict[str, bytes], tmp_path: Path
) -> None:
    """A flipped bit in a restart record's boot id moved the restart to a boot of its own. journalctl
    --verify does not compare the two (the file passes it); the analyses group by the header's."""
    path, jb = _copy(written, "keyed", tmp_path)
    entry = _restart_entries(jb)[5]
    jb.data[entry + 40] ^= 0x20
    path.write_bytes(bytes(jb))
    reason = _problem(path)
    assert "boot id" in reason and f"{entry:#x}" in reason, reason


def test_a_damaged_value_a_walk_read_unchecked_is_damage_when_used(
    written: dict[str, bytes], tmp_path: Path
) -> None:
    """A FIELD walk decodes its objects without their hash check (most are never used); the one an
    entry uses is checked then: TAG=beta read as TAG=betc is damage on that entry."""
    path, jb = _copy(written, "keyed", tmp_path)
    off = _data(jb, b"TAG=beta")
    jb.data[off + jb.data_payload_offset + len("TAG=bet")] ^= 0x02  # beta -> betc
    path.write_bytes(bytes(jb))
    with open_directory(path.parent) as journal:
        tags = [e.get("TAG") for e in journal.entries(["TAG"])]
        (f,) = journal.scan.files
    assert not any(isinstance(t, list) and "betc" in t for t in tags), tags
    assert f.status is FileStatus.PARTIAL and f.reason is not None
    assert "does not match its hash" in f.reason and f"{off:#x}" in f.reason, f.reason


def test_an_image_whose_crash_loop_record_is_damaged_is_inconclusive(
    written: dict[str, bytes], tmp_path: Path
) -> None:
    """Through the CLI, with the restart rules: they cannot run on the damaged file, the run exits 3
    (never 0, never a finding on ecr.service) and the error names the file and the object's offset."""
    import json

    from tests.support import os_root, run_cli

    root = os_root(tmp_path / "image")
    journal_dir = root / "var/log/journal/5c1f1f3c2c9d4ad3b8f3e4a7d9a0b111"
    journal_dir.mkdir(parents=True)
    jb = JournalBytes(written["keyed"])
    off = _data(jb, b"UNIT=ecs.service")
    jb.data[off + jb.data_payload_offset + len("UNIT=ec")] ^= 0x01
    (journal_dir / "system.journal").write_bytes(bytes(jb))
    proc = run_cli("audit", str(root), "--select", "IL301", "--select", "IL303", "-f", "json")
    assert proc.returncode == 3, proc.stderr
    report = json.loads(proc.stdout)
    assert not report["findings"]
    assert any(
        e["where"] == "/var/log/journal/5c1f1f3c2c9d4ad3b8f3e4a7d9a0b111/system.journal"
        and f"{off:#x}" in e["message"]
        for e in report["errors"]
    ), report["errors"]


def test_hashing_past_the_budget_is_a_problem_not_an_unchecked_read(
    written: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pure Python hashes a few MB/s: what one file read hashes is bounded, and past the bound the
    objects are a problem on the file (inconclusive), never read without their check."""
    from imagelint.facts.journal import objects

    monkeypatch.setattr(objects, "HASH_BUDGET", 100)
    path, _jb = _copy(written, "keyed", tmp_path)
    reason = _problem(path)
    assert "to check add up to more than the 100-byte limit" in reason, reason
