"""The two hash functions of the journal format, in pure Python.

* ``siphash24(data, key)``: SipHash-2-4 with a 16-byte key; files with the KEYED_HASH flag hash DATA
  and FIELD payloads with it, keyed by the header's ``file_id``.
* ``jenkins_hash64(data)``: Bob Jenkins' lookup3 ``hashlittle2`` with both seeds 0, the first
  result (c) as the high and the second (b) as the low 32 bits; older files use it for the hash
  tables, and every file uses it for an entry's ``xor_hash``.

The reader checks the hash of every DATA object it decodes (``objects``), so these run once per
object read: the message words are unpacked by ``struct`` a chunk at a time (memory stays flat
whatever the payload's size) and the rounds are written out with local variables, which makes them
about 1.5 times as fast as the textbook form. Known-answer vectors and real journals check them
(``tests/facts/journal/test_hashing.py``).
"""

from __future__ import annotations

import struct

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_KEY = struct.Struct("<QQ")
_CHUNK = 512  # message words unpacked at a time


def siphash24(data: bytes, key: bytes) -> int:
    """SipHash-2-4 of ``data`` under a 16-byte ``key``, as an unsigned 64-bit integer."""
    if len(key) != 16:
        raise ValueError("siphash24 needs a 16-byte key")
    k0: int
    k1: int
    k0, k1 = _KEY.unpack(key)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    length = len(data)
    whole = length >> 3  # the 8-byte blocks before the last (partial, maybe empty) one
    m64 = _M64
    two: tuple[int, ...] = (0, 1)
    four: tuple[int, ...] = (0, 1, 2, 3)
    for first in range(0, whole + 1, _CHUNK):
        k = min(_CHUNK, whole - first)
        words: list[int | None] = list(struct.unpack_from(f"<{k}Q", data, first << 3)) if k > 0 else []
        if first + _CHUNK > whole:  # the last block: the bytes left and the length's low byte
            words.append(((length & 0xFF) << 56) | int.from_bytes(data[whole << 3 :], "little"))
            words.append(None)  # then the finish: the same round, four times, after v2 ^= 0xFF
        for word in words:
            if word is None:
                m, rounds = 0, four
                v2 ^= 0xFF
            else:
                m, rounds = word, two
            v3 ^= m
            for _ in rounds:  # SipRound
                v0 = (v0 + v1) & m64
                v1 = (((v1 << 13) | (v1 >> 51)) & m64) ^ v0
                v0 = ((v0 << 32) | (v0 >> 32)) & m64
                v2 = (v2 + v3) & m64
                v3 = (((v3 << 16) | (v3 >> 48)) & m64) ^ v2
                v0 = (v0 + v3) & m64
                v3 = (((v3 << 21) | (v3 >> 43)) & m64) ^ v0
                v2 = (v2 + v1) & m64
                v1 = (((v1 << 17) | (v1 >> 47)) & m64) ^ v2
                v2 = ((v2 << 32) | (v2 >> 32)) & m64
            v0 ^= m
    return v0 ^ v1 ^ v2 ^ v3


def jenkins_hashlittle2(data: bytes, pc: int = 0, pb: int = 0) -> tuple[int, int]:
    """lookup3 ``hashlittle2``: two 32-bit hashes (c, b) of ``data`` with seeds ``pc`` and ``pb``."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length + pc) & _M32
    c = (c + pb) & _M32
    if length == 0:
        return c, b
    # every 12 bytes but the last 1..12 go through ``mix``; those last ones, zero-padded, ``final``
    blocks = (length - 1) // 12
    m32 = _M32
    for first in range(0, blocks, _CHUNK):
        k = min(_CHUNK, blocks - first)
        words = struct.unpack_from(f"<{3 * k}I", data, 12 * first)
        for i in range(0, 3 * k, 3):
            a = (a + words[i]) & m32
            b = (b + words[i + 1]) & m32
            c = (c + words[i + 2]) & m32
            a = ((a - c) & m32) ^ (((c << 4) | (c >> 28)) & m32)
            c = (c + b) & m32
            b = ((b - a) & m32) ^ (((a << 6) | (a >> 26)) & m32)
            a = (a + c) & m32
            c = ((c - b) & m32) ^ (((b << 8) | (b >> 24)) & m32)
            b = (b + a) & m32
            a = ((a - c) & m32) ^ (((c << 16) | (c >> 16)) & m32)
            c = (c + b) & m32
            b = ((b - a) & m32) ^ (((a << 19) | (a >> 13)) & m32)
            a = (a + c) & m32
            c = ((c - b) & m32) ^ (((b << 4) | (b >> 28)) & m32)
            b = (b + a) & m32
    tail = bytes(data[12 * blocks :]).ljust(12, b"\0")
    ta, tb, tc = struct.unpack("<3I", tail)
    a = (a + ta) & m32
    b = (b + tb) & m32
    c = (c + tc) & m32
    c = ((c ^ b) - (((b << 14) | (b >> 18)) & m32)) & m32
    a = ((a ^ c) - (((c << 11) | (c >> 21)) & m32)) & m32
    b = ((b ^ a) - (((a << 25) | (a >> 7)) & m32)) & m32
    c = ((c ^ b) - (((b << 16) | (b >> 16)) & m32)) & m32
    a = ((a ^ c) - (((c << 4) | (c >> 28)) & m32)) & m32
    b = ((b ^ a) - (((a << 14) | (a >> 18)) & m32)) & m32
    c = ((c ^ b) - (((b << 24) | (b >> 8)) & m32)) & m32
    return c, b


def jenkins_hash64(data: bytes) -> int:
    """systemd's ``jenkins_hash64``: ``hashlittle2`` with both seeds 0, as ``c << 32 | b``."""
    c, b = jenkins_hashlittle2(data)
    return (c << 32) | b


def journal_hash(data: bytes, *, keyed: bool, file_id: bytes) -> int:
    """The hash a journal file stores for a DATA or FIELD payload."""
    return siphash24(data, file_id) if keyed else jenkins_hash64(data)
