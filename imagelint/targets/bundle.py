"""A bundle collected on a remote instance, read as an image.

A thin layer over :class:`~imagelint.targets.rootfs.RootfsTarget` on the extracted tree (paths
resolve there exactly as in a mounted image): metadata comes from the bundle (the modes and owners
the instance reported, never the extracted files' own), a file whose content the collector left out
raises :class:`~imagelint.errors.ImageReadError` when read, and so does a listing of a directory
the collector could not list in full. A rule that needs what is not there is therefore
inconclusive, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from imagelint.bundle.extract import Extracted
from imagelint.errors import ImageReadError
from imagelint.targets.rootfs import ImageStat, RootfsTarget


class BundleTarget(RootfsTarget):
    kind = "bundle"

    def __init__(self, extracted: Extracted, description: str) -> None:
        super().__init__(extracted.root)
        self._bundle = extracted
        self._description = description

    @property
    def description(self) -> str:
        return self._description

    def _described(self, image_path: str, resolved: str) -> ImageStat | None:
        if super()._stat(resolved, follow_last=False) is None:
            return None
        st = self._bundle.table.get(resolved)
        if st is None:
            raise ImageReadError(image_path, "not described by the bundle (an implied directory); not judged")
        return replace(st, path=image_path)

    def lstat(self, image_path: str) -> ImageStat | None:
        return self._described(image_path, self.resolve(image_path, follow_last=False))

    def stat(self, image_path: str) -> ImageStat | None:
        return self._described(image_path, self.resolve(image_path))

    def _content_check(self, image_path: str) -> None:
        reason = self._bundle.missing.get(self.resolve(image_path))
        if reason is not None:
            raise ImageReadError(image_path, f"content not collected from the instance ({reason})")

    def read_bytes(self, image_path: str, *, limit: int | None = None) -> bytes:
        self._content_check(image_path)
        return super().read_bytes(image_path, limit=limit)

    def _complete(self, image_path: str) -> None:
        resolved = self.resolve(image_path)
        for path, reason in self._bundle.manifest.incomplete:
            if resolved == path or resolved.startswith(path.rstrip("/") + "/"):
                raise ImageReadError(image_path, f"not collected in full from the instance ({reason})")

    def listdir(self, image_path: str) -> list[str]:
        self._complete(image_path)
        return super().listdir(image_path)

    def _scan(self, image_dir: str, host_dir: object) -> list[tuple[str, object]]:  # type: ignore[override]
        self._complete(image_dir)
        return super()._scan(image_dir, host_dir)  # type: ignore[arg-type,return-value]

    def walk(self, top: str) -> Iterator[ImageStat]:
        real = self.resolve(top).rstrip("/")
        base = top.rstrip("/")
        for st in super().walk(top):
            key = real + st.path[len(base) :]
            described = self._bundle.table.get(key)
            if described is None:
                raise ImageReadError(
                    st.path, "not described by the bundle (an implied directory); not judged"
                )
            yield replace(described, path=st.path)
