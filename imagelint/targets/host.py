"""The running host as a target: its root filesystem, read exactly like a mounted image.

Live probes (cgroup samples, systemctl state) are collected by the commands that need them and
handed to the checks as facts; the files are read through the same safe reader as an image.
"""

from __future__ import annotations

from imagelint.targets.rootfs import RootfsTarget


class HostTarget(RootfsTarget):
    kind = "host"

    def __init__(self) -> None:
        super().__init__("/")
