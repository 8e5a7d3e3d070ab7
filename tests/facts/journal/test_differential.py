"""imagelint's reader against the real journalctl, on journals written by the real journal-remote.

For every layout journal-remote 252 writes (keyed+compact+zstd, legacy Jenkins+regular, uncompressed)
and for XZ / LZ4 objects re-encoded in place (journalctl decodes them too), every entry and field
must equal ``journalctl -o json`` output, in order; matches through the index must equal journalctl's
own matches; every DATA object's stored hash must be found again by our hash functions.
"""

from __future__ import annotations

import lzma
import shutil
import struct
import subprocess
from pathlib import Path

import lz4.block
import pytest

from imagelint.facts.journal import JournalFile, open_directory, open_files
from imagelint.facts.journal.format import IncompatibleFlag, ObjectFlag
from tests.facts.journal.compare import as_journalctl_json
from tests.facts.journal.conftest import journal_file, journalctl_json
from tests.facts.journal.exportgen import EXITED_ID, FAILED_ID, RESTART_ID

LAYOUTS = ["keyed", "legacy", "plain"]


def read_all(path: Path, **kw: object) -> list[dict[str, object]]:
    with open_files([path]) as j:
        entries = list(j.entries())
        assert j.scan.complete, j.scan.summary()
        assert j.scan.entries_examined == len(entries)
    return entries


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_entry_and_field_equals_journalctl(journals, layout):
    f = journal_file(journals[layout])
    expected = journalctl_json(f"--file={f}")
    mine = read_all(f)
    assert len(expected) > 2000
    assert [as_journalctl_json(e) for e in mine] == expected


@pytest.mark.parametrize("layout", LAYOUTS)
def test_truncation_to_null_without_all_matches_journalctl(journals, layout):
    f = journal_file(journals[layout])
    expected = journalctl_json(f"--file={f}", all_fields=False)
    mine = [as_journalctl_json(e, all_fields=False) for e in read_all(f)]
    assert mine == expected
    assert any(v is None for e in expected for v in e.values()), (
        "the scenario must contain a field over 4096 bytes"
    )


def test_layouts_are_what_they_claim(journals):
    flags = {k: JournalFile.open(journal_file(d)).header.incompatible_flags for k, d in journals.items()}
    assert (
        flags["keyed"]
        == IncompatibleFlag.KEYED_HASH | IncompatibleFlag.COMPACT | IncompatibleFlag.COMPRESSED_ZSTD
    )
    assert flags["legacy"] == IncompatibleFlag.COMPRESSED_ZSTD
    assert flags["plain"] == IncompatibleFlag.KEYED_HASH | IncompatibleFlag.COMPACT


def test_values_cover_the_hard_cases(journals):
    entries = read_all(journal_file(journals["keyed"]))
    odd = next(e for e in entries if e.get("MESSAGE") == "odd values")
    assert isinstance(odd["BINARY"], bytes)
    assert odd["TAG"] == ["alpha", "beta"]  # the writer keeps an identical FIELD=value once per entry
    assert odd["MULTILINE"] == "first\nsecond\tthird"
    assert odd["CONTROL"] == "bell\x07and\x1bescape"
    assert odd["UTF8"] == "grüße ✓"
    assert odd["EMPTY"] == ""
    assert len(str(odd["HUGE_TEXT"])) > 4096
    jf = JournalFile.open(journal_file(journals["keyed"]))
    off = jf.find_data(b"BIG_TEXT=" + str(odd["BIG_TEXT"]).encode())
    assert off is not None and jf._buf[off + 1 : off + 2][0] == ObjectFlag.COMPRESSED_ZSTD, (
        "large values must be compressed"
    )


