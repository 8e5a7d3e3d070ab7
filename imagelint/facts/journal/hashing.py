"""The two hash functions of the journal format, in pure Python.

* ``siphash24(data, key)``: SipHash-2-4 with a 16-byte key; files with the KEYED_HASH flag hash DATA
  and FIELD payloads with it, keyed by the header's ``file_id``.
* ``jenkins_hash64(data)``: Bob Jenkins' lookup3 ``hashlittle2`` with both seeds 0, the first
  result (c) as the high and the second (b) as the low 32 bits; older files use it for the hash
  tables, and every file uses it for an entry's ``xor_hash``.

Both are only needed for indexed lookups (a handful of hashes per query), so clarity beats speed.
"""

from __future__ import annotations

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


def _rotl64(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(data: bytes, key: bytes) -> int:
    """SipHash-2-4 of ``data`` under a 16-byte ``key``, as an unsigned 64-bit integer."""
    if len(key) != 16:
        raise ValueError("siphash24 needs a 16-byte key")
    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:], "little")
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _M64
            v1 = _rotl64(v1, 13) ^ v0
            v0 = _rotl64(v0, 32)
            v2 = (v2 + v3) & _M64
            v3 = _rotl64(v3, 16) ^ v2
            v0 = (v0 + v3) & _M64
            v3 = _rotl64(v3, 21) ^ v0
            v2 = (v2 + v1) & _M64
            v1 = _rotl64(v1, 17) ^ v2
            v2 = _rotl64(v2, 32)

    length = len(data)
    whole = length - length % 8
    for i in range(0, whole, 8):
        m = int.from_bytes(data[i : i + 8], "little")
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = ((length & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def _rot32(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = (a - c) & _M32
    a ^= _rot32(c, 4)
    c = (c + b) & _M32
    b = (b - a) & _M32
    b ^= _rot32(a, 6)
    a = (a + c) & _M32
    c = (c - b) & _M32
    c ^= _rot32(b, 8)
    b = (b + a) & _M32
    a = (a - c) & _M32
    a ^= _rot32(c, 16)
    c = (c + b) & _M32
    b = (b - a) & _M32
    b ^= _rot32(a, 19)
    a = (a + c) & _M32
    c = (c - b) & _M32
    c ^= _rot32(b, 4)
    b = (b + a) & _M32
    return a, b, c


def _final(a: int, b: int, c: int) -> tuple[int, int, int]:
    c ^= b
    c = (c - _rot32(b, 14)) & _M32
    a ^= c
    a = (a - _rot32(c, 11)) & _M32
    b ^= a
    b = (b - _rot32(a, 25)) & _M32
    c ^= b
    c = (c - _rot32(b, 16)) & _M32
    a ^= c
    a = (a - _rot32(c, 4)) & _M32
    b ^= a
    b = (b - _rot32(a, 14)) & _M32
    c ^= b
    c = (c - _rot32(b, 24)) & _M32
    return a, b, c


def jenkins_hashlittle2(data: bytes, pc: int = 0, pb: int = 0) -> tuple[int, int]:
    """lookup3 ``hashlittle2``: two 32-bit hashes (c, b) of ``data`` with seeds ``pc`` and ``pb``."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length + pc) & _M32
    c = (c + pb) & _M32
    i = 0
    while length > 12:
        a = (a + int.from_bytes(data[i : i + 4], "little")) & _M32
        b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & _M32
        c = (c + int.from_bytes(data[i + 8 : i + 12], "little")) & _M32
        a, b, c = _mix(a, b, c)
        length -= 12
        i += 12
    if length == 0:
        return c, b
    tail = bytes(data[i:]) + bytes(12 - length)
    a = (a + int.from_bytes(tail[0:4], "little")) & _M32
    b = (b + int.from_bytes(tail[4:8], "little")) & _M32
    c = (c + int.from_bytes(tail[8:12], "little")) & _M32
    a, b, c = _final(a, b, c)
    return c, b


def jenkins_hash64(data: bytes) -> int:
    c, b = jenkins_hashlittle2(data)
    return (c << 32) | b


def journal_hash(data: bytes, *, keyed: bool, file_id: bytes) -> int:
    """The hash a journal file stores for a DATA or FIELD payload."""
    return siphash24(data, file_id) if keyed else jenkins_hash64(data)
