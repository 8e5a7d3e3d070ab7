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
- ``limit NAME BYTES``, ``tar RC``, ``started``/``ended`` WALL, ``root DIR``, ``collector VERSION``.
"""

from __future__ import annotations

import re
import stat as stat_mod
from dataclasses import dataclass, field

from imagelint.bundle.coverage import HOWS
from imagelint.bundle.numbers import count
from imagelint.errors import ImageReadError
from imagelint.targets.interface import ImageStat, kind_of

MAX_MANIFEST = 64 * 1024 * 1024
_HEX_MODE = re.compile(r"[0-9a-fA-F]{1,8}")
MAX_ID = 2**32 - 1


@dataclass
class Manifest:
    stats: dict[str, tuple[ImageStat, str]] = field(default_factory=dict)  # path -> (metadata, reason)
    incomplete: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    unrepresentable: int = 0
    asked: list[tuple[str, str]] = field(default_factory=list)  # (directive, glob)
    absent: set[str] = field(default_factory=set)  # link targets the collector found missing
    values: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        reasons: dict[str, int] = {}
        for _st, reason in self.stats.values():
            reasons[reason] = reasons.get(reason, 0) + 1
        return {
            "collector": self.values.get("collector"),
            "content_bytes": int(self.values.get("content-bytes") or 0),  # checked by parse_manifest
            "not_collected": reasons,
            "incomplete": [{"path": p, "reason": r} for p, r in self.incomplete],
            "unrepresentable_names": self.unrepresentable,
        }


def parse_manifest(data: bytes) -> Manifest:
    where = "imagelint/manifest.txt"
    if len(data) > MAX_MANIFEST:
        raise ImageReadError(where, "larger than 64 MiB; not read")
    manifest = Manifest()
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    if not lines or lines[0] != "imagelint-bundle 1":
        raise ImageReadError(where, "not an imagelint bundle manifest (no 'imagelint-bundle 1' line)")
    for number, line in enumerate(lines[1:], 2):
        if not line:
            continue
        word, _, rest = line.partition(" ")
        at = f"{where}:{number}"
        try:
            if word == "stat":
                mode, uid, gid, size, reason, path = rest.split(" ", 5)
                if not _HEX_MODE.fullmatch(mode):
                    raise ValueError(mode)
                raw = int(mode, 16)
                owner = (count(uid, at, "uid", most=MAX_ID), count(gid, at, "gid", most=MAX_ID))
                st = ImageStat(path, kind_of(raw), stat_mod.S_IMODE(raw), *owner, count(size, at, "size"))
                manifest.stats[_image_path(path)] = (st, reason)
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
            elif word == "content-bytes":
                manifest.values.setdefault(word, str(count(rest, at, word)))
            else:
                manifest.values.setdefault(word if word != "limit" else "limit " + rest.split(" ")[0], rest)
        except ValueError:
            raise ImageReadError(at, f"malformed line {line[:80]!r}") from None
    return manifest


def _image_path(path: str) -> str:
    if not path.startswith("/") or "/../" in f"{path}/" or "\0" in path:
        raise ValueError(path)
    return "/" + "/".join(p for p in path.split("/") if p and p != ".")
