"""The journal's two hash functions: published known answers, and the hashes real journals store.

Known answers: SipHash-2-4 from the reference implementation's ``vectors.h`` (key ``00 01 .. 0f``,
message ``00 01 .. len-1``; the 15-byte one is the paper's worked example) and lookup3's own test
driver (``driver5`` in ``lookup3.c``). Real answers: every DATA and FIELD object of journals written
here by systemd-journal-remote, in a keyed file and in an unkeyed one (the flags as ``journalctl
--header`` shows them), walked by ``craft`` (which does not use the reader).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.journal.hashing import jenkins_hash64, jenkins_hashlittle2, journal_hash, siphash24
from tests.facts.journal.conftest import journal_file
from tests.facts.journal.craft import OBJECT_COMPRESSED_ZSTD, OBJECT_DATA, OBJECT_FIELD, JournalBytes

_KEY = bytes(range(16))
SIPHASH_VECTORS = {  # message length: SipHash-2-4 as the reference's little-endian output bytes
    0: "310e0edd47db6f72",
    1: "fd67dc93c539f874",
    2: "5a4fa9d909806c0d",
    3: "2d7efbd796666785",
    15: "e545be4961ca29a1",
    63: "724506eb4c328a95",
}

FOUR_SCORE = b"Four score and seven years ago"
LOOKUP3_VECTORS = [  # (data, pc, pb) -> (c, b), from lookup3.c's driver5
    ((b"", 0, 0), (0xDEADBEEF, 0xDEADBEEF)),
    ((b"", 0, 0xDEADBEEF), (0xBD5B7DDE, 0xDEADBEEF)),
    ((b"", 0xDEADBEEF, 0xDEADBEEF), (0x9C093CCD, 0xBD5B7DDE)),
    ((FOUR_SCORE, 0, 0), (0x17770551, 0xCE7226E6)),
    ((FOUR_SCORE, 0, 1), (0xE3607CAE, 0xBD371DE4)),
    ((FOUR_SCORE, 1, 0), (0xCD628161, 0x6CBEA4B3)),
]


@pytest.mark.parametrize(("length", "expected"), sorted(SIPHASH_VECTORS.items()))
def test_siphash24_known_answers(length: int, expected: str) -> None:
    assert siphash24(bytes(range(length)), _KEY) == int.from_bytes(bytes.fromhex(expected), "little")


@pytest.mark.parametrize(("args", "expected"), LOOKUP3_VECTORS)
def test_lookup3_hashlittle2_known_answers(args: tuple[bytes, int, int], expected: tuple[int, int]) -> None:
    assert jenkins_hashlittle2(*args) == expected


def test_jenkins_hash64_is_c_then_b() -> None:
    assert jenkins_hash64(FOUR_SCORE) == 0x17770551CE7226E6


def test_payloads_longer_than_a_chunk_hash_as_their_parts_decide() -> None:
    """Words are unpacked a chunk at a time: a byte past the first chunk still changes the hash, and
    every length around a chunk's edge hashes differently from its neighbours."""
    data = bytes(range(256)) * 64  # 16 KiB: several chunks of both functions
    for h in (lambda d: siphash24(d, _KEY), jenkins_hash64):
        assert h(data) != h(data[:-1] + b"\x00")
        around = {h(data[:n]) for n in range(4090, 4110)} | {h(data[:n]) for n in range(6138, 6160)}
        assert len(around) == 20 + 22


def _flags(path: Path) -> str:
    out = subprocess.run(["journalctl", "--header", "--file", str(path)], capture_output=True, text=True)
    return next(line for line in out.stdout.splitlines() if line.startswith("Incompatible flags:"))


def _payload(jb: JournalBytes, off: int) -> bytes:
    raw = jb.data_payload(off)
    flags = jb.object_at(off).flags
    if flags == OBJECT_COMPRESSED_ZSTD:
        import zstandard

        return zstandard.ZstdDecompressor().decompress(raw)
    assert flags == 0, f"compression {flags} is not written by journal-remote here"
    return raw


@pytest.mark.parametrize(("layout", "keyed"), [("keyed", True), ("legacy", False)])
def test_every_stored_hash_of_a_real_journal(journals: dict[str, Path], layout: str, keyed: bool) -> None:
    path = journal_file(journals[layout])
    assert ("KEYED-HASH" in _flags(path)) is keyed
    jb = JournalBytes(path.read_bytes())
    file_id = bytes(jb.data[24:40])
    checked = {OBJECT_DATA: 0, OBJECT_FIELD: 0}
    for obj in jb.objects():
        if obj.type not in checked:
            continue
        if obj.type == OBJECT_DATA:
            payload = _payload(jb, obj.offset)
        else:
            payload = bytes(jb.data[obj.offset + 40 : obj.offset + obj.size])
        (stored,) = struct.unpack_from("<Q", jb.data, obj.offset + 16)
        assert journal_hash(payload, keyed=keyed, file_id=file_id) == stored, (obj, payload[:60])
        checked[obj.type] += 1
    assert checked[OBJECT_DATA] > 500 and checked[OBJECT_FIELD] > 20
