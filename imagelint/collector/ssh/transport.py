"""The collector run on a host over the system's OpenSSH client, its bundle streamed back.

The client is ``ssh`` as the user runs it, so ``~/.ssh/config``, agents, ``ProxyJump``, certificates
and ``known_hosts`` hold as they expect: by default ``ssh -T -o BatchMode=yes`` (no terminal, so the
stream is binary-clean; no prompt: a host whose key is not known, or changed, is refused by ssh
itself, never accepted behind the user's back). ``IMAGELINT_SSH_COMMAND`` replaces that command line
as ``GIT_SSH_COMMAND`` does for git (split as a shell would, never run through one); a caller that
owns the host (``vm check``: its own key, ``known_hosts`` and port) passes its command line as ``client``
instead. Then come
``-p PORT`` when the spec has one, ``--``, the destination and the remote command of
:mod:`imagelint.collector.ssh.script`, whose script goes on standard input.

What comes back is hostile: a header of at most :data:`HEADER_MAX` bytes, then at most
:data:`~imagelint.collector.MAX_BUNDLE` bytes of bundle, all within the deadline (the soak plus
:data:`MARGIN`); anything else is a :class:`RemoteError` (inconclusive). The bundle itself is read
by :mod:`imagelint.bundle` as any other. Standard input stays open while the host works: closing it
(done, or given up: ^C, the deadline, a bound) is what makes the host stop and remove its scratch
directory, and the client is waited for so that the removal is over when :func:`collect` returns.
The runner's end of standard output is closed then too: a client still holding what the host sent of a
bundle the runner gave up on (no room for it, over the bound) cannot block on a pipe no one reads.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shlex
import subprocess
import threading
from pathlib import Path
from typing import IO

from imagelint.collector import MAX_BUNDLE
from imagelint.collector.room import check_room
from imagelint.collector.ssh.script import MAGIC, remote_command, script
from imagelint.collector.ssh.spec import HostSpec
from imagelint.errors import ExitCode, ImageLintError, UsageError

COMMAND_VARIABLE = "IMAGELINT_SSH_COMMAND"
DEFAULT_COMMAND = ("ssh", "-T", "-o", "BatchMode=yes")
MARGIN = 900.0  # seconds for connecting, collecting and sending, beyond the soak
HEADER_MAX = 128
STDERR_KEPT = 4096  # bytes of the client's standard error kept for the message
AFTER_CLOSE = 60.0  # seconds the host has to clean up once told to
_STATUS = re.compile(r"(ok|no-workdir|missing:[A-Za-z0-9_.-]{1,32}|collector:[0-9]{1,3})")
_CHUNK = 1 << 20


class RemoteError(ImageLintError):
    """The host did not send a usable bundle: inconclusive."""

    exit_code = ExitCode.INCONCLUSIVE


def client_command() -> list[str]:
    """The ssh client's command line before the destination: ``IMAGELINT_SSH_COMMAND`` or the default."""
    text = os.environ.get(COMMAND_VARIABLE, "")
    if not text.strip():
        return list(DEFAULT_COMMAND)
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{COMMAND_VARIABLE}: {exc}") from None
    return argv


def command_line(spec: HostSpec, *, sudo: bool, client: list[str] | None = None) -> list[str]:
    """The whole client command line for ``spec`` (never run through a shell); ``client`` replaces
    the user's client command (:func:`client_command`) when given."""
    port = ["-p", str(spec.port)] if spec.port is not None else []
    before = client_command() if client is None else client
    return [*before, *port, "--", spec.destination, remote_command(sudo=sudo)]


