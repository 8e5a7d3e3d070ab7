"""``--live``: the running host, its files as an image plus the service manager's unit states."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from imagelint.errors import UsageError
from imagelint.openers import Opened, OpenOptions
from imagelint.rulepacks import Scope


class LiveOpener:
    kind = "host"
    order = 5

    def claims(self, spec: str, options: OpenOptions) -> bool:
        return options.live

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.probes.systemd import collect_live_state
        from imagelint.targets import HostTarget

        if options.partition is not None:
            raise UsageError("--partition applies to disk image files, not to --live")
        if Path(spec).resolve() != Path("/"):
            raise UsageError(f"--live audits the running host: give / as the root (or none), not {spec}")
        sources = (collect_live_state(),)
        yield Opened(self.kind, HostTarget(), scopes=(Scope.IMAGE, Scope.HOST), sources=sources)


OPENER = LiveOpener()
