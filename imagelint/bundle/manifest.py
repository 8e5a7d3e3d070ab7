"""``imagelint/manifest.txt`` of a bundle: the collector's caps, and what it left out.

Lines (the path is always last, so it may hold spaces):

- ``stat MODE UID GID SIZE REASON PATH``: an entry whose content is not in the bundle (MODE is
  ``stat``'s raw hexadecimal mode). REASON ``metadata`` (only its metadata was asked for),
  ``over-file-limit``, ``over-total-limit``, ``unreadable`` or ``special`` (FIFO, socket, device);
- ``incomplete REASON PATH``: a directory, glob or reference list not collected in full;
- ``unrepresentable-names N``: names with a newline met (once per glob or walk that met one), which
  the collector cannot list;
- ``asked HOW GLOB``: a glob the collector expanded (HOW: its plan directive) and ``absent PATH``: a
  link target it found missing; together what a missing path may be read as absent on
  (:mod:`imagelint.bundle.coverage`);
- ``limit NAME BYTES``, ``tar RC``, ``started``/``ended`` WALL, ``root DIR``, ``collector VERSION``;
- ``phase NAME UPTIME TIMES``: where the collector was (``/proc/uptime``, or ``-``) and the CPU it had
  used (the shell's ``times``: its own user and system time, then its children's) as each phase ended;
  what the collector cost the host, phase by phase (the compression of the bundle comes after).
"""

from __future__ import annotations

import re
import stat as stat_mod
from collections.abc import Callable, Iterable
from dataclasses import field
from pathlib import Path

from imagelint.bundle.coverage import HOWS
from imagelint.bundle.numbers import count, seconds
from imagelint.bundle.probes import shell_times
from imagelint.errors import ImageReadError
from imagelint.records import dataclass
from imagelint.targets.interface import ImageStat, kind_of

MAX_MANIFEST = 64 * 1024 * 1024
_HEX_MODE = re.compile(r"[0-9a-fA-F]{1,8}")
_PHASE = re.compile(r"[a-z]{1,20}")
MAX_PHASES = 32
MAX_ID = 2**32 - 1
WHERE = "imagelint/manifest.txt"
OWN_LINES = 10_000  # lines beside the described entries: limits, times, the globs asked
# why the collector left an entry's content out; the reason kept is one of these (one string each)
REASONS = {r: r for r in ("metadata", "over-file-limit", "over-total-limit", "unreadable", "special")}

Described = Callable[[str, ImageStat, str], None]  # (image path, its metadata, reason) of a stat line


@dataclass
class Manifest:
    not_collected: dict[str, int] = field(default_factory=dict)  # reason -> entries described
    incomplete: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    unrepresentable: int = 0
    asked: list[tuple[str, str]] = field(default_factory=list)  # (directive, glob)
    absent: set[str] = field(default_factory=set)  # link targets the collector found missing
    values: dict[str, str] = field(default_factory=dict)
    phases: list[tuple[str, float | None, float]] = field(default_factory=list)  # (name, uptime, CPU s)

    def cost(self) -> dict[str, object] | None:
        """What the collector cost the host: its CPU seconds (its own and its children's, up to the
        tar of the files) and each phase's wall and CPU seconds; None when it recorded no phases."""
        if not self.phases:
            return None
        rows = []
        for (_, up0, cpu0), (name, up1, cpu1) in zip(self.phases, self.phases[1:], strict=False):
            wall = round(up1 - up0, 2) if up0 is not None and up1 is not None else None
            rows.append({"phase": name, "seconds": wall, "cpu_seconds": round(cpu1 - cpu0, 2)})
        return {"cpu_seconds": round(self.phases[-1][2], 2), "phases": rows}

    def to_dict(self) -> dict[str, object]:
        return {
            "collector": self.values.get("collector"),
            "cost": self.cost(),
            "content_bytes": int(self.values.get("content-bytes") or 0),  # checked by parse_manifest
            "not_collected": dict(self.not_collected),
            "incomplete": [{"path": p, "reason": r} for p, r in self.incomplete],
            "unrepresentable_names": self.unrepresentable,
        }


def read_manifest(path: Path, described: Described, *, most: int) -> Manifest:
    """:func:`parse_manifest` of the file, read a line at a time."""
    with path.open("rb") as f:
        if path.stat().st_size > MAX_MANIFEST:
            raise ImageReadError(WHERE, "larger than 64 MiB; not read")
        return parse_manifest(f, described, most=most)


def parse_manifest(lines: Iterable[bytes], described: Described, *, most: int) -> Manifest:
    """The manifest's lines, each ``stat`` line handed to ``described`` as it is read (nothing keeps
    them here); more than ``most`` lines is refused: each becomes state of the run (a placeholder,
    a glob asked, a value)."""
    manifest = Manifest()
    numbered = enumerate(lines, 1)
    if next(numbered, (1, b""))[1] != b"imagelint-bundle 1\n":
        raise ImageReadError(WHERE, "not an imagelint bundle manifest (no 'imagelint-bundle 1' line)")
    entries = 0
    for number, raw in numbered:
        line = raw.decode("utf-8", "surrogateescape").removesuffix("\n")
        if not line:
            continue
        word, _, rest = line.partition(" ")
        at = f"{WHERE}:{number}"
        entries += 1
        if entries > most:
            raise ImageReadError(at, f"more than {most:,} lines")
        try:
            _line(manifest, word, rest, at, described)
        except ValueError:
            raise ImageReadError(at, f"malformed line {line[:80]!r}") from None
    return manifest


def _line(manifest: Manifest, word: str, rest: str, at: str, described: Described) -> None:
    if word == "stat":
        mode, uid, gid, size_text, reason, path = rest.split(" ", 5)
        if not _HEX_MODE.fullmatch(mode):
            raise ValueError(mode)
        raw = int(mode, 16)
        owner = (count(uid, at, "uid", most=MAX_ID), count(gid, at, "gid", most=MAX_ID))
        kept = REASONS.get(reason)
        if kept is None:
            raise ValueError(reason)
        image_path = _image_path(path)
        size = count(size_text, at, "size")
        described(image_path, ImageStat(image_path, kind_of(raw), stat_mod.S_IMODE(raw), *owner, size), kept)
        manifest.not_collected[kept] = manifest.not_collected.get(kept, 0) + 1
    elif word == "incomplete":
        reason, path = rest.split(" ", 1)
        manifest.incomplete.append((_image_path(path), reason))
    elif word == "asked":
        how, glob = rest.split(" ", 1)
        if how not in HOWS:
            raise ValueError(how)
        manifest.asked.append((how, _image_path(glob)))
    elif word == "absent":
        manifest.absent.add(_image_path(rest))
    elif word == "unrepresentable-names":
        manifest.unrepresentable = count(rest, at, word)
    elif word == "phase":
        name, uptime, times = rest.split(" ", 2)
        cpu = shell_times(times, at)
        if not _PHASE.fullmatch(name) or len(cpu) != 4:
            raise ValueError(name)
        if len(manifest.phases) < MAX_PHASES:
            up = None if uptime == "-" else seconds(uptime, at, "uptime")
            manifest.phases.append((name, up, sum(cpu)))
    elif word == "content-bytes":
        manifest.values.setdefault(word, str(count(rest, at, word)))
    else:
        manifest.values.setdefault(word if word != "limit" else "limit " + rest.split(" ")[0], rest)


def _image_path(path: str) -> str:
    if not path.startswith("/") or "/../" in f"{path}/" or "\0" in path:
        raise ValueError(path)
    return "/" + "/".join(p for p in path.split("/") if p and p != ".")
