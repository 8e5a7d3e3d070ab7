"""Decompression of DATA object payloads (XZ, LZ4, ZSTD), bounded while the output is produced.

XZ uses the standard library's ``lzma``; LZ4 and ZSTD use the ``lz4`` and ``zstandard`` packages.
The journal stores LZ4 payloads as a little-endian 64-bit uncompressed size followed by one LZ4
block. Any decoder failure becomes ``CorruptJournal`` naming the algorithm.

A payload is the adversary's input: a few kilobytes can expand to gigabytes. No decoder here is ever
allowed to produce more than ``MAX_DECOMPRESSED`` bytes, and none is asked to allocate more:

* XZ: ``LZMADecompressor.decompress(max_length=…)`` stops at the cap, with a memory limit on the
  decoder's dictionary;
* LZ4: the size prefix is checked against the cap *before* decoding, and the block decoder writes
  into a buffer of exactly that size (it fails if the block would produce more);
* ZSTD: a frame that declares its content size (systemd always writes one) is refused when that size
  exceeds the cap, else decoded into a buffer of exactly that size, which the decoder itself enforces
  (a frame that lies about its size fails); a frame without a declared size is decoded into a buffer
  of the cap by a decoder whose window is limited, so neither the output nor the window can grow.

``decompress_prefix`` gives the first bytes of an uncompressed payload without decoding the rest (what
a reader needs to learn a DATA object's field name), so a large value of an unwanted field costs
almost nothing. Exceeding the cap raises ``CorruptJournal``; the reader records it against the
object's entry (a partial read: inconclusive, never a pass).
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from contextlib import contextmanager

from imagelint.facts.journal.errors import CorruptJournal
from imagelint.facts.journal.format import ObjectFlag

MAX_DECOMPRESSED = 16 * 1024 * 1024
"""The most bytes one DATA object may hold once uncompressed. journald accepts fields up to 768 MiB
(a core dump kept in the journal), but nothing a rule reads comes near this, and a reader that keeps
the whole process under 150 MiB cannot hold several copies of anything larger."""

_XZ_MEMLIMIT = 128 * 1024 * 1024  # liblzma's allocation for the dictionary (pages touched only as used)
_ZSTD_WINDOW_MAX = 1 << (MAX_DECOMPRESSED - 1).bit_length()  # no legitimate frame needs a larger window
_ZSTD_SMALL = 1 << 20  # frames declaring up to this much share one decoder; larger ones get their own

_PREFIX_FULL = 65_536  # payloads declaring up to this much are decoded whole even for a prefix

_zstd_shared: object | None = None


def _zstd_declared(payload: bytes) -> int:
    """The frame's declared content size, or -1 when it declares none."""
    import zstandard

    try:
        declared = zstandard.frame_content_size(payload)
    except zstandard.ZstdError as exc:
        raise CorruptJournal(f"zstd payload has no valid frame header: {exc}") from None
    return int(declared)


def _zstd(payload: bytes, limit: int) -> bytes:
    global _zstd_shared
    import zstandard

    declared = _zstd_declared(payload)
    if declared > limit:
        raise CorruptJournal(f"zstd payload declares {declared} bytes, beyond the size limit of {limit}")
    if 0 <= declared <= _ZSTD_SMALL:
        # the usual case: small frames with a declared size share one decoder (cheap to reuse; its
        # buffers stay small); the output buffer is exactly ``declared`` bytes and the decoder fails
        # if the frame would produce more or less
        if _zstd_shared is None:
            _zstd_shared = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW_MAX)
        dctx = _zstd_shared
    else:
        # a large or undeclared size: a decoder of its own, freed afterwards with whatever it allocated
        dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW_MAX)
    if declared < 0:  # no size in the frame: decode into a buffer of the cap, and no further
        try:
            out = dctx.decompress(payload, max_output_size=limit)  # type: ignore[attr-defined]
        except zstandard.ZstdError as exc:
            raise CorruptJournal(
                f"zstd payload without a declared size does not decompress within the size limit "
                f"of {limit} ({exc})"
            ) from None
    else:
        out = dctx.decompress(payload)  # type: ignore[attr-defined]
    if not isinstance(out, bytes) or len(out) > limit:  # cannot happen; never trust a decoder blindly
        raise CorruptJournal("zstd payload decompresses beyond the size limit")
    return out


