"""The image's installed packages, from the dpkg status file or rpm's sqlite database.

- dpkg: ``/var/lib/dpkg/status``, RFC-822-like stanzas; a package counts as installed when its
  ``Status:`` is ``install ok installed`` (or the half-configured states dpkg still lists, which
  are kept with their state). Read through the target with its read cap.
- rpm: ``rpmdb.sqlite`` (RHEL 9, Amazon Linux 2023, Fedora: ``/var/lib/rpm``, or
  ``/usr/lib/sysimage/rpm``), table ``Packages(hnum, blob)``; each blob is an rpm header
  without its lead (big-endian: index count, data length, 16-byte index entries, data store).
  Copied in chunks to a private temporary file and opened there with sqlite3 as
  ``file:…?mode=ro&immutable=1``: nothing is written next to the image's file (no journal, no
  lock, no ``-wal``/``-shm``), and memory does not grow with the file (sqlite pages it in through a
  small cache). A write-ahead log beside the file is not read (immutable mode ignores it); that is
  said in the problems.

The database is data, never code: an authorizer lets the one query read the base table
``Packages`` and nothing else (no view, trigger, function or recursive CTE the file defines),
``Packages`` must be an ordinary table without generated columns, ``trusted_schema`` is off, and
sqlite's limits, a wall-time budget (its progress handler) and a cap on the bytes it returns bound
the rest.

Every read is bounded. What a hostile file is built to do (past the status file's parse bounds,
the rpmdb's size, sqlite's budgets, a schema that is not plain data, more than ``MAX_PACKAGES``)
raises ImageReadError: the run is inconclusive, one line, never a pass on a partial list. What is
unreadable or malformed (a status file over the target's read cap, a header rpm would reject, a file
sqlite calls corrupt) is a problem of the result (``complete`` false: the inventory is incomplete
and a diff of it inconclusive).
"""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from imagelint.errors import ImageDamageError, ImageReadError
from imagelint.records import dataclass
from imagelint.targets.interface import FileKind, Target

if TYPE_CHECKING:  # sqlite3 and tempfile are imported where an rpmdb is read: a dpkg image never is
    import sqlite3

DPKG_STATUS = "/var/lib/dpkg/status"
RPMDB_PATHS = ("/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite")
MAX_PACKAGES = 100_000  # Debian's whole archive is ~65,000 binary packages; an image has a few thousand
# rpmdb.sqlite copied and read: RHEL 9 with ~1,500 packages is ~30 MiB, the largest real ones about
# 100 MiB. Copied to disk, not memory, so the cap bounds time and disk, not the process's size.
RPMDB_LIMIT = 128 * 1024 * 1024
MAX_HEADER_INDEX = 0xFFFF  # rpm's hdrchkTags
MAX_HEADER_DATA = 0x0FFFFFFF  # rpm's hdrchkData
SQLITE_SECONDS = 20.0  # wall time sqlite may take (a real 100 MiB rpmdb reads in about a second)
SQLITE_CACHE_KIB = 2048  # sqlite's page cache
MAX_BLOB = 16 * 1024 * 1024  # one value (rpm headers are kilobytes; the largest real ones ~1 MiB)
# deb822 parse bounds: a real status file has one stanza per package, 10-30 fields each, and lines
# of a few KiB at most (long Depends:); 16 MiB of real stanzas is about 500,000 lines
MAX_STANZAS = MAX_PACKAGES
MAX_FIELDS = 500
MAX_LINES = 2_000_000
MAX_LINE = 256 * 1024
_DPKG_FIELDS = frozenset({"package", "architecture", "version", "status"})
MAX_FIELD = 1024

# rpm header tags and types (rpmtag.h)
TAG_NAME, TAG_VERSION, TAG_RELEASE, TAG_EPOCH, TAG_ARCH = 1000, 1001, 1002, 1003, 1022
TYPE_INT32, TYPE_STRING, TYPE_I18NSTRING = 4, 6, 9
_WANTED = {
    TAG_NAME: "name",
    TAG_VERSION: "version",
    TAG_RELEASE: "release",
    TAG_EPOCH: "epoch",
    TAG_ARCH: "arch",
}


@dataclass
class Packages:
    """Installed packages: name (``name:arch`` when several architectures of it are installed) ->
    version (``[epoch:]version[-release]``, as the package manager prints it)."""

    manager: str | None = None  # "dpkg", "rpm", or None when the image has neither database
    source: str | None = None
    items: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "manager": self.manager,
            "source": self.source,
            "count": len(self.items),
            "complete": self.complete,
            "items": dict(sorted(self.items.items())),
            "problems": self.problems,
        }


