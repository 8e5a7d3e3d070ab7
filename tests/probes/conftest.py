"""Fixtures the probes' tests share with the parsers' tests: real journal files written by
systemd-journal-remote (defined in tests/facts/journal/conftest.py)."""

from tests.facts.journal.conftest import copied, journals, long_journal

__all__ = ["copied", "journals", "long_journal"]
