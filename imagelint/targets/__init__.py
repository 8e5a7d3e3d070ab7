"""Targets: where facts come from (a mounted image now; a live host adds probes on top)."""

from imagelint.targets.host import HostTarget
from imagelint.targets.interface import FileKind, ImageStat, RandomAccessFile, Target, TextContent
from imagelint.targets.rootfs import RootfsTarget

__all__ = ["FileKind", "HostTarget", "ImageStat", "RandomAccessFile", "RootfsTarget", "Target", "TextContent"]
