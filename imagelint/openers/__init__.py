"""From what the command line names to an opened target: one registry, one module per kind.

Every command that takes an image (``audit``, ``units``, both sides of ``diff``, ``ami check`` in its
modes) turns its argument into a target here and nowhere else, so every command accepts every kind:
a directory (a mounted image), a disk image file, ``ebs:snap-…``, a collector bundle, the running
host (``--live``), a running host over SSH (``ssh://[USER@]HOST[:PORT]``) and, where a command asks
for it (``diff``), a JSON report. Whatever it is, an image must have the marks of an operating
system's root (:func:`require_os_root`), or the run is inconclusive.

An opener module defines ``OPENER`` with ``kind``, ``order`` (lower is asked first: a prefix before a
sniff of the content, a sniff before "any regular file"), ``claims(spec, options)`` and
``open(spec, options)``, a context manager yielding :class:`Opened`, and may define
``identity(spec, options)``: a name of what it opens that stays true forever (an EBS snapshot never
changes), so a command may keep its audit (:func:`immutable_key`). :data:`OPENER_MODULES` lists them:
adding a kind of target is one module here, a line in that list and its test.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from imagelint import limits
from imagelint.errors import TargetError, UsageError
from imagelint.records import dataclass
from imagelint.rulepacks import Scope

if TYPE_CHECKING:
    from imagelint.collector.plan import Plan
    from imagelint.facts.soak import SoakFacts
    from imagelint.report import Report
    from imagelint.targets.interface import Target


@dataclass(frozen=True)
class OpenOptions:
    """How targets are opened: what the command line said besides the spec itself."""

    partition: int | None = None
    region: str | None = None
    concurrency: int = 16
    live: bool = False
    reports: bool = False  # a JSON report is a side (diff), not an error
    interactive: bool = False
    side: str | None = None  # diff: "old" or "new"
    shared: dict[str, Any] | None = None  # diff: what an opener of OLD leaves for NEW's, by kind
    # what an opener that collects on a running host (ssh://) gathers there, made when it is asked
    plan: Callable[[], Plan] | None = None
    sudo: bool = False  # ssh://: run the collector with `sudo -n` (a login that is not root)
    partial_root: bool = False  # --allow-partial-root: a target without an OS root's marks is audited


def _unchanged(report: Report) -> Report:
    return report


@dataclass
class Opened:
    """An opened target with what was collected beside it, ready for the session to run."""

    kind: str
    target: Target | None  # None for a JSON report (``report`` is set instead)
    scopes: tuple[Scope, ...] = (Scope.IMAGE,)
    sources: tuple[object, ...] = ()
    annotate: Callable[[Report], Report] = _unchanged  # what the opener adds to the report
    soak: Callable[[], SoakFacts | None] = lambda: None  # a soak recorded with the target
    report: Any = None  # a report read back (``reports=True``): (dict, sha256)


class Opener(Protocol):
    kind: str
    order: int

    def claims(self, spec: str, options: OpenOptions) -> bool: ...

    def open(self, spec: str, options: OpenOptions) -> contextlib.AbstractContextManager[Opened]: ...


# The modules of this package that define an opener: the one list of them (tests/test_registries.py
# fails on a module of the package that is not listed here).
OPENER_MODULES = ("bundle", "live", "path", "report", "snapshot", "ssh")


def _discover() -> list[Opener]:
    found = [importlib.import_module(f"{__name__}.{name}").OPENER for name in OPENER_MODULES]
    return sorted(found, key=lambda o: o.order)


_OPENERS: list[Opener] = []


def openers() -> list[Opener]:
    """Every opener, in the order they are asked."""
    if not _OPENERS:
        _OPENERS.extend(_discover())
    return _OPENERS


def immutable_key(spec: str, options: OpenOptions) -> str | None:
    """What names the image ``spec`` opens for good (its opener's ``identity``), or None: it may change."""
    for opener in openers():
        if opener.claims(spec, options):
            identity = getattr(opener, "identity", None)
            return None if identity is None else identity(spec, options)
    return None


def note_cached(spec: str, options: OpenOptions) -> None:
    """Tell ``spec``'s opener that its audit came from a cache (its ``cached``, if it has one): a
    diff's snapshot opener reads NEW through OLD's blocks even so."""
    for opener in openers():
        if opener.claims(spec, options):
            cached = getattr(opener, "cached", None)
            if cached is not None:
                cached(spec, options)
            return


@contextlib.contextmanager
def open_spec(spec: str, options: OpenOptions | None = None, *, kind: str | None = None) -> Iterator[Opened]:
    """The target ``spec`` names (a limit met while it is read is reported with it). ``kind``: what
    the caller knows it is (a bundle an instance uploaded), opened as that whatever its content."""
    options = options or OpenOptions()
    for opener in openers():
        if opener.kind == kind if kind is not None else opener.claims(spec, options):
            limits.now_reading(spec)
            with opener.open(spec, options) as opened:
                require_os_root(opened, spec, options)
                yield opened
            return
    raise TargetError("image root does not exist", where=spec)


def require_os_root(opened: Opened, spec: str, options: OpenOptions) -> None:
    """Refuse (exit 3, one line) an opened image that lacks the marks of an operating system's root
    (:mod:`imagelint.targets.osroot`), unless ``--allow-partial-root``: an empty directory, a failed
    mount or a half-extracted tree holds no finding because it holds no system. The running host
    (``--live``) and a JSON report are not images to ask."""
    if opened.target is None or opened.target.kind == "host" or options.partial_root:
        return
    from imagelint.targets.osroot import require_os_root as require

    require(opened.target, spec)


def refuse_partition(spec: str, options: OpenOptions) -> None:
    if options.partition is not None:
        raise UsageError(f"--partition applies to disk image files, not to {spec}")
