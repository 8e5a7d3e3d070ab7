"""The machine's processes as /proc shows them: what a test asserts is gone once a VM run ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def _read_each(name: str) -> Iterator[tuple[int, bytes]]:
    """(pid, /proc/PID/``name``) of every process still there when read (one may exit meanwhile)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / name).read_bytes()
            except OSError:
                continue


def holding(marker: str) -> list[str]:
    """Command lines that name ``marker`` (QEMU's overlay, the ssh client's key: the scratch directory)."""
    return [
        cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
        for _, cmdline in _read_each("cmdline")
        if marker.encode() in cmdline
    ]


def qemu_pids(marker: str) -> list[int]:
    """QEMU processes whose command line holds ``marker`` (the test's own scratch directory)."""
    return [
        pid
        for pid, cmdline in _read_each("cmdline")
        if marker.encode() in cmdline and b"qemu-system" in cmdline
    ]


def group_members(pgid: int) -> list[int]:
    """Processes whose process group is ``pgid`` (from /proc/PID/stat, after the command's parenthesis)."""
    return [pid for pid, stat in _read_each("stat") if int(stat.rsplit(b")", 1)[1].split()[2]) == pgid]
