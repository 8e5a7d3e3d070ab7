"""Creating or replacing a file the user named as an output, and removing a stale one: never through
a link someone else planted.

An output path may sit in a checkout anyone can commit to, or in a shared ``/tmp``. So the entry at
the path is looked at without following it (``lstat`` from a descriptor on its directory) and
must be absent, or a regular file this user (the effective uid; for root under sudo, also the user
who ran sudo) owns; a symbolic link, a FIFO, a
directory, any other kind of file, or another user's file is refused with one line (:class:`Refused`,
exit 2). A character device (``/dev/null``) is written in place and never removed: only root can
make one, so no one else can have planted it. The new content goes to a fresh temporary in the same
directory (``O_CREAT|O_EXCL|O_NOFOLLOW``, an unpredictable name), is flushed to disk, and takes the
path's place: by ``link`` when the path was absent (which fails if anything appeared there since),
by ``rename`` when it was this user's file, and only after checking that the entry is still the one
checked. A path that changed during the run is
:class:`Changed` (exit 3). ``rename`` replaces the entry itself and never writes through it.

Directories on the way to the path are the user's own choice and are followed; only the entry the
path names is never followed. Every writer of a user-named output goes through here
(``-f FORMAT:PATH``, ``docs rules -o``, ``watch --textfile``, the node-problem-detector state).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from imagelint.errors import ExitCode, ImageLintError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
Identity = tuple[int, int]  # (st_dev, st_ino) of the file that was checked


class Refused(ImageLintError):
    """The path cannot be written safely: refused before any work (exit 2)."""


class Changed(ImageLintError):
    """The path changed between the check and the write (exit 3: this run's output is not there)."""

    exit_code = ExitCode.INCONCLUSIVE


class Unchecked:
    """The destination was not checked earlier: it is checked at the write, and a refusal is exit 2."""


UNCHECKED = Unchecked()


def _why_not(st: os.stat_result) -> str | None:
    """Why the entry ``st`` may not be replaced or removed, or None when it may (a character device
    is written in place: only root can make one, so none is planted)."""
    mode = st.st_mode
    if stat.S_ISCHR(mode):
        return None
    if stat.S_ISLNK(mode):
        return "is a symbolic link; not written through"
    if stat.S_ISFIFO(mode):
        return "is a FIFO"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if st.st_uid not in _owners():
        return f"is owned by uid {st.st_uid}, not by this user ({os.geteuid()})"
    return None


def _owners() -> set[int]:
    """Whose files a run may replace: its effective uid's, and, for root run through sudo, those of
    the user who ran sudo (``SUDO_UID``, which sudo itself sets): the Action's ``sudo`` mode audits
    as root on the runner user's behalf and hands the outputs back to that user."""
    owners = {os.geteuid()}
    sudo_uid = os.environ.get("SUDO_UID", "")
    if owners == {0} and sudo_uid.isdigit():
        owners.add(int(sudo_uid))
    return owners


@contextlib.contextmanager
def _directory(path: Path) -> Iterator[int]:
    """A descriptor on the directory ``path`` is in (followed: the user chose it)."""
    parent = path.parent
    try:
        fd = os.open(parent, _DIR)
    except FileNotFoundError:
        raise Refused(f"the directory {str(parent)!r} does not exist", where=str(path)) from None
    except OSError as exc:
        raise Refused(f"cannot open its directory: {exc.strerror}", where=str(path)) from None
    try:
        yield fd
    finally:
        os.close(fd)


def _lstat(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _inspect(fd: int, path: Path) -> Identity | None:
    """The identity of this user's regular file at ``path`` (None: absent); otherwise Refused."""
    st = _lstat(fd, path.name)
    if st is None:
        return None
    why = _why_not(st)
    if why is not None:
        raise Refused(why, where=str(path))
    return (st.st_dev, st.st_ino)


def _is_device(fd: int, name: str) -> bool:
    st = _lstat(fd, name)
    return st is not None and stat.S_ISCHR(st.st_mode)


def _write_device(fd: int, name: str, data: bytes) -> None:
    dfd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(dfd, view) :]
    finally:
        os.close(dfd)


def _name(path: Path) -> None:
    if path.name in ("", ".", ".."):
        raise Refused("names a directory, not a file", where=str(path))


def check(path: Path) -> Identity | None:
    """Refuse (exit 2) a path that could not be written safely; its current identity (None: absent)."""
    _name(path)
    with _directory(path) as fd:
        return _inspect(fd, path)


def remove_stale(path: Path) -> None:
    """Remove the file an earlier run left at ``path`` (only this user's regular file, never through
    a link); refuse (exit 2) anything else there. A missing directory is left for the parser to say."""
    _name(path)
    try:
        fd = os.open(path.parent, _DIR)
    except OSError:
        return
    try:
        if _inspect(fd, path) is not None and not _is_device(fd, path.name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path.name, dir_fd=fd)
    finally:
        os.close(fd)


def replace(
    path: Path, data: bytes, *, mode: int | None = None, expected: Identity | Unchecked | None = UNCHECKED
) -> None:
    """Make ``path`` a regular file holding ``data``: created, or this user's file replaced whole.

    ``mode``: the new file's permissions (default: the replaced file's, or 0666 less the umask).
    ``expected``: what :func:`check` found at the start of the run; anything else there now is
    :class:`Changed` (exit 3). Without it, the path is checked now (a refusal is exit 2).
    """
    _name(path)
    with _directory(path) as fd:
        try:
            found = _inspect(fd, path)
        except Refused as exc:
            if isinstance(expected, Unchecked):
                raise
            raise Changed(f"changed during the run: {exc.message}", where=str(path)) from None
        st = _lstat(fd, path.name) if found is not None else None
        if st is not None and stat.S_ISCHR(st.st_mode):
            _write_device(fd, path.name, data)
            return
        if not isinstance(expected, Unchecked) and found != expected and found is not None:
            raise Changed("changed during the run: another file is there now", where=str(path))
        if mode is None:
            mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        temporary = _write_temporary(fd, path.name, data, mode)
        try:
            _put_in_place(fd, temporary, path, found)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=fd)


def _write_temporary(fd: int, name: str, data: bytes, mode: int) -> str:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        temporary = f".{name[:200]}.{os.urandom(8).hex()}.tmp"  # secrets.token_hex, without importing random
        try:
            tfd = os.open(temporary, flags, 0o600, dir_fd=fd)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise Changed("no fresh temporary name in its directory", where=name)
    try:
        with os.fdopen(tfd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=fd)
        raise
    return temporary


def _put_in_place(fd: int, temporary: str, path: Path, found: Identity | None) -> None:
    if found is None:
        try:  # link() never replaces: whatever appeared at the path since the check stays, refused
            os.link(temporary, path.name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            return
        except FileExistsError:
            raise Changed("changed during the run: something appeared there", where=str(path)) from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            # a filesystem without hard links: rename, after one more look
    now = _lstat(fd, path.name)
    if (None if now is None else (now.st_dev, now.st_ino)) != found:
        raise Changed("changed during the run: another file is there now", where=str(path))
    os.rename(temporary, path.name, src_dir_fd=fd, dst_dir_fd=fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
