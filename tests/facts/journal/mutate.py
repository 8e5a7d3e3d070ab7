"""A structure-aware mutator of real journal files, and the reading harness the fuzz tests share.

Used by ``tests/facts/journal/test_fuzz.py`` (hypothesis draws the mutations) and by
``benchmarks/fuzz_journal.py`` (a seeded random stream of them), so both exercise the same inputs.

* ``Base``: one real journal (written by systemd-journal-remote; its data hash table shrunk from
  megabytes of empty buckets to a few hundred, see ``craft.shrink_data_hash_table``), with
  what mutations aim at: its objects by type, the positions of entry items, entry-array items and
  used hash buckets.
* A mutation is plain data, ``(op, a, b, c)`` with ``op`` one of ``OPS`` and three unsigned 64-bit
  integers that the op interprets (which object, which field, which value...), so hypothesis can
  draw and shrink them and a seed can replay them. ``apply(base, mutations)`` returns the bytes.
  The ops truncate, zero ranges, flip bits, write noise, mark the file online (or any state), set
  header counts and offsets to huge or misleading values, toggle feature flags, and rewrite object
  headers, links, entry items, entry-array items, hash buckets and compressed payloads (with
  small decompression bombs among the replacements).
* ``read_all(data)`` reads the bytes through the public API (``open_files`` on a memfd, then every
  entry, the restart analysis, the built-in signals, indexed matches and the scan report), under a
  time limit (``Timeout``), and returns a ``Outcome`` with the process's peak RSS growth. With
  ``cut=(entries, size)`` the file is truncated to ``size`` bytes once ``entries`` entries have been
  read (0: right after opening), so every later read meets a file that shrank under the reader.
* ``signature(exc)``: exception type plus innermost frame, to count distinct crashes.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.facts.journal.craft import (
    HEADER_COMPRESSED_LZ4,
    HEADER_COMPRESSED_XZ,
    HEADER_FIELDS,
    OBJECT_COMPRESSED_LZ4,
    OBJECT_COMPRESSED_XZ,
    OBJECT_COMPRESSED_ZSTD,
    OBJECT_DATA,
    OBJECT_ENTRY,
    OBJECT_ENTRY_ARRAY,
    OBJECT_FIELD,
    JournalBytes,
    Obj,
    shrink_data_hash_table,
)

Mutation = tuple[str, int, int, int]
_BUCKETS = 127  # the bases' data hash table: a few objects per chain, so chains get walked
U64 = (1 << 64) - 1

OPS = (
    "truncate",
    "zero",
    "flip",
    "noise",
    "state",
    "header_count",
    "header_offset",
    "flags",
    "object_header",
    "object_link",
    "entry_item",
    "array_item",
    "bucket",
    "payload",
    "value",
)
_COUNTS = (
    "n_objects",
    "n_entries",
    "n_data",
    "n_fields",
    "n_entry_arrays",
    "tail_entry_seqnum",
    "head_entry_seqnum",
    "head_entry_realtime",
    "tail_entry_realtime",
    "tail_entry_monotonic",
)
_OFFSETS = (
    "tail_object_offset",
    "entry_array_offset",
    "data_hash_table_offset",
    "data_hash_table_size",
    "field_hash_table_offset",
    "field_hash_table_size",
    "arena_size",
    "header_size",
)
# (offset in the object, width) of the fields worth corrupting, per object type
_LINKS = {
    OBJECT_DATA: ((16, 8), (24, 8), (32, 8), (40, 8), (48, 8), (56, 8), (64, 4), (68, 4)),
    OBJECT_FIELD: ((16, 8), (24, 8), (32, 8)),
    OBJECT_ENTRY: ((16, 8), (24, 8), (32, 8), (40, 8), (48, 8), (56, 8)),
    OBJECT_ENTRY_ARRAY: ((16, 8),),
}


# values that trip parsers: digits int() refuses, huge numbers, invalid UTF-8, controls, nothing
TRICKY_VALUES = (
    "²".encode(),
    "٣".encode(),
    "Ⅻ".encode(),
    b"-1",
    b"18446744073709551616",
    b"9" * 400,
    b"",
    b"\xff\xfe\xfd",
    b"a\nb\x1b[31m",
    b"\x00",
    b"1_000",
    b" 7",
    b"0x10",
    b"start-limit-hit",
    b"5eb03494b6584870a536b337290809b3",
    "\U0001f600".encode(),
)
_VALUE_FIELDS = (b"N_RESTARTS=", b"UNIT=", b"MESSAGE_ID=", b"UNIT_RESULT=", b"EXIT_STATUS=", b"MESSAGE=")


def _small_bombs() -> list[tuple[int, bytes]]:
    """(object flag, payload) replacements: bombs just past the reader's cap, and garbage."""
    import lzma

    import zstandard

    size = 24 * 1024 * 1024
    zeros = bytes(size - 8)
    bombs = [
        (OBJECT_COMPRESSED_ZSTD, zstandard.ZstdCompressor(level=3).compress(b"MESSAGE=" + zeros)),
        (
            OBJECT_COMPRESSED_ZSTD,
            zstandard.ZstdCompressor(level=3, write_content_size=False).compress(b"MESSAGE=" + zeros),
        ),
        (OBJECT_COMPRESSED_XZ, lzma.compress(b"MESSAGE=" + zeros, preset=0)),
    ]
    from tests.facts.journal.bombs import lz4_block_bomb

    block = lz4_block_bomb(size)
    bombs.append((OBJECT_COMPRESSED_LZ4, size.to_bytes(8, "little") + block))
    bombs.append((OBJECT_COMPRESSED_LZ4, (1000).to_bytes(8, "little") + block))
    bombs.append((OBJECT_COMPRESSED_ZSTD, b"\x28\xb5\x2f\xfd" + bytes(12)))
    bombs.append((OBJECT_COMPRESSED_XZ, b"\xfd7zXZ\x00" + bytes(20)))
    return bombs