def _lz4(payload: bytes, limit: int) -> bytes:
    import lz4.block

    if len(payload) < 8:
        raise CorruptJournal("lz4 payload too short for its size prefix")
    size = int.from_bytes(payload[:8], "little")
    if size > limit:
        raise CorruptJournal(f"lz4 payload claims {size} bytes, beyond the size limit of {limit}")
    if size == 0:
        raise CorruptJournal("lz4 payload claims zero bytes")
    out = lz4.block.decompress(memoryview(payload)[8:], uncompressed_size=size)
    if not isinstance(out, bytes) or len(out) != size:
        raise CorruptJournal(f"lz4 payload decompresses to {len(out)} bytes, not the {size} it claims")
    return out


def _xz(payload: bytes, limit: int) -> bytes:
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=_XZ_MEMLIMIT)
    out = dec.decompress(payload, max_length=limit + 1)
    if len(out) > limit:
        raise CorruptJournal(f"xz payload decompresses beyond the size limit of {limit}")
    if not dec.eof:
        raise CorruptJournal("xz payload is truncated")
    return out


def _zstd_prefix(payload: bytes, n: int) -> bytes:
    import zstandard

    declared = _zstd_declared(payload)
    if 0 <= declared <= _PREFIX_FULL:
        return _zstd(payload, MAX_DECOMPRESSED)
    dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW_MAX)
    with dctx.stream_reader(payload) as reader:
        out = reader.read(n)
    if not isinstance(out, bytes):
        raise CorruptJournal("zstd payload cannot be read")
    return out


def _xz_prefix(payload: bytes, n: int) -> bytes:
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=_XZ_MEMLIMIT)
    return dec.decompress(payload, max_length=n)


@contextmanager
def _as_corrupt(flags: int) -> Iterator[None]:
    """Any decoder failure (each library has its own error type) as a CorruptJournal on that object."""
    try:
        yield
    except CorruptJournal:
        raise
    except MemoryError:
        raise CorruptJournal(f"cannot decompress ({ObjectFlag(flags).name}): out of memory") from None
    except Exception as exc:
        raise CorruptJournal(f"cannot decompress ({ObjectFlag(flags).name}): {exc}") from None


def decompress_prefix(flags: int, payload: bytes, n: int) -> bytes:
    """At least the first ``n`` bytes of the uncompressed payload (all of it when shorter), decoding
    little more than that where the format allows (ZSTD, XZ). No check that the rest is intact."""
    with _as_corrupt(flags):
        if flags == ObjectFlag.COMPRESSED_ZSTD:
            return _zstd_prefix(payload, n)
        if flags == ObjectFlag.COMPRESSED_XZ:
            return _xz_prefix(payload, n)
    return decompress(flags, payload)


def decompress(flags: int, payload: bytes, limit: int = MAX_DECOMPRESSED) -> bytes:
    """The uncompressed payload of a DATA object with object ``flags``, at most ``limit`` bytes."""
    with _as_corrupt(flags):
        if flags == ObjectFlag.COMPRESSED_ZSTD:
            return _zstd(payload, limit)
        if flags == ObjectFlag.COMPRESSED_LZ4:
            return _lz4(payload, limit)
        if flags == ObjectFlag.COMPRESSED_XZ:
            return _xz(payload, limit)
    raise CorruptJournal(f"unknown or more than one compression flag set on an object ({flags:#x})")


__all__ = ["MAX_DECOMPRESSED", "decompress", "decompress_prefix"]