class _Tail(threading.Thread):
    """Reads a stream to its end in the background, keeping its last :data:`STDERR_KEPT` bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.stream, self.kept = stream, collections.deque[bytes]()
        self.size = 0

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read1(4096), b""):  # type: ignore[attr-defined]
            self.kept.append(chunk)
            self.size += len(chunk)
            while self.size - len(self.kept[0]) >= STDERR_KEPT:
                self.size -= len(self.kept.popleft())

    def last_line(self) -> str:
        self.join(timeout=5)
        lines = b"".join(self.kept)[-STDERR_KEPT:].decode("utf-8", "replace").splitlines()
        return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _feed(stdin: IO[bytes], text: str) -> None:
    try:
        stdin.write(text.encode())
        stdin.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass  # the client is gone: its exit status and stderr say why


def collect(
    spec: HostSpec,
    plan_text: str,
    directory: Path,
    *,
    sudo: bool,
    timeout: float,
    client: list[str] | None = None,
) -> Path:
    """Run the collector for ``plan_text`` on the host ``spec`` names; the bundle it sent, written
    into ``directory``. A :class:`RemoteError` when there is none (the host's or the client's reason)."""
    argv = command_line(spec, sudo=sudo, client=client)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise RemoteError(f"cannot run the ssh client {argv[0]!r}: {reason}", where=str(spec)) from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tail = _Tail(proc.stderr)
    tail.start()
    writer = threading.Thread(target=_feed, args=(proc.stdin, script(plan_text)), daemon=True)
    writer.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        return _receive(proc, proc.stdout, tail, directory, str(spec), expired, timeout)
    finally:
        timer.cancel()
        writer.join(timeout=5)
        with contextlib.suppress(OSError):
            proc.stdin.close()  # the host stops and removes its scratch directory
        # what is left of the stream (a bundle refused, or cut) goes unread: the client's next write
        # fails, where it would block on the full pipe with what the host already sent, and never end
        proc.stdout.close()
        try:
            proc.wait(timeout=AFTER_CLOSE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _receive(
    proc: subprocess.Popen[bytes],
    stdout: IO[bytes],
    tail: _Tail,
    directory: Path,
    where: str,
    expired: threading.Event,
    timeout: float,
) -> Path:
    def failed(what: str) -> RemoteError:
        if expired.is_set():
            return RemoteError(f"no bundle within {timeout:.0f} s; stopped", where=where)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        said = tail.last_line()
        exit_text = f" (ssh exit {code})" if code is not None else ""
        if code == 127 and not said:
            said = "the host has no POSIX sh"
        return RemoteError(f"{what}{exit_text}{': ' + said if said else ''}", where=where)

    header = stdout.readline(HEADER_MAX)
    if not header:
        raise failed("the host sent no bundle")
    fields = header.rstrip(b"\n").decode("ascii", "replace").rsplit(" ", 2)
    framed = len(fields) == 3 and fields[0] == MAGIC and header.endswith(b"\n")
    if not framed or not _STATUS.fullmatch(fields[1]):
        raise failed("the host answered something that is not imagelint's collector")
    status, size_text = fields[1], fields[2]
    if status.startswith("missing:"):
        tool = status.partition(":")[2]
        raise RemoteError(
            f"the host has no {tool}: the collector needs a POSIX sh, tar and coreutils, and systemctl "
            "for the live checks",
            where=where,
        )
    if status == "no-workdir":
        raise failed("the host could not make a scratch directory (mktemp -d under $TMPDIR or /var/tmp)")
    if status != "ok":
        raise failed(f"the collector failed on the host (exit {status.partition(':')[2]})")
    if not size_text.isdigit() or len(size_text) > 12:
        raise failed("the host announced no bundle size")
    size = int(size_text)
    if size > MAX_BUNDLE:
        raise RemoteError(f"the host's bundle is {size:,} bytes, over {MAX_BUNDLE:,}; not read", where=where)
    check_room(directory, size, where)  # before a byte is written: the other hosts' room
    path = directory / "bundle.tar.gz"
    got = 0
    with path.open("xb") as out:
        while got < size:
            chunk = stdout.read(min(_CHUNK, size - got))
            if not chunk:
                raise failed(f"the connection ended after {got:,} of {size:,} bytes of bundle")
            out.write(chunk)
            got += len(chunk)
    return path