def load_packages(target: Target) -> Packages:
    """The packages of the first database found: dpkg's status file, else rpm's sqlite database."""
    if _is_file(target, DPKG_STATUS):
        return _dpkg(target)
    for path in RPMDB_PATHS:
        if _is_file(target, path):
            return _rpm(target, path)
    return Packages()


def _is_file(target: Target, path: str) -> bool:
    try:
        st = target.stat(path)
    except (ImageReadError, ImageDamageError):
        return True  # there, but unreadable: the reader says so
    return st is not None and st.kind is FileKind.FILE


# -- dpkg -----------------------------------------------------------------------------------------


def _dpkg(target: Target) -> Packages:
    result = Packages("dpkg", DPKG_STATUS)
    try:
        data = target.read_bytes(DPKG_STATUS)
    except (ImageReadError, ImageDamageError) as exc:  # an incomplete inventory (a diff is inconclusive)
        result.problems.append(f"{DPKG_STATUS}: {exc.reason}")
        return result
    rows: list[tuple[str, str, str]] = []
    try:
        for stanza in parse_stanzas(data, wanted=_DPKG_FIELDS):
            if stanza.get("status", "").split()[-1:] in (["not-installed"], ["config-files"], []):
                continue
            if len(rows) >= MAX_PACKAGES:
                raise StanzaError(f"more than {MAX_PACKAGES:,} packages")
            rows.append(
                (stanza.get("package", ""), stanza.get("architecture", ""), stanza.get("version", ""))
            )
    except StanzaError as exc:
        raise ImageReadError(DPKG_STATUS, f"{exc}; refused") from None
    _collect(result, rows)
    return result


class StanzaError(ValueError):
    """A deb822 file over one of the parse bounds."""


def parse_stanzas(data: bytes, *, wanted: frozenset[str] | None = None) -> Iterator[dict[str, str]]:
    """The stanzas of a deb822 file, one at a time, keys lower-cased, continuation lines dropped (not
    needed here); only the ``wanted`` fields are kept (all when None), each value cut at
    ``MAX_FIELD`` characters. Linear in the data and bounded: more than ``MAX_STANZAS`` stanzas
    (each blank line counts, so a file of blank lines is over it too), ``MAX_FIELDS`` fields in a
    stanza, ``MAX_LINES`` lines or a line over ``MAX_LINE`` bytes raise :class:`StanzaError`."""
    current: dict[str, str] = {}
    fields = stanzas = 0
    pos, end = 0, len(data)
    for number in itertools.count(1):
        if pos >= end:
            break
        if number > MAX_LINES:
            raise StanzaError(f"more than {MAX_LINES:,} lines")
        stop = data.find(b"\n", pos, pos + MAX_LINE + 1)
        if stop < 0:
            if end - pos > MAX_LINE:
                raise StanzaError(f"line {number}: longer than {MAX_LINE:,} bytes")
            stop = end
        line, pos = data[pos:stop], stop + 1
        if not line.strip():
            stanzas += 1
            if stanzas > MAX_STANZAS:
                raise StanzaError(f"line {number}: more than {MAX_STANZAS:,} stanzas (blank lines included)")
            if current:
                yield current
                current = {}
            fields = 0
            continue
        if line[:1] in b" \t" or b":" not in line:
            continue
        fields += 1
        if fields > MAX_FIELDS:
            raise StanzaError(f"line {number}: more than {MAX_FIELDS} fields in one stanza")
        key, _, value = line.partition(b":")
        name = key.strip().lower().decode("utf-8", "replace")[:MAX_FIELD]
        if wanted is None or name in wanted:
            current[name] = value.strip()[: 4 * MAX_FIELD].decode("utf-8", "replace")[:MAX_FIELD]
    if current:
        yield current


def _collect(result: Packages, rows: list[tuple[str, str, str]]) -> None:
    """name -> version; ``name:arch`` for a name installed in several architectures."""
    arches: dict[str, set[str]] = {}
    for name, arch, _ in rows:
        arches.setdefault(name, set()).add(arch)
    for name, arch, version in rows:
        if not name:
            continue
        key = f"{name}:{arch}" if len(arches[name]) > 1 else name
        result.items[key] = version


# -- rpm ------------------------------------------------------------------------------------------


