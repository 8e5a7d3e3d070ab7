"""A bundle collected on a remote instance, read as an image.

A thin layer over :class:`~imagelint.targets.rootfs.RootfsTarget` on the extracted tree (paths
resolve there exactly as in a mounted image): metadata comes from the bundle (the modes and owners
the instance reported, never the extracted files' own), a file whose content the collector left out
raises :class:`~imagelint.errors.ImageReadError` when read, and so does a listing of a directory
the collector could not list in full. The bundle fails closed: a path missing from it is absent
from the image only where the collector looked (:mod:`imagelint.bundle.coverage`); any other is
refused, so that a check kind whose ``paths()`` declares too little reads "not collected", never
"absent". A rule that needs what is not there is therefore inconclusive, never a pass.
"""

from __future__ import annotations

from collections.abc import Iterator

from imagelint.bundle.coverage import Coverage
from imagelint.bundle.extract import Extracted
from imagelint.errors import ImageReadError
from imagelint.targets.interface import FileKind, RandomAccessFile
from imagelint.targets.resolver import Backend, Parts
from imagelint.targets.rootfs import ImageStat, RootfsTarget

NOT_ASKED = "not collected: no check kind asked the collector for it (CheckKind.paths); not judged"


class AskedOnly:
    """The extracted tree as the resolver's backend: a missing path the collector was not asked for
    raises ImageReadError instead of reading as absent."""

    def __init__(self, inner: Backend, coverage: Coverage) -> None:
        self.inner = inner
        self.coverage = coverage

    def _missing(self, parts: Parts) -> None:
        path = "/" + "/".join(parts)
        if not self.coverage.covers(path):
            raise ImageReadError(path, NOT_ASKED)

    def lstat(self, parts: Parts) -> ImageStat | None:
        st = self.inner.lstat(parts)
        if st is None:
            self._missing(parts)
        return st

    def readlink(self, parts: Parts) -> str:
        return self.inner.readlink(parts)

    def scan(self, parts: Parts, limit: int, image_dir: str) -> list[tuple[str, ImageStat]] | None:
        entries = self.inner.scan(parts, limit, image_dir)
        if entries is None:
            self._missing(parts)
        return entries

    def kinds(self, parts: Parts, limit: int) -> dict[str, FileKind] | None:
        listing = self.inner.kinds(parts, limit)
        if listing is None:
            self._missing(parts)
        return listing

    def open(self, parts: Parts) -> RandomAccessFile:
        return self.inner.open(parts)


class BundleTarget(RootfsTarget):
    kind = "bundle"

    def __init__(self, extracted: Extracted, description: str) -> None:
        super().__init__(extracted.root)
        self.backend = AskedOnly(self.backend, Coverage(extracted.manifest.asked, extracted.manifest.absent))
        self._bundle = extracted
        self._description = description

    @property
    def description(self) -> str:
        return self._description

    def _described(self, image_path: str, resolved: str) -> ImageStat | None:
        if super()._stat(resolved, follow_last=False) is None:
            self._complete(image_path)  # absent from a directory not listed in full: unknown, not absent
            return None
        st = self._bundle.table.get(resolved)
        if st is None:
            raise ImageReadError(image_path, "not described by the bundle (an implied directory); not judged")
        return st._replace(path=image_path)

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
            yield described._replace(path=st.path)
