"""Inputs and the property for fuzzing the unit-file parser; shared by the tests and the benchmark.

``make_case(rng, corpus)`` draws one input from a ``random.Random``: arbitrary bytes, bytes from an
alphabet of the syntax's own characters, unit files assembled from hostile lines, and mutated copies
of real unit files (``load_corpus`` reads them from the debootstrapped Debian image): bit flips,
splices, inserted NULs, byte order marks, invalid and unclean UTF-8, line endings swapped, long
continuation chains, and lines at the 1 MiB limit. ``check_case`` runs the parser and what reads its
values (word splitting, specifiers, ``Exec…=`` commands, time spans) and raises ``ParserProblem``
when a promise is broken (a wrong size, a line number out of range, an unstripped key...) or a case
takes longer than its time bound; any other exception escaping is a crash of the code under test.
Documented errors (``WordSyntaxError``, ``SpecifierError``, ``ValueError`` from a time span) are
answers, not crashes. ``systemctl_mismatches`` is the differential property: cases written as the
unit files of one tree must get from the index the state ``systemctl list-unit-files`` gives them.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from imagelint.facts.systemd import UnitIndex, execs
from imagelint.facts.systemd.model import ParsedFile
from imagelint.facts.systemd.parser import (
    LONG_LINE_MAX,
    MAX_WARNINGS,
    WHITESPACE,
    WordSyntaxError,
    parse_unit_bytes,
    split_words,
)
from imagelint.facts.systemd.specifiers import SpecifierError, expand
from imagelint.facts.systemd.timespan import parse_timespan
from imagelint.targets.rootfs import RootfsTarget

PATH = "/etc/systemd/system/fuzz@inst.service"
UNIT_ID = "fuzz@inst.service"
SLOW_FOR_SYSTEMCTL = ("long-line", "continuation-chain")  # its continuation handling is quadratic
UNIT_DIRS = ("usr/lib/systemd/system", "lib/systemd/system", "etc/systemd/system")
TIMESPAN_KEYS = ("RestartSec", "TimeoutSec", "TimeoutStartSec", "StartLimitIntervalSec", "OnBootSec")
BOM = b"\xef\xbb\xbf"
# Bytes that mean something to the parser, or to UTF-8: the alphabet of the "syntax" cases
ALPHABET = b"[]=#;\\ \t\r\n\0\"'%ai\xef\xbb\xbf\xff\xc3\xa9\xed\xa0\x80"
TOKENS = (
    b"\\\n",
    b"\\",
    b"\\\\\n",
    b"\0",
    b"\r",
    b"\r\n",
    b"\n",
    b"\n\r",
    BOM,
    b"\xff",
    b"\xc3",  # a truncated two-byte sequence
    b"\xed\xa0\x80",  # a UTF-16 surrogate, encoded
    b"\xef\xb7\x90",  # U+FDD0, a non-character
    b"\xef\xbf\xbe",  # U+FFFE
    b"\xf4\x8f\xbf\xbf",  # U+10FFFF
    b"\xf8\x88\x80\x80\x80",  # a five-byte form
    b"\xc0\x80",  # an over-long NUL
    b"[",
    b"]",
    b"=",
    b"#",
    b";",
    b'"',
    b"'",
    b"%",
    b"%i",
    b"%Z",
    b" \t",
    b"[Unit",
    b"[Service]\n",
    b"\n[Install]\nWantedBy=multi-user.target\n",
    b"ExecStart=",
    b"RestartSec=",
)
SEEDS = (  # used as well as the image's files, and alone when there is no image
    b"[Unit]\nDescription=seed\nWants=a.service b@%i.service\n\n[Service]\nExecStart=/bin/true\n"
    b"RestartSec=5s\n\n[Install]\nWantedBy=multi-user.target\nAlias=seed2.service\n",
    b"[Service]\nExecStart=-/usr/bin/env \"a b\" 'c' \\\n  --flag ; /bin/echo %n\nTimeoutSec=1min 30s\n",
    b"# comment\n; comment\n[Socket]\nListenStream=/run/x.sock\n[Install]\nWantedBy=sockets.target\n",
)


@dataclass(frozen=True)
class Case:
    kind: str
    data: bytes


class ParserProblem(AssertionError):
    """A promise of the parser broken by one input (not an exception of the code under test)."""

    def __init__(self, signature: str, detail: str) -> None:
        super().__init__(f"{signature}: {detail}")
        self.signature = signature


def load_corpus(root: Path | None, limit: int = 400, max_size: int = 64 * 1024) -> list[bytes]:
    """Up to ``limit`` unit files and drop-ins of the image at ``root`` (sorted: deterministic), and SEEDS."""
    found: list[bytes] = list(SEEDS)
    if root is None:
        return found
    paths: list[Path] = []
    for directory in UNIT_DIRS:
        base = root / directory
        if base.is_dir() and not base.is_symlink():
            paths.extend(p for p in sorted(base.rglob("*")) if p.is_file() and not p.is_symlink())
    for path in paths[:limit]:
        data = path.read_bytes()
        if 0 < len(data) <= max_size:
            found.append(data)
    return found


# -- generators ------------------------------------------------------------------------------------


def _random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(
        rng.choice((0, 1, 2, 8, 64, 512, 4096)) if rng.random() < 0.5 else rng.randrange(300)
    )


def _syntax_bytes(rng: random.Random) -> bytes:
    return bytes(rng.choice(ALPHABET) for _ in range(rng.randrange(400)))


def _hostile_line(rng: random.Random) -> bytes:
    pick = rng.randrange(12)
    key = rng.choice((b"ExecStart", b"Wants", b"Description", b"RestartSec", b"Alias", b"", b" K ", b"\xff"))
    value = b"".join(
        rng.choice((*TOKENS, b"word", b"/usr/bin/x", b"1s", b" ")) for _ in range(rng.randrange(8))
    )
    if pick == 0:
        return b"[" + rng.choice((b"Unit", b"Service", b"Install", b"", b"X-Y", b"\xff", b"a]b")) + b"]"
    if pick == 1:
        return b"[" + value  # unterminated header
    if pick == 2:
        return rng.choice((b"#", b";", b" #", b"\t;")) + value
    if pick == 3:
        return key + b"=" + value + b"\\"  # continues
    if pick == 4:
        return value  # no '='
    if pick == 5:
        return b"=" + value
    return key + rng.choice((b"=", b" = ", b"=\t")) + value


def _assembled(rng: random.Random) -> bytes:
    ends = (b"\n", b"\n", b"\n", b"\r\n", b"\r", b"\0")
    lines = [b"[Unit]"] if rng.random() < 0.7 else []
    lines += [_hostile_line(rng) for _ in range(rng.randrange(40))]
    out = b"".join(line + rng.choice(ends) for line in lines)
    return (BOM + out) if rng.random() < 0.1 else out


def _long_line(rng: random.Random) -> bytes:
    """A line at, just under or just over LONG_LINE_MAX, physical or made of continued pieces."""
    size = LONG_LINE_MAX + rng.choice((-2, -1, 0, 1, 2, rng.randrange(-4096, 4096)))
    if rng.random() < 0.5:
        body = b"Description=" + b"x" * (size - len(b"Description="))
    else:
        pieces = rng.choice((2, 3, 16, 1000))
        step = max(1, size // pieces)
        chunks = [b"y" * step for _ in range(pieces)]
        body = b"Description=" + b"\\\n".join(chunks)
    if rng.random() < 0.2:
        body = rng.choice((b"#", BOM, b"\xc3\xa9" * 100)) + body
    return b"[Unit]\n" + body + rng.choice((b"\n", b"\r\n", b"", b"\0")) + b"[Install]\nWantedBy=a.target\n"


def _continuation_chain(rng: random.Random) -> bytes:
    """Many short continued pieces, comments in the middle: the parser must stay linear."""
    n = rng.choice((10, 1000, 50_000, 200_000))
    piece = rng.choice((b"\\", b"a\\", b" \\", b"\\\\\\", b"\xc3\xa9\\"))
    lines = [piece] * n
    if rng.random() < 0.5:
        for _ in range(min(n, 100)):
            lines[rng.randrange(n)] = rng.choice((b"# c \\", b"; x"))
    return b"[Service]\nExecStart=/bin/x " + b"\n".join(lines) + rng.choice((b"\n", b"", b"\\"))


def _mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(9)
        at = rng.randrange(len(buf) + 1)
        if op == 0 and buf:  # flip bits
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert a token
            buf[at:at] = rng.choice(TOKENS)
        elif op == 2:  # delete a chunk
            del buf[at : at + rng.randrange(1, 64)]
        elif op == 3:  # duplicate a chunk
            buf[at:at] = buf[at : at + rng.randrange(1, 200)] * rng.randrange(1, 5)
        elif op == 4:  # splice another file in
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            buf[at:] = other[cut:]
        elif op == 5:  # line endings swapped
            buf = bytearray(bytes(buf).replace(b"\n", rng.choice((b"\r\n", b"\r", b"\0", b"\\\n"))))
        elif op == 6:  # random bytes
            buf[at:at] = rng.randbytes(rng.randrange(1, 16))
        elif op == 7:  # a hostile line
            buf[at:at] = _hostile_line(rng) + b"\n"
        else:  # truncate
            del buf[at:]
    return bytes(buf)


def make_case(rng: random.Random, corpus: Sequence[bytes]) -> Case:
    """One input. About 1 in 100 is a 1 MiB line and 1 in 100 a long continuation chain."""
    roll = rng.random()
    if roll < 0.01:
        return Case("long-line", _long_line(rng))
    if roll < 0.02:
        return Case("continuation-chain", _continuation_chain(rng))
    if roll < 0.15:
        return Case("random-bytes", _random_bytes(rng))
    if roll < 0.30:
        return Case("syntax-bytes", _syntax_bytes(rng))
    if roll < 0.50:
        return Case("assembled", _assembled(rng))
    return Case("mutated-real", _mutate(rng, rng.choice(corpus), corpus))


# -- the property ----------------------------------------------------------------------------------


def _physical_lines(data: bytes) -> int:
    """Lines as systemd's read_line() counts them, written apart from the parser: within a run of CR,
    LF and NUL bytes, a new end of line starts at a byte already seen in the current one, or after a NUL."""
    ends = 0
    for run in re.finditer(rb"[\r\n\0]+", data):
        seen: set[int] = set()
        for byte in run.group():
            if not seen or byte in seen or 0 in seen:
                ends += 1
                seen = set()
            seen.add(byte)
    return ends + (1 if data and data[-1] not in b"\r\n\0" else 0)


def _check_parsed(data: bytes, parsed: ParsedFile) -> None:
    lines = _physical_lines(data)
    if parsed.path != PATH or parsed.size != len(data):
        raise ParserProblem("wrong path or size", f"{parsed.path!r} {parsed.size} for {len(data)} bytes")
    if parsed.fatal is not None and not (parsed.fatal.line is not None and 1 <= parsed.fatal.line <= lines):
        raise ParserProblem("fatal line out of range", f"{parsed.fatal} ({lines} lines)")
    if len(parsed.warnings) > MAX_WARNINGS + 1:
        raise ParserProblem("too many warnings", f"{len(parsed.warnings)}")
    previous = 0
    for a in parsed.assignments:
        if not 1 <= a.line <= lines or a.line < previous:
            raise ParserProblem("assignment line out of range or order", f"{a.line} ({lines} lines)")
        previous = a.line
        if not a.key or a.key != a.key.strip(WHITESPACE) or a.value != a.value.strip(WHITESPACE):
            raise ParserProblem("key or value not stripped", f"{a.key!r}={a.value!r}")
        if "=" in a.key or any(c in a.key + a.value for c in "\n\r\0"):
            raise ParserProblem("line break or '=' inside a key or value", f"{a.key!r}={a.value!r}")
        if a.path != PATH:
            raise ParserProblem("assignment with another file's path", repr(a))


def _consume(parsed: ParsedFile) -> None:
    """What the index and the checks do with values; only documented errors may come out."""
    for a in parsed.assignments[:200]:
        value = a.value[:4096]
        for unquote in (True, False):
            try:
                words = split_words(value, unquote=unquote, retain_escape=True)
            except WordSyntaxError:
                continue
            for word in words[:50]:
                with contextlib.suppress(SpecifierError):
                    expand(word, UNIT_ID)
        execs.commands(a, UNIT_ID)
        if a.key in TIMESPAN_KEYS:
            with contextlib.suppress(ValueError):
                parse_timespan(value)


def check_case(data: bytes, seconds: float = 5.0) -> float:
    """Parse ``data`` and use its values; raise ParserProblem on a broken promise. Returns seconds taken."""
    started = time.perf_counter()
    parsed = parse_unit_bytes(data, PATH)
    _check_parsed(data, parsed)
    _consume(parsed)
    elapsed = time.perf_counter() - started
    if elapsed > seconds:
        raise ParserProblem("too slow", f"{elapsed:.1f} s for {len(data)} bytes (bound {seconds} s)")
    return elapsed


def signature(exc: BaseException) -> str:
    """Equal crashes group together: the broken promise, or the exception and where imagelint raised it."""
    if isinstance(exc, ParserProblem):
        return exc.signature
    where = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if "/imagelint/" in frame.filename:
            where = f"{frame.filename.rsplit('/imagelint/', 1)[-1]}:{frame.lineno}"
    return f"{type(exc).__name__} at imagelint/{where}"


def systemctl_mismatches(root: Path, cases: Sequence[Case]) -> list[tuple[int, str]]:
    """Write ``cases`` as ``/etc/systemd/system/fNNNNN.service`` under the empty directory ``root``;
    return (position, "systemd STATE, ours STATE") for each case whose states differ."""
    from tests.facts.systemd.oracle import list_unit_files

    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    for position, case in enumerate(cases):
        (units / f"f{position:05d}.service").write_bytes(case.data)
    theirs = list_unit_files(root)
    index = UnitIndex.build(RootfsTarget(root))
    found: list[tuple[int, str]] = []
    for position in range(len(cases)):
        name = f"f{position:05d}.service"
        state = theirs[name][0] if name in theirs else "-"
        ours = index[name].state if name in index else "-"
        if state != ours:
            found.append((position, f"systemd {state}, ours {ours}"))
    return found
