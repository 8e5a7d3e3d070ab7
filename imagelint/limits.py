"""The operating-system limits every imagelint run works under, and what it is reading right now.

Parsers of untrusted data (the disk libraries, tarfile, sqlite, JSON) size their tables from what the
file says, before any cap of imagelint's own can apply. So each command runs in a child process
under two rlimits (:mod:`imagelint.cli.box` forks it and sets them with :func:`apply`):

- ``RLIMIT_DATA`` (heap and private writable mappings, Linux ≥ 4.7): whatever a parser allocates
  past it fails with ``MemoryError``, or kills the child. This, not ``RLIMIT_AS``, is the memory
  limit: the address space also counts what is only reserved (a thread's arena and stack, a file
  mapped to be read), so a limit tight enough to matter there breaks honest runs;
- ``RLIMIT_AS``, the memory limit plus 4 GiB, only as a backstop against mapping bombs;
- ``RLIMIT_CPU``: a parser that spins gets ``SIGXCPU``.

Either way the run is inconclusive (exit 3), in one line that names the limit and what was being
read. The defaults leave room for every real workload measured (an audit peaks at ~40 MiB; an EBS
snapshot read with 16 blocks in flight at ~200 MiB) and can be changed with
``IMAGELINT_MEMORY_LIMIT`` (MiB) and ``IMAGELINT_CPU_LIMIT`` (seconds); ``0`` turns a limit off.
``watch`` runs for days, so it has no CPU limit. ``vm check`` runs QEMU, a trusted program bounded
by its own options (guest memory) and the command's deadlines, whose guest memory alone is over the
default: there the limits are soft only (the hard limits stay as they were), and QEMU is started with
its soft limits raised back to them (:func:`lifted`), while imagelint's own process keeps the bounds.

:func:`reading` records the subject (an image, a bundle, a report) in a page shared with the
parent, so that even a child killed by a signal is reported with the file it was reading.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import resource
from collections.abc import Iterator
from typing import NamedTuple

from imagelint.errors import UsageError

DEFAULT_MEMORY_MIB = 2048
DEFAULT_CPU_SECONDS = 3600
ADDRESS_SPACE_SLACK = 4 << 30  # reservations that are not memory: arenas, stacks, mapped files
MEMORY_VARIABLE = "IMAGELINT_MEMORY_LIMIT"
CPU_VARIABLE = "IMAGELINT_CPU_LIMIT"
_SUBJECT_BYTES = 4096


class Limits(NamedTuple):
    """Limits of one run: memory in MiB and CPU time in seconds; 0 means none."""

    memory_mib: int = DEFAULT_MEMORY_MIB
    cpu_seconds: int = DEFAULT_CPU_SECONDS
    soft_only: bool = False  # keep the hard limits, so a trusted child can be given them back

    def describe_memory(self) -> str:
        return f"the memory limit ({self.memory_mib} MiB, {MEMORY_VARIABLE})"

    def describe_cpu(self) -> str:
        return f"the CPU-time limit ({self.cpu_seconds} s, {CPU_VARIABLE})"


def _number(variable: str, default: int) -> int:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise UsageError(f"{variable}={text!r}: expected a whole number (0 turns the limit off)")
    return int(text)


def from_environment(*, daemon: bool = False, machine: bool = False) -> Limits:
    """The limits the environment asks for; a daemon (``watch``) has no CPU limit; a command that
    starts a virtual machine (``vm``) has soft limits only."""
    cpu = 0 if daemon else _number(CPU_VARIABLE, DEFAULT_CPU_SECONDS)
    memory = _number(MEMORY_VARIABLE, DEFAULT_MEMORY_MIB)
    return Limits(memory_mib=memory, cpu_seconds=cpu, soft_only=machine)


def apply(limits: Limits) -> None:
    """Set the rlimits in this process (the child): soft and hard alike, so nothing can raise them."""
    if limits.memory_mib:
        size = limits.memory_mib * 1024 * 1024
        _lower(resource.RLIMIT_DATA, size, _kept(resource.RLIMIT_DATA, limits))
        _lower(resource.RLIMIT_AS, size + ADDRESS_SPACE_SLACK, _kept(resource.RLIMIT_AS, limits))
    if limits.cpu_seconds:
        # the soft limit sends SIGXCPU; the hard one, a few seconds later, SIGKILL
        hard = _kept(resource.RLIMIT_CPU, limits)
        _lower(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 5 if hard is None else hard)


def _kept(which: int, limits: Limits) -> int | None:
    """The hard limit to keep when the limits are soft only; None: lower it with the soft one."""
    return resource.getrlimit(which)[1] if limits.soft_only else None


LIFTED = (resource.RLIMIT_DATA, resource.RLIMIT_AS, resource.RLIMIT_CPU)


def lifted() -> None:
    """In a trusted child (QEMU) of a run with soft limits only: the soft limits raised to the hard."""
    for which in LIFTED:
        resource.setrlimit(which, (resource.getrlimit(which)[1],) * 2)


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    old_soft, old_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if old_hard != resource.RLIM_INFINITY:
        hard = min(hard, old_hard)
        soft = min(soft, hard)
    if old_soft != resource.RLIM_INFINITY:
        soft = min(soft, old_soft)
    resource.setrlimit(which, (soft, hard))


class _Subject:
    """What the run is reading, kept in a page shared across fork once :meth:`share` has made it."""

    def __init__(self) -> None:
        self._page: mmap.mmap | None = None
        self._text = ""

    def share(self) -> None:
        """Called by the parent before it forks: from then on the child's writes reach the parent."""
        if self._page is None:
            self._page = mmap.mmap(-1, _SUBJECT_BYTES)  # anonymous mappings are MAP_SHARED
            self.set(self._text)

    def set(self, text: str) -> None:
        self._text = text
        if self._page is not None:
            data = text.encode("utf-8", "surrogateescape")[: _SUBJECT_BYTES - 2]
            self._page[2 : 2 + len(data)] = data
            self._page[:2] = len(data).to_bytes(2, "big")

    def get(self) -> str:
        if self._page is None:
            return self._text
        size = int.from_bytes(self._page[:2], "big")
        return self._page[2 : 2 + size].decode("utf-8", "surrogateescape")


SUBJECT = _Subject()


@contextlib.contextmanager
def reading(subject: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, a limit met is reported as met while reading ``subject``.

    The subject is put back only when the block ends normally: an error escaping it is reported
    with the subject it was raised under."""
    before = SUBJECT.get()
    SUBJECT.set(os.fspath(subject))
    yield
    SUBJECT.set(before)


def now_reading(subject: str | os.PathLike[str]) -> None:
    """From now on the run reads ``subject`` (an opened target): a limit met is reported with it."""
    SUBJECT.set(os.fspath(subject))


def met(limit: str) -> str:
    """The one line for a limit met: with the subject when one is recorded."""
    subject = current_subject()
    if subject:
        return f"{subject}: {limit} was reached while reading it; inconclusive"
    return f"{limit} was reached; inconclusive"


def current_subject() -> str:
    """What the run was reading when it was stopped ('' when nothing was recorded)."""
    return SUBJECT.get()
