"""A JSON report of an earlier audit, where a command compares with one (a side of ``diff``)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from imagelint.openers import Opened, OpenOptions

_SNIFF = 64


class ReportOpener:
    kind = "report"
    order = 40

    def claims(self, spec: str, options: OpenOptions) -> bool:
        """A regular file whose first character that is not white space opens a JSON object."""
        if not options.reports:
            return False
        try:
            if not stat.S_ISREG(os.stat(spec).st_mode):
                return False
            with open(spec, "rb") as f:
                head = f.read(_SNIFF)
        except OSError:
            return False
        return head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"{")

    @contextlib.contextmanager
    def open(self, spec: str, options: OpenOptions) -> Iterator[Opened]:
        from imagelint.report.reading import read_report_dict

        yield Opened(self.kind, None, report=read_report_dict(Path(spec)))


OPENER = ReportOpener()
