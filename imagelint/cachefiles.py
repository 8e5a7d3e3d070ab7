"""Files kept between runs under ``$XDG_CACHE_HOME/imagelint``: untrusted input, used only when ours.

The one trust rule of imagelint's three caches (the rule packs of :mod:`imagelint.rulepacks.cache`,
the audits of :mod:`imagelint.diff.cache`, the EBS blocks of :mod:`imagelint.aws.block_store`). A
cache directory may sit in a shared ``XDG_CACHE_HOME``, or be restored by CI from a tarball or
``actions/cache`` that anyone who can open a pull request can fill. So a cache entry is data, never
code, and nothing in it is believed unless this user wrote it on this machine:

- **Data formats only.** Entries are bytes the caller parses (JSON, a block, a listing); no pickle,
  nothing that can run code when read.
- **Directories ours alone.** ``imagelint/`` and ``imagelint/<name>/`` are created 0700 and opened
  without following links; one owned by someone else, or that others may write, turns that cache
  off for the run with one note (:func:`set_notifier`). Every later step goes through the open
  directory's descriptor, so a directory swapped under the same name afterwards is never used.
- **Entries opened as data.** Without following links and without blocking (a FIFO under an
  entry's name is not waited on), and used only when regular, owned by this user, writable by
  nobody else and singly linked (a hard link to a file of the user's is not an entry).
- **Authenticated.** Each entry carries an HMAC-SHA256 over the cache's name, the entry's name, the
  full identity of what it stands for (the caller's: a pack's bytes' SHA-256 and imagelint's code, an
  audit's snapshot, config and version) and its payload. The key is per user and per machine: 32
  random bytes kept outside every cache directory, in ``$XDG_STATE_HOME/imagelint/cache.key``
  (``~/.local/state`` without it; same checks, created 0600), mixed with this machine's
  ``/etc/machine-id``. An entry renamed to another identity, cut short, edited, planted by another
  user, or restored from a cache another machine or key wrote is a miss. Content-addressed entries
  (a block named by its SHA-256) may skip the HMAC: the caller checks the content against the
  authenticated name instead (:meth:`CacheDir.read`'s ``authenticated``).
- **Misses, never errors, never verdicts.** Anything that fails a check is a miss (and removed
  when it sits in our own directory); the run reads the real source instead. With no home to keep
  them in (no ``HOME`` and no passwd entry: a container's arbitrary uid) and no absolute
  ``XDG_CACHE_HOME``/``XDG_STATE_HOME`` to stand for it, caches are off for the run, with one note.
- **Atomic and bounded.** Written to a temporary name and renamed, under the directory's ``flock``;
  least recently used entries pruned past a number of files and bytes (a hit touches its entry).
- ``IMAGELINT_NO_CACHE`` set to a comma-separated list of cache names turns those off
  (``audits,blocks``), set to anything else but empty or ``0`` every cache.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import os
import pwd
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

DISABLE = "IMAGELINT_NO_CACHE"
CACHES = frozenset({"audits", "blocks", "packs"})  # every cache name
MAGIC = (
    b"imagelint-cache 3\n"  # an authenticated entry: this, the HMAC (64 hex digits), a newline, the payload
)
KEY_FILE = "cache.key"
KEY_BYTES = 32
MACHINE_ID = "/etc/machine-id"
_TAG = len(MAGIC) + 65
_OPEN_ENTRY = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_notify: Callable[[str], None] | None = None
_noted: set[str] = set()
_keys: dict[str, bytes | None] = {}
_keys_lock = threading.Lock()


class Refused(Exception):
    """A directory or key file that is not ours alone (the message says why)."""


def set_notifier(notify: Callable[[str], None] | None) -> None:
    """Where the one note about a refused cache goes (the CLI sets its stderr writer)."""
    global _notify
    _notify = notify


def _note(text: str) -> None:
    if text not in _noted:
        _noted.add(text)
        if _notify is not None:
            _notify(text)


def off(name: str) -> bool:
    """Whether ``IMAGELINT_NO_CACHE`` turns the cache ``name`` off (see the module's docstring)."""
    value = os.environ.get(DISABLE, "").strip()
    if value in ("", "0"):
        return False
    names = {n.strip() for n in value.split(",")}
    return name in names or not names <= CACHES


def _home_dir(variable: str, default: str) -> Path | None:
    """``$variable``, else ``HOME/default``; None (with the one note) when neither is an absolute path.

    A container's arbitrary uid has no passwd entry and often no ``HOME``; a relative or empty value
    would be the working directory, which is untrusted (XDG says to ignore a relative one)."""
    given = os.environ.get(variable, "")
    if os.path.isabs(given):
        return Path(given)
    home = os.environ.get("HOME")
    if home is None:  # as Path.home() would, without its RuntimeError when there is no entry
        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            home = ""
    if not os.path.isabs(home):
        _note(
            f"caches off: no usable home directory for uid {os.getuid()} (HOME unset with no passwd "
            "entry, or not an absolute path); set XDG_CACHE_HOME and XDG_STATE_HOME to keep them"
        )
        return None
    return Path(home) / default


def cache_root(name: str) -> Path | None:
    """Where the cache ``name`` lives; None when it is turned off, or there is no home to keep it in."""
    if off(name):
        return None
    base = _home_dir("XDG_CACHE_HOME", ".cache")
    return None if base is None else base / "imagelint" / name


def _owned_alone(st: os.stat_result, what: str, *, private: bool = False) -> None:
    """Raise :class:`Refused` unless ``st`` is owned by this user and nobody else may write it
    (``private``: nor read it)."""
    if st.st_uid != os.geteuid():
        raise Refused(f"{what} is owned by uid {st.st_uid}, not this user")
    if st.st_mode & (0o077 if private else 0o022):
        raise Refused(
            f"{what} has mode {stat.S_IMODE(st.st_mode):04o}: others may "
            + ("read or write it" if private else "write it")
        )


def _open_private_dir(parent: Path, names: tuple[str, ...]) -> int:
    """A descriptor of ``parent/names…``, each component created 0700 if missing and checked as ours
    alone (never through a link); raises :class:`Refused` or ``OSError``."""
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    where = parent
    try:
        for name in names:
            where = where / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=fd)
            try:
                child = os.open(name, _OPEN_DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused(f"{where} is not a directory (a link?)") from None
                raise
            os.close(fd)
            fd = child
            _owned_alone(os.fstat(fd), str(where))
        return fd
    except BaseException:
        os.close(fd)
        raise


def _machine_id() -> bytes:
    try:
        with open(MACHINE_ID, "rb") as f:
            return f.read(64).strip()
    except OSError:
        return b""


def user_key() -> bytes | None:
    """This user's key on this machine (made on first use); None when its file cannot be trusted."""
    state = _home_dir("XDG_STATE_HOME", ".local/state")
    if state is None:
        return None
    with _keys_lock:
        if str(state) not in _keys:
            try:
                secret = _read_or_make_key(state)
            except Refused as exc:
                _note(f"caches off: {exc}")
                secret = None
            except OSError as exc:
                _note(f"caches off: the cache key under {state} cannot be used ({exc.strerror or exc})")
                secret = None
            _keys[str(state)] = (
                None
                if secret is None
                else hmac.digest(secret, b"imagelint cache\0" + _machine_id(), "sha256")
            )
        return _keys[str(state)]


def _read_or_make_key(state: Path) -> bytes:
    fd = _open_private_dir(state, ("imagelint",))
    where = state / "imagelint" / KEY_FILE
    try:
        try:
            return _read_key(fd, where)
        except FileNotFoundError:
            pass
        fcntl.flock(fd, fcntl.LOCK_EX)  # one first run makes the key; the others read it
        try:
            return _read_key(fd, where)
        except FileNotFoundError:
            _make_key(fd)
        return _read_key(fd, where)
    finally:
        os.close(fd)  # and the lock with it


def _read_key(dir_fd: int, where: Path) -> bytes:
    try:
        fd = os.open(KEY_FILE, _OPEN_ENTRY, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{where} is a link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise Refused(f"{where} is not a regular, singly linked file")
        _owned_alone(st, str(where), private=True)
        secret = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(secret) != KEY_BYTES:
        raise Refused(f"{where} does not hold a key")
    return secret


def _make_key(dir_fd: int) -> None:
    """A new key, whole or not at all: written under a temporary name, flushed and renamed into place
    (with the directory locked)."""
    temporary = f".tmp-{os.urandom(8).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES))  # secrets.token_bytes, without importing random
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, KEY_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise


class CacheDir:
    """One cache directory, opened once and used through its descriptor (thread-safe).

    Made by :meth:`open` (the cache ``name`` where XDG says) or :meth:`at` (a given directory);
    either is None when the cache is off or the directory, or the key, cannot be trusted."""

    def __init__(self, name: str, path: Path, fd: int, key: bytes) -> None:
        self.name = name
        self.path = path
        self._fd = fd
        self._key = key
        self._thread_lock = threading.Lock()

    @classmethod
    def open(cls, name: str) -> CacheDir | None:
        """The cache ``name`` under ``$XDG_CACHE_HOME/imagelint``, or None (off, or refused)."""
        root = cache_root(name)
        return None if root is None else cls._opened(name, root.parent.parent, ("imagelint", name))

    @classmethod
    def at(cls, name: str, directory: Path) -> CacheDir | None:
        """The cache ``name`` kept in ``directory`` itself (checked the same way), or None."""
        return cls._opened(name, directory.parent, (directory.name,))

    @classmethod
    def _opened(cls, name: str, parent: Path, names: tuple[str, ...]) -> CacheDir | None:
        where = parent.joinpath(*names)
        key = user_key()
        if key is None:
            return None
        try:
            fd = _open_private_dir(parent, names)
        except Refused as exc:
            _note(f"{name} cache off: {exc}")
            return None
        except OSError as exc:
            _note(f"{name} cache off: {where} cannot be used ({exc.strerror or exc})")
            return None
        return cls(name, where, fd, key)

    def close(self) -> None:
        with self._thread_lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> CacheDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _tag(self, entry: str, identity: bytes, payload: bytes) -> bytes:
        mac = hmac.new(self._key, digestmod="sha256")
        for part in (self.name.encode(), entry.encode(), hashlib.sha256(identity).digest()):
            mac.update(len(part).to_bytes(8, "big") + part)
        mac.update(payload)
        return mac.hexdigest().encode()

    def read(
        self, entry: str, identity: bytes = b"", *, limit: int, authenticated: bool = True
    ) -> bytes | None:
        """The payload of ``entry`` written by :meth:`write` with the same ``identity``, at most
        ``limit`` bytes; None (a miss) for anything else. ``authenticated=False``: the file's bytes as
        they are (a content-addressed entry the caller verifies), after the same checks of the file."""
        raw = self._read_file(entry, (_TAG if authenticated else 0) + limit)
        if raw is None:
            return None
        if not authenticated:
            return raw
        payload = raw[_TAG:]
        if (
            raw[: len(MAGIC)] != MAGIC
            or raw[_TAG - 1 : _TAG] != b"\n"
            or not hmac.compare_digest(raw[len(MAGIC) : _TAG - 1], self._tag(entry, identity, payload))
        ):
            self.remove(entry)
            return None
        return payload

    def _read_file(self, entry: str, limit: int) -> bytes | None:
        try:
            fd = os.open(entry, _OPEN_ENTRY, dir_fd=self._fd)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                self.remove(entry)  # a link, or not a file we may open: not ours
            return None
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_nlink != 1
                or st.st_uid != os.geteuid()
                or st.st_mode & 0o022
                or st.st_size > limit
            ):
                bad = True
            else:
                chunks, left = [], limit + 1
                while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                    chunks.append(chunk)
                    left -= len(chunk)
                raw = b"".join(chunks)
                bad = len(raw) > limit
                if not bad:
                    with contextlib.suppress(OSError):
                        os.utime(fd)  # recently used
        except OSError:
            bad = True
        finally:
            os.close(fd)
        if bad:
            self.remove(entry)
            return None
        return raw

    def exists(self, entry: str) -> bool:
        """Whether a regular file stands under ``entry`` (not read, not verified: a hint, never data)."""
        try:
            return stat.S_ISREG(os.stat(entry, dir_fd=self._fd, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def touch(self, entry: str) -> bool:
        """Mark ``entry`` recently used (without following a link); whether it is there."""
        try:
            os.utime(entry, dir_fd=self._fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def remove(self, entry: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(entry, dir_fd=self._fd)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock on the directory for the block's duration (``flock`` on the directory
        itself: no lock file to plant)."""
        lock = os.open(".", _OPEN_DIR, dir_fd=self._fd)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)

    def write(
        self,
        entry: str,
        payload: bytes,
        identity: bytes = b"",
        *,
        authenticated: bool = True,
        sync: bool = False,
    ) -> None:
        """``payload`` under ``entry``, all of it or nothing (``sync``: flushed to disk before the
        rename); call with :meth:`locked` held. Raises ``OSError`` when the directory cannot be written."""
        data = MAGIC + self._tag(entry, identity, payload) + b"\n" + payload if authenticated else payload
        temporary = f".tmp-{os.urandom(8).hex()}"
        fd = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=self._fd,
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.replace(temporary, entry, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except BaseException:
            self.remove(temporary)
            raise

    def prune(self, suffix: str, *, max_files: int, max_bytes: int) -> int:
        """Remove the least recently used ``*suffix`` entries past the bounds (and anything under such
        a name that is not a regular file); the bytes left. Call with :meth:`locked` held."""
        entries = []
        with os.scandir(self._fd) as listing:
            for item in listing:
                if not item.name.endswith(suffix):
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    entries.append((st.st_mtime, st.st_size, item.name))
                else:
                    self.remove(item.name)
        entries.sort(reverse=True)  # newest first
        kept = total = 0
        for _, size, name in entries:
            if kept + 1 > max_files or total + size > max_bytes:
                self.remove(name)
                continue
            kept, total = kept + 1, total + size
        return total

    def names(self, suffix: str) -> list[str]:
        """The names of the ``*suffix`` entries (for tests and pruning callers)."""
        with os.scandir(self._fd) as listing:
            return sorted(item.name for item in listing if item.name.endswith(suffix))