def _rpm(target: Target, path: str) -> Packages:
    result = Packages("rpm", path)
    try:
        resolved = target.resolve(path)
        st = target.lstat(resolved)
    except (ImageReadError, ImageDamageError) as exc:
        result.problems.append(f"{path}: {exc.reason}")
        return result
    if st is None or st.kind is not FileKind.FILE:
        result.problems.append(f"{path}: not a regular file")
        return result
    if st.size > RPMDB_LIMIT:
        raise ImageReadError(path, f"is {st.size:,} bytes, over the {RPMDB_LIMIT // 2**20} MiB rpmdb limit")
    if _is_file(target, path + "-wal") and (target.stat(path + "-wal") or st).size > 0:
        result.problems.append(f"{path}-wal: a write-ahead log is not read (immutable read-only open)")
    import tempfile  # here, as sqlite3: a dpkg image has no rpmdb (importing both costs ~10M instructions)

    with tempfile.TemporaryDirectory(prefix="imagelint-rpmdb-") as scratch:
        copy = Path(scratch) / "rpmdb.sqlite"
        unreadable = _copy_out(target, resolved, path, copy)
        if unreadable is not None:  # like a status file that cannot be read: an incomplete inventory
            result.problems.append(f"{path}: {unreadable}")
            return result
        rows = _read_rpmdb(copy, path, result)
    _collect(result, rows)
    return result


def _copy_out(target: Target, resolved: str, path: str, copy: Path) -> str | None:
    """Copy the image's database to a private file, in chunks (never whole in memory), so that
    sqlite never sees, locks or writes the image's file and pages it in through its small cache.
    Returns why it cannot be read, if it cannot."""
    try:
        source = target.open_random(resolved)
    except (ImageReadError, ImageDamageError) as exc:
        return exc.reason
    try:
        with open(copy, "wb") as out:
            offset = 0
            while chunk := source.pread(offset, 1 << 20):
                offset += len(chunk)
                if offset > RPMDB_LIMIT:  # grew after the lstat
                    raise ImageReadError(path, f"is over the {RPMDB_LIMIT // 2**20} MiB rpmdb limit")
                if offset == len(chunk) and chunk[18:20] == b"\x02\x02":
                    # a WAL-mode database: read it as a rollback-journal one (bytes 18-19 of the
                    # header); the -wal file is not read either way, said above
                    chunk = chunk[:18] + b"\x01\x01" + chunk[20:]
                out.write(chunk)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    finally:
        source.close()
    return None


def _read_rpmdb(copy: Path, path: str, result: Packages) -> list[tuple[str, str, str]]:
    """(name, arch, version) of every header blob in ``Packages``, sqlite kept to data only.

    Budget and schema refusals raise ImageReadError (the run is inconclusive); a database sqlite
    reports as malformed and a header rpm would reject are problems of the result."""
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{quote(str(copy))}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        result.problems.append(f"{path}: cannot be opened by sqlite: {exc}")
        return []
    try:
        guard = _Guard(path)
        try:
            _harden(conn, guard)
            if not _check_schema(conn, path):
                result.problems.append(f"{path}: no Packages table")
                return []
            return _header_rows(conn, path, result, guard)
        except sqlite3.Error as exc:
            if guard.why is not None:
                raise ImageReadError(path, f"sqlite: {guard.why}") from None
            if isinstance(exc, sqlite3.DataError) or "too big" in str(exc):
                raise ImageReadError(path, f"sqlite: a value over {MAX_BLOB:,} bytes; refused") from None
            result.problems.append(f"{path}: sqlite: {exc}")
            return []
    finally:
        conn.close()