MATCHES = [
    [f"MESSAGE_ID={RESTART_ID}"],
    [f"MESSAGE_ID={FAILED_ID}", f"MESSAGE_ID={EXITED_ID}"],  # same field: OR
    [f"MESSAGE_ID={FAILED_ID}", "UNIT_RESULT=start-limit-hit"],  # different fields: AND
    ["UNIT=ecs.service", "_PID=1"],
    ["_TRANSPORT=kernel"],
    ["TAG=beta"],  # a repeated field
    ["_SYSTEMD_UNIT=kubelet.service"],
    ["UNIT=no-such.service"],
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("terms", MATCHES, ids=lambda t: "+".join(t))
def test_indexed_matches_equal_journalctl(journals, layout, terms):
    f = journal_file(journals[layout])
    expected = journalctl_json(f"--file={f}", *terms)
    wanted: dict[str, list[str]] = {}
    for term in terms:
        name, value = term.split("=", 1)
        wanted.setdefault(name, []).append(value)
    with open_files([f]) as j:
        mine = [as_journalctl_json(e) for e in j.match(wanted)]
        total = sum(1 for _ in j.files[0].entry_offsets())
        assert j.scan.entries_examined == len(mine) < total  # found through the index, not a scan
    assert mine == expected


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_data_object_is_found_through_the_hash_table(journals, layout):
    """Our siphash24 / Jenkins lookup3 reproduce the writer's hash for every DATA object."""
    jf = JournalFile.open(journal_file(journals[layout]))
    payloads: set[bytes] = set()
    for e in jf.entries():
        for name, value in e.items():
            if name.startswith("__") or name == "_BOOT_ID":
                continue
            for v in value if isinstance(value, list) else [value]:
                payloads.add(name.encode() + b"=" + (v.encode() if isinstance(v, str) else v))
    assert len(payloads) > 500
    missing = [p[:60] for p in payloads if jf.find_data(p) is None]
    assert missing == []
    assert jf.find_data(b"MESSAGE=not in this journal") is None


@pytest.mark.parametrize("layout", ["keyed", "legacy"])
def test_field_values_equal_journalctl_F(journals, layout):
    f = journal_file(journals[layout])
    for field in ("UNIT", "_SYSTEMD_UNIT", "N_RESTARTS", "UNIT_RESULT"):
        out = subprocess.run(
            ["journalctl", f"--file={f}", "-F", field], capture_output=True, text=True, check=True
        )
        assert sorted(JournalFile.open(f).field_values(field)) == sorted(out.stdout.split("\n")[:-1])


def test_seqnum_agrees_with_cursor(journals):
    for e in read_all(journal_file(journals["keyed"])):
        parts = dict(p.split("=", 1) for p in str(e["__CURSOR"]).split(";"))
        assert int(parts["i"], 16) == e["__SEQNUM"] and parts["s"] == e["__SEQNUM_ID"]


def test_two_writers_interleave_like_journalctl(two_writers):
    expected = journalctl_json(f"--directory={two_writers}")
    with open_directory(two_writers) as j:
        mine = [as_journalctl_json(e) for e in j.entries()]
        assert j.scan.files_found == 2 and j.scan.complete
        assert len({jf.header.seqnum_id for jf in j.files}) == 2
        restarts = [as_journalctl_json(e) for e in j.match({"MESSAGE_ID": RESTART_ID})]
    assert mine == expected
    assert restarts == journalctl_json(f"--directory={two_writers}", f"MESSAGE_ID={RESTART_ID}")


def _recompress_in_place(path: Path, prefix: bytes, algorithm: str) -> int:
    """Re-encode every uncompressed DATA object whose payload starts with ``prefix`` as XZ or LZ4.

    The object keeps its place; its size shrinks (the gap before the next object is never read) and
    the header gains the matching incompatible flag. Returns how many objects were rewritten.
    """
    jf = JournalFile.open(path)
    buf = bytearray(path.read_bytes())
    po = 72 if jf.compact else 64
    count = 0
    for value in set(jf.field_values(prefix.split(b"=")[0].decode())):
        payload = prefix.split(b"=")[0] + b"=" + (value.encode() if isinstance(value, str) else value)
        off = jf.find_data(payload)
        assert off is not None
        size = struct.unpack_from("<Q", buf, off + 8)[0]
        assert buf[off + 1] == 0 and size == po + len(payload)
        if algorithm == "xz":
            packed = lzma.compress(payload, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)
            flag, hflag = ObjectFlag.COMPRESSED_XZ, IncompatibleFlag.COMPRESSED_XZ
        else:
            packed = struct.pack("<Q", len(payload)) + lz4.block.compress(payload, store_size=False)
            flag, hflag = ObjectFlag.COMPRESSED_LZ4, IncompatibleFlag.COMPRESSED_LZ4
        assert len(packed) < len(payload)
        buf[off + 1] = flag
        struct.pack_into("<Q", buf, off + 8, po + len(packed))
        buf[off + po : off + po + len(payload)] = packed + bytes(len(payload) - len(packed))
        flags = struct.unpack_from("<I", buf, 12)[0] | hflag
        struct.pack_into("<I", buf, 12, flags)
        count += 1
    jf.close()
    path.write_bytes(bytes(buf))
    return count


@pytest.mark.parametrize("algorithm", ["xz", "lz4"])
def test_xz_and_lz4_objects_read_like_journalctl(journals, tmp_path, algorithm):
    src = journal_file(journals["plain"])
    f = tmp_path / "system.journal"
    shutil.copy(src, f)
    assert _recompress_in_place(f, b"HUGE_TEXT=", algorithm) >= 1
    assert _recompress_in_place(f, b"BIG_TEXT=", algorithm) >= 1
    expected = journalctl_json(f"--file={f}")
    assert [as_journalctl_json(e) for e in read_all(f)] == expected
    assert any("HUGE_TEXT" in e for e in expected)
