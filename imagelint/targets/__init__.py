"""Targets: where facts come from (a mounted image now; a live host adds probes on top)."""

from imagelint.targets.rootfs import FileKind, ImageStat, RootfsTarget, TextContent

__all__ = ["FileKind", "ImageStat", "RootfsTarget", "TextContent"]