class _Guard:
    """The wall-time budget (sqlite's progress handler) and why sqlite was stopped, if it was."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.deadline = time.monotonic() + SQLITE_SECONDS
        self.why: str | None = None

    def progress(self) -> int:
        if time.monotonic() > self.deadline:
            self.why = f"over the {SQLITE_SECONDS:g} s read budget"
            return 1
        return 0

    def authorize(
        self, action: int, arg1: str | None, arg2: str | None, _db: str | None, inner: str | None
    ) -> int:
        """Only ``SELECT blob FROM Packages`` on the base table: no view or trigger (``inner``
        names one), no function (``zeroblob``...), no recursive CTE, nothing else."""
        import sqlite3

        if action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ and (arg1 or "").lower() == "packages" and inner is None:
            return sqlite3.SQLITE_OK
        actions = {
            sqlite3.SQLITE_READ: "reading",
            sqlite3.SQLITE_FUNCTION: "the function",
            sqlite3.SQLITE_RECURSIVE: "a recursive CTE",
        }
        self.why = f"the query needed {actions.get(action, f'action {action}')} {arg1 or ''}".rstrip()
        self.why += " (only the base table is read); refused"
        return sqlite3.SQLITE_DENY


def _harden(conn: sqlite3.Connection, guard: _Guard) -> None:
    import sqlite3

    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA cell_size_check = ON")
    conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
    conn.execute("PRAGMA mmap_size = 0")
    limits = {
        sqlite3.SQLITE_LIMIT_LENGTH: MAX_BLOB,
        sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,
        sqlite3.SQLITE_LIMIT_COLUMN: 100,
        sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
        sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 2,
        sqlite3.SQLITE_LIMIT_VDBE_OP: 10_000,
        sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 8,
        sqlite3.SQLITE_LIMIT_ATTACHED: 0,
        sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 100,
        sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 10,
        sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
        sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
    }
    for limit, value in limits.items():
        conn.setlimit(limit, value)
    conn.set_progress_handler(guard.progress, 1000)


def _check_schema(conn: sqlite3.Connection, path: str) -> bool:
    """Whether there is a ``Packages``; it must be an ordinary table (not a view, a virtual table
    or one with generated columns, which would make sqlite compute what the file defines on every
    read)."""
    found = conn.execute(
        "SELECT type, sql FROM sqlite_master WHERE name = 'Packages' COLLATE NOCASE"
    ).fetchall()
    if not found:
        return False
    kind, sql = found[0]
    if (
        len(found) > 1
        or kind != "table"
        or not isinstance(sql, str)
        or not sql.lstrip()[:13].upper().startswith("CREATE TABLE")
    ):
        shown = str(sql)[:60]
        raise ImageReadError(path, f"Packages is not an ordinary table ({kind}: {shown!r}); refused")
    for column in conn.execute("PRAGMA table_xinfo(Packages)").fetchall():
        if column[1] == "blob" and column[6] != 0:
            raise ImageReadError(path, "Packages.blob is a generated or hidden column; refused")
    return True


def _header_rows(
    conn: sqlite3.Connection, path: str, result: Packages, guard: _Guard
) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    conn.set_authorizer(guard.authorize)
    returned = 0
    for (blob,) in conn.execute("SELECT blob FROM Packages"):
        if len(rows) >= MAX_PACKAGES:
            raise ImageReadError(path, f"more than {MAX_PACKAGES:,} packages; refused")
        if not isinstance(blob, bytes):
            result.problems.append(f"{path}: a Packages row is not a header blob")
            continue
        returned += len(blob)
        if returned > RPMDB_LIMIT:
            raise ImageReadError(path, f"sqlite returned more than {RPMDB_LIMIT // 2**20} MiB; refused")
        try:
            header = parse_header(blob)
        except ValueError as exc:
            result.problems.append(f"{path}: a package header is malformed: {exc}")
            continue
        rows.append((header.get("name", ""), header.get("arch", ""), rpm_version(header)))
    return rows


def rpm_version(header: dict[str, str]) -> str:
    version = header.get("version", "")
    if header.get("release"):
        version += "-" + header["release"]
    if header.get("epoch") not in (None, "", "0"):
        version = f"{header['epoch']}:{version}"
    return version


def parse_header(blob: bytes) -> dict[str, str]:
    """Name, version, release, epoch and arch of one rpm header blob (the database's form: no lead,
    no magic). Raises ValueError on anything outside rpm's own bounds."""
    if len(blob) < 8:
        raise ValueError("shorter than its preamble")
    il, dl = struct.unpack_from(">II", blob, 0)
    if il > MAX_HEADER_INDEX or dl > MAX_HEADER_DATA:
        raise ValueError(f"index count {il} or data length {dl} over rpm's limits")
    start = 8 + 16 * il
    if start + dl > len(blob):
        raise ValueError("index or data store runs past the blob")
    store = blob[start : start + dl]
    found: dict[str, str] = {}
    for i in range(il):
        tag, kind, offset, count = struct.unpack_from(">iiii", blob, 8 + 16 * i)
        name = _WANTED.get(tag)
        if name is None or name in found:
            continue
        if offset < 0 or offset >= dl:
            raise ValueError(f"tag {tag}: offset {offset} outside the data store")
        if kind in (TYPE_STRING, TYPE_I18NSTRING):
            end = store.find(b"\0", offset, offset + MAX_FIELD + 1)
            if end < 0:
                raise ValueError(f"tag {tag}: string not terminated within {MAX_FIELD} bytes")
            found[name] = store[offset:end].decode("utf-8", "replace")
        elif kind == TYPE_INT32 and count >= 1 and offset + 4 <= dl:
            found[name] = str(struct.unpack_from(">I", store, offset)[0])
        else:
            raise ValueError(f"tag {tag}: unexpected type {kind}")
    if "name" not in found:
        raise ValueError("no name tag")
    return found
