"""A collector bundle (``.tar.gz`` from the remote collector): its files, live state and soak."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from imagelint.openers import Opened, OpenOptions, refuse_partition


class BundleOpener:
    kind = "bundle"
    order = 30

    def claims(self, spec: str, options: OpenOptions) -> bool:
        from imagelint.bundle.sniff import is_bundle

        return is_bundle(Path(spec))

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.bundle.run import opened

        refuse_partition(spec, options)
        with opened(Path(spec)) as bundle:
            yield as_opened(self.kind, bundle)


def as_opened(kind: str, bundle: Any) -> Opened:
    """What a read bundle gives the run (its target, scopes, sources, soak), whoever fetched it."""
    return Opened(
        kind,
        bundle.target,
        scopes=bundle.scopes,
        sources=bundle.sources,
        annotate=bundle.annotate,
        soak=bundle.soak_facts,
    )


OPENER = BundleOpener()