_BOMBS: list[tuple[int, bytes]] | None = None


def bombs() -> list[tuple[int, bytes]]:
    global _BOMBS
    if _BOMBS is None:
        _BOMBS = _small_bombs()
    return _BOMBS


@dataclass
class Base:
    """One real journal file, trimmed, and the places mutations aim at."""

    name: str
    data: bytes = field(repr=False)
    objects: list[Obj] = field(default_factory=list, repr=False)
    by_type: dict[int, list[Obj]] = field(default_factory=dict, repr=False)
    entry_items: list[tuple[int, int]] = field(default_factory=list, repr=False)  # (position, width)
    array_items: list[tuple[int, int]] = field(default_factory=list, repr=False)
    buckets: list[int] = field(default_factory=list, repr=False)  # positions of used hash-table items
    # uncompressed DATA objects: one group per field analyses parse, then all of them
    plain_data: list[list[Obj]] = field(default_factory=list, repr=False)
    compact: bool = False

    @classmethod
    def from_bytes(cls, name: str, raw: bytes) -> Base:
        jb = JournalBytes(raw)
        tail = jb.get("tail_object_offset")
        end = tail + ((jb.object_at(tail).size + 7) & ~7)
        jb.set("arena_size", end - jb.get("header_size"))
        data = bytes(jb.data[:end])
        jb = JournalBytes(data)
        base = cls(name, data, compact=jb.compact)
        base.objects = list(jb.objects())
        for obj in base.objects:
            base.by_type.setdefault(obj.type, []).append(obj)
        width = 4 if jb.compact else 8
        for obj in base.by_type.get(OBJECT_ENTRY, []):
            base.entry_items += [(pos, width) for pos, _ in jb.entry_items(obj.offset)]
        for obj in base.by_type.get(OBJECT_ENTRY_ARRAY, []):
            for pos in range(obj.offset + 24, obj.offset + obj.size - width + 1, width):
                base.array_items.append((pos, width))
        po = jb.data_payload_offset
        plain = [o for o in base.by_type.get(OBJECT_DATA, []) if not o.flags]
        for name in _VALUE_FIELDS:  # the fields analyses parse, each as likely as all the rest
            group = [o for o in plain if data[o.offset + po : o.offset + po + len(name)] == name]
            if group:
                base.plain_data.append(group)
        if plain:
            base.plain_data.append(plain)
        for table in ("data_hash_table", "field_hash_table"):
            off, size = jb.get(f"{table}_offset"), jb.get(f"{table}_size")
            for pos in range(off, off + size, 8):
                if struct.unpack_from("<Q", data, pos)[0]:
                    base.buckets.append(pos)
        return base

    @classmethod
    def from_file(cls, path: Path) -> Base:
        return cls.from_bytes(path.name, path.read_bytes())


