"""A path: a directory is a mounted image, a regular file a disk image (found by its content).

Asked last: whatever no other opener claims is a path (and a path that does not exist is one line,
exit 3)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from imagelint.openers import Opened, OpenOptions


class PathOpener:
    kind = "path"
    order = 90

    def claims(self, spec: str, options: OpenOptions) -> bool:
        return True

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.targets.select import open_target

        target = open_target(spec, partition=options.partition)
        yield Opened(target.kind, target)


OPENER = PathOpener()
