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
        from imagelint import stderr
        from imagelint.targets.rootfs import RootfsTarget
        from imagelint.targets.select import open_target

        target = open_target(spec, partition=options.partition)
        if type(target) is RootfsTarget:
            yield Opened(target.kind, target)
            return
        # a disk image is read through its format: seconds of silence on a large one, unless shown
        with stderr.busy(f"auditing {spec} ({target.kind})", interactive=options.interactive):
            yield Opened(target.kind, target)


OPENER = PathOpener()