def recompressed(base: Base, flag: int) -> Base:
    """``base`` with every compressed DATA object re-encoded as XZ or LZ4 (and the header flag set),
    so that the mutator reaches those decoders too."""
    import lzma

    import lz4.block
    import zstandard

    jb = JournalBytes(base.data)
    for obj in [o for o in jb.objects() if o.type == OBJECT_DATA and o.flags == OBJECT_COMPRESSED_ZSTD]:
        raw = zstandard.ZstdDecompressor().decompress(jb.data_payload(obj.offset))
        if flag == OBJECT_COMPRESSED_XZ:
            payload = lzma.compress(raw, format=lzma.FORMAT_XZ)
        else:
            payload = len(raw).to_bytes(8, "little") + lz4.block.compress(raw, store_size=False)
        jb.relocate_data(obj.offset, payload, flag)
    header_flag = HEADER_COMPRESSED_XZ if flag == OBJECT_COMPRESSED_XZ else HEADER_COMPRESSED_LZ4
    jb.set("incompatible_flags", jb.get("incompatible_flags") | header_flag)
    return Base.from_bytes(base.name + ("-xz" if flag == OBJECT_COMPRESSED_XZ else "-lz4"), bytes(jb))


# -- mutations --------------------------------------------------------------------------------------


def _pick(seq: Sequence[object], a: int) -> object:
    return seq[a % len(seq)]


def _interesting(base: Base, size: int, a: int, b: int) -> int:
    """A value that makes a reader's life hard: 0, boundaries, huge, the file's size, another
    object's offset (or a little off it), or plain noise."""
    objs = base.objects
    choice = a % 14
    if choice == 0:
        return 0
    if choice == 1:
        return 1
    if choice == 2:
        return U64
    if choice == 3:
        return 1 << 63
    if choice == 4:
        return 0xFFFFFFFF
    if choice == 5:
        return size
    if choice == 6:
        return max(0, size - 8 * (1 + b % 4))
    if choice == 7:
        return size + 8 * (b % 1024)
    if choice in (8, 9) and objs:
        return objs[b % len(objs)].offset
    if choice == 10 and objs:
        return objs[b % len(objs)].offset + (8, -8, 1, 16, 4)[(b >> 20) % 5]
    if choice == 11:
        return b % 4096
    if choice == 12:
        return (b % max(1, size)) & ~7
    return b


