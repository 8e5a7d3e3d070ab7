"""The image's installed packages, from the dpkg status file or rpm's sqlite database.

- dpkg: ``/var/lib/dpkg/status``, RFC-822-like stanzas; a package counts as installed when its
  ``Status:`` is ``install ok installed`` (or the half-configured states dpkg still lists, which
  are kept with their state). Read through the target with its read cap.
- rpm: ``rpmdb.sqlite`` (RHEL 9, Amazon Linux 2023, Fedora: ``/var/lib/rpm``, or
  ``/usr/lib/sysimage/rpm``), table ``Packages(hnum, blob)``; each blob is an rpm header
  without its lead (big-endian: index count, data length, 16-byte index entries, data store).
  Opened with sqlite3 as ``file:…?mode=ro&immutable=1``: nothing is written next to the image's
  file (no journal, no lock, no ``-wal``/``-shm``). A write-ahead log beside the file is not read
  (immutable mode ignores it); that is said in the problems.

Every read is bounded: the status file by the target's read cap, the number of packages by
``MAX_PACKAGES``, each header by rpm's own limits, and sqlite by a progress-handler budget. What
is over a bound or malformed becomes a problem of the result (``complete`` false), never a guess.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass, field
from typing import Any

from imagelint.errors import ImageReadError
from imagelint.targets.interface import FileKind, Target

DPKG_STATUS = "/var/lib/dpkg/status"
RPMDB_PATHS = ("/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite")
MAX_PACKAGES = 200_000
RPMDB_LIMIT = 512 * 1024 * 1024  # bytes of rpmdb.sqlite read (RHEL 9 with ~1,500 packages: ~30 MiB)
MAX_HEADER_INDEX = 0xFFFF  # rpm's hdrchkTags
MAX_HEADER_DATA = 0x0FFFFFFF  # rpm's hdrchkData
SQLITE_STEPS = 50_000_000  # virtual-machine instructions before sqlite is stopped (progress handler)
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
    except ImageReadError:
        return True  # there, but unreadable: the reader says so
    return st is not None and st.kind is FileKind.FILE


# -- dpkg -----------------------------------------------------------------------------------------


def _dpkg(target: Target) -> Packages:
    result = Packages("dpkg", DPKG_STATUS)
    try:
        data = target.read_bytes(DPKG_STATUS)
    except ImageReadError as exc:
        result.problems.append(f"{DPKG_STATUS}: {exc.reason}")
        return result
    found: list[dict[str, str]] = []
    for stanza in parse_stanzas(data.decode("utf-8", "replace")):
        if stanza.get("status", "").split()[-1:] in (["not-installed"], ["config-files"], []):
            continue
        if len(found) >= MAX_PACKAGES:
            result.problems.append(f"{DPKG_STATUS}: more than {MAX_PACKAGES} packages; the rest not read")
            break
        found.append(stanza)
    _collect(result, [(s.get("package", ""), s.get("architecture", ""), s.get("version", "")) for s in found])
    return result


def parse_stanzas(text: str) -> list[dict[str, str]]:
    """The stanzas of a deb822 file, keys lower-cased, continuation lines dropped (not needed here).
    Linear in the text; each value is cut at ``MAX_FIELD`` characters."""
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.split("\n"):
        if not line.strip():
            if current:
                stanzas.append(current)
                current = {}
            continue
        if line[0] in " \t" or ":" not in line:
            continue
        key, _, value = line.partition(":")
        current[key.strip().lower()[:MAX_FIELD]] = value.strip()[:MAX_FIELD]
    if current:
        stanzas.append(current)
    return stanzas


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
    except ImageReadError as exc:
        result.problems.append(f"{path}: {exc.reason}")
        return result
    if st is None or st.kind is not FileKind.FILE:
        result.problems.append(f"{path}: not a regular file")
        return result
    if _is_file(target, path + "-wal") and (target.stat(path + "-wal") or st).size > 0:
        result.problems.append(f"{path}-wal: a write-ahead log is not read (immutable read-only open)")
    # read through the target (any kind: a directory, a disk image, a snapshot) and open the copy in
    # memory: sqlite never sees, locks or writes the image's file
    try:
        data = target.read_bytes(resolved, limit=RPMDB_LIMIT)
    except ImageReadError as exc:
        result.problems.append(f"{path}: {exc.reason}")
        return result
    if len(data) >= 20 and data[18:20] == b"\x02\x02":
        # a WAL-mode database: an in-memory copy cannot use a WAL, so read it as a rollback-journal
        # one (bytes 18-19 of the header; the -wal file is not read either way, said above)
        data = data[:18] + b"\x01\x01" + data[20:]
    rows: list[tuple[str, str, str]] = []
    try:
        conn = sqlite3.connect(":memory:")
        conn.deserialize(data)
    except sqlite3.Error as exc:
        result.problems.append(f"{path}: cannot be opened by sqlite: {exc}")
        return result
    steps = [0]

    def budget() -> int:
        steps[0] += 1
        return 1 if steps[0] * 1000 > SQLITE_STEPS else 0

    conn.set_progress_handler(budget, 1000)
    try:
        cursor = conn.execute("SELECT blob FROM Packages")
        for (blob,) in cursor:
            if len(rows) >= MAX_PACKAGES:
                result.problems.append(f"{path}: more than {MAX_PACKAGES} packages; the rest not read")
                break
            if not isinstance(blob, bytes):
                result.problems.append(f"{path}: a Packages row is not a header blob")
                continue
            try:
                header = parse_header(blob)
            except ValueError as exc:
                result.problems.append(f"{path}: a package header is malformed: {exc}")
                continue
            rows.append((header.get("name", ""), header.get("arch", ""), rpm_version(header)))
    except sqlite3.Error as exc:
        why = "over the read budget" if steps[0] * 1000 > SQLITE_STEPS else str(exc)
        result.problems.append(f"{path}: sqlite: {why}")
    finally:
        conn.close()
    _collect(result, rows)
    return result


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
