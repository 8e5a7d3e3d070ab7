"""Targets: where facts come from (a mounted image now; a live host adds probes on top)."""

from imagelint.targets.host import HostTarget
from imagelint.targets.rootfs import FileKind, ImageStat, RootfsTarget, TextContent

__all__ = ["FileKind", "HostTarget", "ImageStat", "RootfsTarget", "TextContent"]