def _put(buf: bytearray, pos: int, width: int, value: int) -> None:
    if pos >= 0 and pos + width <= len(buf):
        buf[pos : pos + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


def _region(base: Base, buf: bytearray, a: int) -> tuple[int, int]:
    """A (start, end) to aim raw byte damage at: the header, used hash buckets, or the objects."""
    kind = a % 20
    if kind < 3:
        return 0, min(len(buf), 272)
    if kind < 5 and base.buckets:
        pos = base.buckets[(a >> 8) % len(base.buckets)]
        return pos, min(len(buf), pos + 16)
    if base.objects:
        obj = base.objects[(a >> 8) % len(base.objects)]
        return obj.offset, min(len(buf), obj.offset + max(16, obj.size))
    return 0, len(buf)


def _apply_one(base: Base, buf: bytearray, m: Mutation) -> bytearray:
    op, a, b, c = m
    size = len(buf)
    if op == "truncate":
        if base.objects and a % 3:
            obj = base.objects[b % len(base.objects)]
            cut = obj.offset + (c % (obj.size + 16))
        else:
            cut = b % max(1, size)
        return buf[: max(0, min(size, cut))]
    if op in ("zero", "flip", "noise"):
        start, end = _region(base, buf, a)
        if end <= start:
            return buf
        pos = start + b % (end - start)
        length = 1 + c % (64 if op != "zero" else 4096)
        end = min(size, pos + length)
        if op == "zero":
            buf[pos:end] = bytes(end - pos)
        elif op == "flip":
            for i in range(pos, end, 1 + (c >> 16) % 7):
                buf[i] ^= 1 << ((c >> 8) % 8)
        else:
            buf[pos:end] = random.Random(c).randbytes(end - pos)
        return buf
    if op == "state":
        if size > 16:
            buf[16] = (0, 1, 1, 2, 3, 255)[a % 6]
        return buf
    if op in ("header_count", "header_offset"):
        names = _COUNTS if op == "header_count" else _OFFSETS
        name = str(_pick(names, a))
        off, fmt = HEADER_FIELDS[name]
        value = _interesting(base, size, b, c)
        if op == "header_count" and b % 3 == 0:  # a small lie instead of an absurd one
            value = struct.unpack_from(fmt, buf, off)[0] + (c % 7) - 3 if off + 8 <= size else 0
        _put(buf, off, struct.calcsize(fmt), value)
        return buf
    if op == "flags":
        if size > 16:
            which = 8 if a % 4 == 0 else 12
            value = struct.unpack_from("<I", buf, which)[0] ^ (1 << (b % (6 if c % 4 else 32)))
            _put(buf, which, 4, value)
        return buf
    if op == "object_header" and base.objects:
        obj = base.objects[a % len(base.objects)]
        what = b % 3
        if what == 0:
            _put(buf, obj.offset, 1, c % 9)
        elif what == 1:
            _put(buf, obj.offset + 1, 1, c % 16 if c % 3 else 1 << (c % 8))
        else:
            _put(
                buf,
                obj.offset + 8,
                8,
                _interesting(base, size, c, c >> 8) if c % 2 else obj.size + (c >> 4) % 64 - 32,
            )
        return buf
    if op == "object_link" and base.objects:
        obj = base.objects[a % len(base.objects)]
        links = _LINKS.get(obj.type)
        if links:
            pos, width = links[b % len(links)]
            _put(buf, obj.offset + pos, width, _interesting(base, size, c, c >> 16))
        return buf
    if op in ("entry_item", "array_item", "bucket"):
        items = (
            base.entry_items
            if op == "entry_item"
            else base.array_items
            if op == "array_item"
            else [(p, 8) for p in base.buckets]
        )
        if items:
            pos, width = items[a % len(items)]
            _put(buf, pos, width, _interesting(base, size, b, c))
        return buf
    if op == "payload":
        compressed = [o for o in base.by_type.get(OBJECT_DATA, []) if o.flags]
        if not compressed:
            return buf
        obj = compressed[a % len(compressed)]
        po = 72 if base.compact else 64
        if b % 3 == 0:  # a bomb or garbage in place of the payload
            flag, payload = _pick(bombs(), c)  # type: ignore[misc]
            room = obj.size - po
            if len(payload) <= room and obj.offset + po + len(payload) <= size:
                buf[obj.offset + 1] = flag
                buf[obj.offset + po : obj.offset + po + len(payload)] = payload
                _put(buf, obj.offset + 8, 8, po + len(payload))
            else:  # too big to fit: append it as a new tail object the entry points to instead
                jb = JournalBytes(bytes(buf))
                try:
                    tail = jb.get("tail_object_offset")
                    if not obj.offset < tail < size - 16 or tail + jb.object_at(tail).size > size:
                        return buf  # earlier damage hides where the arena ends
                    jb.relocate_data(obj.offset, payload, flag)
                except Exception:  # earlier damage can defeat the surgery in many ways: skip it
                    return buf
                return jb.data
        else:  # damage inside the compressed stream
            start = obj.offset + po + (c % max(1, obj.size - po))
            if start < size:
                buf[start] ^= 1 << (b % 8)
        return buf
    if op == "value":  # an uncompressed DATA object gets a tricky value, with its hash (a hostile writer's)
        if not base.plain_data:
            return buf
        group = base.plain_data[a % len(base.plain_data)]
        obj = group[(a >> 8) % len(group)]
        po = 72 if base.compact else 64
        start = obj.offset + po
        eq = bytes(buf[start : min(size, obj.offset + obj.size)]).find(b"=")
        if eq <= 0:
            return buf
        value = TRICKY_VALUES[b % len(TRICKY_VALUES)]
        # a copy of the object with the new value and its hash, appended and linked in its place (the
        # new hash belongs in another chain, whose tail only an object at the end can follow)
        jb = JournalBytes(bytes(buf))
        try:
            tail = jb.get("tail_object_offset")
            if not obj.offset < tail < size - 16 or tail + jb.object_at(tail).size > size:
                return buf
            jb.relocate_data(obj.offset, bytes(buf[start : start + eq + 1]) + value, 0, rehash=True)
        except Exception:  # earlier damage can defeat the surgery in many ways: skip it
            return buf
        return jb.data
    return buf


def apply(base: Base, mutations: Sequence[Mutation]) -> bytes:
    buf = bytearray(base.data)
    for m in mutations:
        buf = _apply_one(base, buf, m)
    return bytes(buf)


def random_mutations(rng: random.Random) -> list[Mutation]:
    """One to four mutations, as the benchmark draws them."""
    return [
        (rng.choice(OPS), rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(64))
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4)))
    ]


# -- reading ------------------------------------------------------------------------------------


