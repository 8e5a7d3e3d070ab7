"""Decompression of DATA object payloads (XZ, LZ4, ZSTD), capped so a corrupt size cannot blow up.

XZ uses the standard library's ``lzma``; LZ4 and ZSTD use the ``lz4`` and ``zstandard`` packages.
The journal stores LZ4 payloads as a little-endian 64-bit uncompressed size followed by one LZ4
block. Any decoder failure becomes ``CorruptJournal`` naming the algorithm.
"""

from __future__ import annotations

import lzma

from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.format import ObjectFlag

# journald refuses fields larger than this (DATA_SIZE_MAX is 768 MiB); we stop well before.
MAX_DECOMPRESSED = 64 * 1024 * 1024

_zstd_decompressor = None


def _zstd(payload: bytes) -> bytes:
    global _zstd_decompressor
    import zstandard

    if _zstd_decompressor is None:
        _zstd_decompressor = zstandard.ZstdDecompressor()
    obj = _zstd_decompressor.decompressobj()
    out = obj.decompress(payload)
    if len(out) > MAX_DECOMPRESSED:
        raise CorruptJournal("zstd payload decompresses beyond the size limit")
    return out


def _lz4(payload: bytes) -> bytes:
    import lz4.block

    if len(payload) < 8:
        raise CorruptJournal("lz4 payload too short for its size prefix")
    size = int.from_bytes(payload[:8], "little")
    if size > MAX_DECOMPRESSED:
        raise CorruptJournal(f"lz4 payload claims {size} bytes, beyond the size limit")
    return lz4.block.decompress(payload[8:], uncompressed_size=size)


def _xz(payload: bytes) -> bytes:
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    out = dec.decompress(payload, max_length=MAX_DECOMPRESSED + 1)
    if len(out) > MAX_DECOMPRESSED:
        raise CorruptJournal("xz payload decompresses beyond the size limit")
    if not dec.eof:
        raise CorruptJournal("xz payload is truncated")
    return out


def decompress(flags: int, payload: bytes) -> bytes:
    """The uncompressed payload of a DATA object with object ``flags``."""
    try:
        if flags == ObjectFlag.COMPRESSED_ZSTD:
            return _zstd(payload)
        if flags == ObjectFlag.COMPRESSED_LZ4:
            return _lz4(payload)
        if flags == ObjectFlag.COMPRESSED_XZ:
            return _xz(payload)
    except CorruptJournal:
        raise
    except Exception as exc:  # each library has its own error type
        raise CorruptJournal(f"cannot decompress ({ObjectFlag(flags).name}): {exc}") from None
    raise CorruptJournal(f"more than one compression flag set on an object ({flags:#x})")
