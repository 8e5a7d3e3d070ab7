"""``ebs:snap-…``: an EBS snapshot read in place through the EBS direct APIs (``imagelint.aws.snapshot``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from imagelint.openers import Opened, OpenOptions
from imagelint.report import Report

PREFIX = "ebs:"  # checked without importing imagelint.aws: only a snapshot spec loads it


class SnapshotOpener:
    kind = "ebs-snapshot"
    order = 10

    def claims(self, spec: str, options: OpenOptions) -> bool:
        return spec.startswith(PREFIX) and not options.live

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.aws.clients import Clients, default_region
        from imagelint.aws.progress import Progress
        from imagelint.aws.snapshot import SnapshotSettings, snapshot_id_of, snapshot_target, stream_facts

        snapshot_id = snapshot_id_of(spec)
        assert snapshot_id is not None
        clients = Clients(default_region(options.region))
        settings = SnapshotSettings(concurrency=options.concurrency, partition=options.partition)
        with (
            Progress(interactive=options.interactive) as progress,
            snapshot_target(clients, snapshot_id, settings, progress) as (target, stream),
        ):

            def annotate(report: Report) -> Report:
                stream.raise_if_failed()
                report.target = {"kind": self.kind, "path": spec, "snapshot_id": snapshot_id}
                report.target["region"] = clients.region
                stream_facts(report, snapshot_id, clients.region, stream, progress)
                return report

            yield Opened(self.kind, target, annotate=annotate)


OPENER = SnapshotOpener()