class Timeout(BaseException):
    """Reading one input took longer than its bound (a BaseException: nothing may swallow it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(_signum: int, _frame: object) -> None:
        raise Timeout(f"reading took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; False where the kernel cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@dataclass
class Outcome:
    entries: int
    statuses: list[str]
    reasons: list[str | None]
    peak_growth_kib: int  # VmHWM after reading minus VmRSS before (0 when not measurable)


_MATCHES = ({"_TRANSPORT": "kernel"}, {"MESSAGE_ID": "5eb03494b6584870a536b337290809b3"})


def read_all(
    data: bytes, *, companion: bytes | None = None, seconds: float = 10.0, cut: tuple[int, int] | None = None
) -> Outcome:
    """Read ``data`` as a journal file through the public API, every path, within ``seconds``.

    With ``companion`` (typically the unmutated base) both files are read as one journal, so the
    merge of several files (ordering, entries kept in both) meets the damage too. Errors the API
    documents (``JournalError`` and its subclasses) may escape; anything else is a crash for the
    caller to report.
    """
    from imagelint.facts.journal import SIGNALS, count_signal, open_files

    fds = []
    try:
        for content in (data,) if companion is None else (data, companion):
            fds.append(os.memfd_create("fuzz.journal"))
            with os.fdopen(os.dup(fds[-1]), "wb") as f:
                f.write(content)
        measurable = reset_peak()
        before = _status_kib("VmRSS:")
        n = 0
        paths = [f"/proc/self/fd/{fd}" for fd in fds]
        with time_limit(seconds), open_files(paths) as journal:
            if cut is not None and cut[0] == 0:
                os.ftruncate(fds[0], cut[1])
            for _entry in journal.entries():
                n += 1
                if cut is not None and n == cut[0]:
                    os.ftruncate(fds[0], cut[1])
            _consume(journal)  # the restart analysis and a kernel signal, as the rules use them
            if "soft-lockup" in SIGNALS:
                count_signal(journal, SIGNALS["soft-lockup"])
            for matches in _MATCHES:
                for _entry in journal.match(matches, fields={"MESSAGE", "UNIT"}):
                    pass
            journal.tail_messages({"_TRANSPORT": "kernel"}, ["00" * 16], 3)
            journal.scan.summary()
            journal.scan.to_dict()
            statuses = [str(r.status) for r in journal.scan.files]
            reasons = [r.reason for r in journal.scan.files]
        growth = _status_kib("VmHWM:") - before if measurable else 0
        return Outcome(n, statuses, reasons, growth)
    finally:
        for fd in fds:
            os.close(fd)


def _consume(journal: object) -> None:
    """What the rule layer makes of the analyses: evidence with dates, windows, JSON."""
    import json

    from imagelint.checks.journal import _unit_evidence, _when
    from imagelint.facts.journal import SIGNALS, analyze_restarts, count_signal

    report = analyze_restarts(journal)  # type: ignore[arg-type]
    for rec in report.units:
        _unit_evidence(rec)
        rec.max_restarts_within(3600)
    json.dumps(report.to_dict())
    if "ena-reset" in SIGNALS:
        for boot in count_signal(journal, SIGNALS["ena-reset"]).boots:  # type: ignore[arg-type]
            _when(boot.first_usec), _when(boot.last_usec), boot.max_within(3600)


def signature(exc: BaseException) -> str:
    """Exception type and innermost frame: what tells one crash from another."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno} {frames[-1].name}" if frames else "?"
    return f"{type(exc).__name__} at {where}"


def base_journals(directory: Path) -> list[Base]:
    """Small real journals in each layout systemd-journal-remote 252 writes, plus XZ and LZ4 copies."""
    from tests.facts.journal.exportgen import scenario, write_journal

    data = scenario(seed=2, boots=2, loop_minutes=1, noise_per_cycle=1)
    bases = []
    for name, kwargs in (("keyed", {}), ("legacy", {"legacy": True}), ("plain", {"compress": False})):
        out = write_journal(data, directory / name, **kwargs)  # type: ignore[arg-type]
        (path,) = out.glob("*/*.journal")
        small = shrink_data_hash_table(JournalBytes(path.read_bytes()), _BUCKETS)
        bases.append(Base.from_bytes(name, bytes(small)))
    bases.append(recompressed(bases[0], OBJECT_COMPRESSED_XZ))
    bases.append(recompressed(bases[1], OBJECT_COMPRESSED_LZ4))
    return bases
