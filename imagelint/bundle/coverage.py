"""What a bundle's collector was asked for, so that a path missing from the bundle is read as absent
from the image only when the collector looked for it.

The collector records every glob it expanded (``asked HOW GLOB`` in the manifest: the plan's
directives, the unit files' references, sshd's includes) and every link target it found missing
(``absent PATH``). A path is covered when it is one of those missing targets, matches an asked glob
component by component, lies on the way to one (a directory the glob would have gone through), or
lies below a match of a tree directive (``T``, ``R``, ``J``: everything below was walked). A path
the collector was not asked for is not known to be absent: the bundle target refuses it
(:class:`imagelint.bundle.target.BundleTarget`), and the rule that read it is inconclusive.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

TREES = frozenset({"T", "R", "J"})  # directives that walk everything below their matches
HOWS = frozenset({"C", "M", "T", "R", "J", "S", "N"})  # N: not collected by design (read as absent)
_MAGIC = frozenset("*?[")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p and p != ".")


class Coverage:
    """The asked globs, indexed: literal ones by path (and their ancestors), the few wildcard ones listed."""

    def __init__(self, asked: Iterable[tuple[str, str]], absent: Iterable[str] = ()) -> None:
        self._absent = frozenset(absent)
        self._on_the_way: set[tuple[str, ...]] = set()  # literal globs and every directory above them
        self._trees: set[tuple[str, ...]] = set()  # literal tree globs
        self._patterns: list[tuple[str, tuple[str, ...]]] = []  # globs with wildcards
        for how, glob in asked:
            parts = _parts(glob)
            if any(_MAGIC & set(p) for p in parts):
                self._patterns.append((how, parts))
                continue
            for n in range(len(parts) + 1):
                self._on_the_way.add(parts[:n])
            if how in TREES:
                self._trees.add(parts)

    def covers(self, path: str) -> bool:
        """Whether the collector would have found ``path`` (an image path, links resolved) had it existed."""
        if path in self._absent:
            return True
        parts = _parts(path)
        if parts in self._on_the_way or any(parts[:n] in self._trees for n in range(len(parts))):
            return True
        return any(self._matches(how, glob, parts) for how, glob in self._patterns)

    @staticmethod
    def _matches(how: str, glob: tuple[str, ...], parts: tuple[str, ...]) -> bool:
        n = min(len(glob), len(parts))
        if not all(fnmatch.fnmatchcase(parts[i], glob[i]) for i in range(n)):
            return False
        return len(parts) <= len(glob) or how in TREES
