"""``ssh://[USER@]HOST[:PORT]``: a running host, its collector run over OpenSSH and its bundle read.

The collector (:mod:`imagelint.collector`) gathers what the command's plan asks (``OpenOptions.plan``:
the loaded rules' paths and ``systemctl show``, and the soak's samples for ``soak``), the bundle comes
back over the same connection (:mod:`imagelint.collector.ssh.transport`) into a private scratch
directory here, and it is opened as any bundle is (:mod:`imagelint.bundle.run`): the same findings
as ``audit BUNDLE``, the host scope from the manager's live state included, and the soak's facts for
``soak``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from imagelint.collector.ssh.spec import is_ssh, parse
from imagelint.errors import UsageError
from imagelint.openers import Opened, OpenOptions, refuse_partition


class SshOpener:
    kind = "ssh"
    order = 2  # a prefix: asked before --live and every sniff

    def claims(self, spec: str, options: OpenOptions) -> bool:
        return is_ssh(spec)

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.bundle.run import opened
        from imagelint.collector.ssh.transport import MARGIN, collect
        from imagelint.openers.bundle import as_opened

        refuse_partition(spec, options)
        if options.live:
            raise UsageError(f"--live audits this host; {spec} is audited live already (drop --live)")
        host = parse(spec)
        if options.plan is None:
            raise UsageError(f"{spec}: this command cannot collect on a host over ssh")
        plan = options.plan()
        timeout = plan.soak_seconds + MARGIN
        import tempfile  # here: every audit imports this opener to ask it whether a spec is its own

        with tempfile.TemporaryDirectory(prefix="imagelint-ssh-") as scratch:
            bundle = collect(host, plan.text(), Path(scratch), sudo=options.sudo, timeout=timeout)
            with opened(bundle, str(host)) as got:
                yield as_opened(self.kind, got)


OPENER = SshOpener()
