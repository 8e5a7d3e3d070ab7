"""Users and groups of the image, from its own /etc/passwd and /etc/group (never the host's)."""

from __future__ import annotations

from imagelint.targets.interface import Target


def read_ids(target: Target, path: str) -> dict[str, int]:
    """Name → numeric id from a passwd- or group-format file; {} when the file is absent."""
    if target.stat(path) is None:
        return {}
    table: dict[str, int] = {}
    for line in target.read_text(path).text.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[2].isdigit():
            table.setdefault(fields[0], int(fields[2]))
    return table
