"""Bounded regular-expression matching for every pattern that meets data from the image.

Patterns (from rule packs and from the built-in tables) are written in Python's ``re`` syntax; the
text they are matched against (file contents, journal messages) is the adversary's input. A
backtracking engine can spend exponential time on it (``(a+)+$`` on 31 bytes), so no such pattern
is ever run by ``re`` in this process:

* Every pattern must compile with Python's ``re``: that is the documented syntax, and its error
  messages are the ones users see (``PatternError``, exit 2 at load time).
* Python's own parse tree of the pattern is then rewritten in RE2 syntax, and when RE2 accepts the
  result the pattern is matched by RE2 (the ``google-re2`` package): linear time in the text, so it
  needs no clock.
* Patterns RE2 cannot express (backreferences, lookaround, conditionals, atomic groups, possessive
  repeats, repeat counts over 1000) run on Python's ``re`` in a separate worker process, under a
  time budget per compiled pattern (``DEFAULT_BUDGET`` seconds, or ``$IMAGELINT_REGEX_BUDGET``).
  A pattern that uses up its budget raises ``RegexBudgetError`` (an ``ImageReadError`` naming the
  file): the rule ends in error and the run is inconclusive, never hung and never passed.

RE2 is made to give exactly Python's answers: ``\\d``, ``\\s`` and ``\\w`` are rewritten to Python's
Unicode classes, ``^``/``$``/``.`` follow the flags in effect where they appear, and the few cases
where RE2 differs and no rewrite exists go to the worker for that one call: ``\\b`` on non-ASCII
text, case-insensitive matching of text holding one of ``FOLDS_TO_ASCII``, a non-MULTILINE ``$`` on
text that ends with a newline, text with undecodable bytes for a pattern that names U+FFFD, and the
match after an empty match (Python may then find a longer match at the same position). Patterns
RE2 would answer differently whatever the text (case-insensitive non-ASCII letters, a repeat of
something that can match empty, scoped ``(?a:...)``) always use the worker. ``re2`` is imported on
first use only.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import itertools
import marshal
import os
import re
import select
import struct
import sys
import threading
import time
from collections.abc import Iterator
from enum import StrEnum
from typing import Any, NamedTuple

from imagelint import lazy
from imagelint.errors import ImageReadError

DEFAULT_BUDGET = 5.0  # seconds of worker matching per compiled pattern
BUDGET_ENV = "IMAGELINT_REGEX_BUDGET"
WORKER_MEMORY = 1 << 30  # address-space limit of the worker process (bytes)
_IPC_SLACK = 0.25  # seconds allowed per call on top of the budget for start-up and transfer
_SURROGATES = lazy.regex("[\ud800-\udfff]")

# Python's \s for str patterns (str.isspace), as code point ranges; RE2's \s is ASCII only.
SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x09, 0x0D),
    (0x1C, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)
# The only non-ASCII characters Python's IGNORECASE matches to ASCII ones (İ ı ſ K); RE2 folds
# some of them differently, so case-insensitive text containing one goes to the worker.
FOLDS_TO_ASCII = "\u0130\u0131\u017f\u212a"
_ASCII_SPACE = ((0x09, 0x0D), (0x20, 0x20))
_ASCII_DIGIT = ((0x30, 0x39),)
_ASCII_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_MAX_CODE = 0x10FFFF


class Engine(StrEnum):
    RE2 = "re2"  # linear time, in process
    PYTHON = "python"  # Python's re in the worker process, under the time budget


class PatternError(Exception):
    """The pattern does not compile (one line, for a ParamError at rule-pack load time)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RegexBudgetError(ImageReadError):
    """Matching took longer than the pattern's budget (or its memory limit): the data was not matched."""

    def __init__(self, where: str, pattern: str, detail: str) -> None:
        shown = repr(pattern if len(pattern) <= 60 else pattern[:57] + "...")
        super().__init__(where, f"regular expression {shown} {detail}; the data could not be matched")


class Match(NamedTuple):
    """One match: character offsets into the text it was found in."""

    string: str
    begin: int
    finish: int

    def start(self) -> int:
        return self.begin

    def end(self) -> int:
        return self.finish

    def span(self) -> tuple[int, int]:
        return self.begin, self.finish

    def group(self) -> str:
        return self.string[self.begin : self.finish]


class LineMatch(NamedTuple):
    """A match with the line it starts on (1-based number, text without the newline)."""

    number: int
    line: str
    start: int
    end: int


def budget_from_env() -> float:
    raw = os.environ.get(BUDGET_ENV)
    if not raw:
        return DEFAULT_BUDGET
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_BUDGET
    return value if value > 0 else DEFAULT_BUDGET


def compile(
    pattern: str,
    *,
    multiline: bool = False,
    ignore_case: bool = False,
    budget: float | None = None,
    where: str | None = None,
) -> Pattern:
    """A compiled pattern (both engines checked now); raises PatternError when it does not compile."""
    compiled = Pattern(pattern, multiline=multiline, ignore_case=ignore_case, budget=budget, where=where)
    compiled.check()
    return compiled


class Pattern:
    """A pattern, compiled on first use (so that module-level tables cost nothing at start-up)."""

    def __init__(
        self,
        pattern: str,
        *,
        multiline: bool = False,
        ignore_case: bool = False,
        budget: float | None = None,
        where: str | None = None,
    ) -> None:
        self.pattern = pattern
        self.multiline = multiline
        self.ignore_case = ignore_case
        self.budget = budget
        self.where = where
        self.spent = 0.0  # seconds used in the worker so far
        self.worker_calls = 0  # calls that went to the worker (for tests and benchmarks)
        self._compiled: _Compiled | None = None

    def __repr__(self) -> str:
        return f"textmatch.Pattern({self.pattern!r})"

    @property
    def flags(self) -> int:
        return int((re.MULTILINE if self.multiline else 0) | (re.IGNORECASE if self.ignore_case else 0))

    @property
    def engine(self) -> Engine:
        """RE2 when it can run the pattern (on ordinary text), else the budgeted Python worker."""
        return Engine.RE2 if self._get().re2 is not None else Engine.PYTHON

    def check(self) -> Pattern:
        self._get()
        return self

    def search(self, text: str, *, where: str | None = None) -> Match | None:
        found = self._find(text, 1, where)
        return found[0] if found else None

    def finditer(self, text: str, *, where: str | None = None, limit: int | None = None) -> Iterator[Match]:
        """The first ``limit`` (default all) non-overlapping matches, as ``re.finditer`` finds them."""
        return iter(self._find(text, limit, where))

    def match_lines(
        self, text: str, *, where: str | None = None, limit: int | None = None
    ) -> list[LineMatch]:
        """The first ``limit`` matches, each with its line number and the text of that line."""
        found = []
        line, counted = 1, 0
        for m in self._find(text, limit, where):
            line += text.count("\n", counted, m.begin)
            counted = m.begin
            first = text.rfind("\n", 0, m.begin) + 1
            last = text.find("\n", m.begin)
            found.append(LineMatch(line, text[first : last if last >= 0 else len(text)], m.begin, m.finish))
        return found

    # -- internals -------------------------------------------------------------------------

    def _get(self) -> _Compiled:
        if self._compiled is None:
            self._compiled = _compile(self.pattern, self.flags)
        return self._compiled

    def _find(self, text: str, limit: int | None, where: str | None) -> list[Match]:
        if limit is not None and limit <= 0:
            return []
        compiled = self._get()
        if compiled.re2 is not None and compiled.suits(text):
            spans = _re2_spans(compiled, text, limit)
            if spans is not None:
                return [Match(text, s, e) for s, e in spans]
        return [Match(text, s, e) for s, e in self._in_worker(text, limit, where)]

    def _in_worker(self, text: str, limit: int | None, where: str | None) -> list[tuple[int, int]]:
        budget = self.budget if self.budget is not None else budget_from_env()
        place = where or self.where or "(text)"
        remaining = budget - self.spent
        if remaining <= 0:
            raise RegexBudgetError(place, self.pattern, f"already used its {budget:g} s budget")
        self.worker_calls += 1
        slack = _IPC_SLACK + len(text) / 20e6
        started = time.monotonic()
        try:
            status, spans, used = _WORKER.run(self.pattern, self.flags, text, limit, remaining + slack)
        except TimeoutError:
            self.spent = budget
            raise RegexBudgetError(place, self.pattern, f"ran longer than its {budget:g} s budget") from None
        except OSError as exc:
            raise RegexBudgetError(place, self.pattern, f"could not be run: {exc}") from None
        self.spent += min(used, time.monotonic() - started)
        if status == "memory":
            raise RegexBudgetError(place, self.pattern, "ran out of its memory limit")
        if status != "ok":
            raise RegexBudgetError(place, self.pattern, f"failed: {spans}")
        return [(int(s), int(e)) for s, e in spans]


# -- compiling ---------------------------------------------------------------------------------


class _Compiled(NamedTuple):
    re2: Any  # an re2 pattern object, or None: Python's re in the worker
    ascii_only: bool  # RE2 agrees with Python on ASCII text only (\b and \B)
    eol_dollar: bool  # a non-MULTILINE $: Python also matches before a final newline
    fffd: bool  # names U+FFFD: text with undecodable bytes (surrogate escapes) goes to the worker
    non_boundary: bool  # \B: Python's never matches in an empty text
    folds: bool  # case-insensitive (ASCII pattern): text with a FOLDS_TO_ASCII letter goes to the worker

    def suits(self, text: str) -> bool:
        if self.non_boundary and not text:
            return False
        if not text.isascii():
            if self.ascii_only:
                return False
            if self.folds and any(ch in text for ch in FOLDS_TO_ASCII):
                return False
        return not (self.eol_dollar and text.endswith("\n"))


# A pure function of its arguments, kept: a rule's patterns are compiled when it is loaded and again
# when it is evaluated.
@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int) -> _Compiled:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarning on '[[' and the like: not for our users' stderr
        try:
            re.compile(pattern, flags)
        except re.error as exc:
            raise PatternError(f"regular expression does not compile: {exc}") from None
        except (RecursionError, OverflowError, MemoryError, ValueError) as exc:
            what = (
                "it is nested too deeply"
                if isinstance(exc, RecursionError)
                else str(exc) or type(exc).__name__
            )
            raise PatternError(f"regular expression does not compile: {what}") from None
        try:
            tree = _parse(pattern, flags)
        except Exception:  # a private module: any surprise means "use Python's re"
            tree = None
    if tree is None:
        return _Compiled(None, False, False, False, False, False)
    translator = _Translator()
    try:
        source = translator.translate(tree)
    except (_Untranslatable, RecursionError):
        return _Compiled(None, False, False, False, False, False)
    try:
        compiled = _re2_compile(source)
    except Exception:  # RE2 refuses (repeat over 1000, program too large): Python's re it is
        return _Compiled(None, False, False, False, False, False)
    return _Compiled(
        compiled,
        translator.ascii_only,
        translator.eol_dollar,
        translator.fffd,
        translator.non_boundary,
        translator.folds,
    )


def _parse(pattern: str, flags: int) -> Any:
    parser: Any = importlib.import_module("re._parser")
    return parser.parse(pattern, flags)


def _re2_compile(source: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print its own refusals to stderr
    options.never_capture = True  # only whole-match spans are used
    return re2.compile(source, options)


class _Untranslatable(Exception):
    """The pattern uses something RE2 cannot express with Python's meaning."""


_OPS: Any = None


def _ops() -> Any:
    global _OPS
    if _OPS is None:
        _OPS = importlib.import_module("re._constants")
    return _OPS


def _char(code: int) -> str:
    """One code point as an RE2 literal, safe inside and outside a class."""
    if code < 0x80 and chr(code).isalnum():
        return chr(code)
    return f"\\x{{{code:x}}}"


def _ranges(ranges: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> str:
    return "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges)


def _complement(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    out, start = [], 0
    for lo, hi in sorted(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = max(start, hi + 1)
    if start <= _MAX_CODE:
        out.append((start, _MAX_CODE))
    return out


def _nullable(items: list[Any]) -> bool:
    """Whether a parsed sequence can match the empty string."""
    c = _ops()
    for op, av in items:
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN):
            return False
        if op is c.BRANCH and not any(_nullable(list(alt)) for alt in av[1]):
            return False
        if op is c.SUBPATTERN and not _nullable(list(av[3])):
            return False
        if (
            op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT)
            and av[0] > 0
            and not _nullable(list(av[2]))
        ):
            return False
    return True


class _Translator:
    """Python's parse tree → RE2 syntax with the same meaning (or _Untranslatable)."""

    def __init__(self) -> None:
        self.ascii_only = False
        self.eol_dollar = False
        self.fffd = False
        self.non_boundary = False
        self.folds = False

    def translate(self, tree: Any) -> str:
        flags = int(tree.state.flags)
        body = self._seq(list(tree), flags)
        return f"(?i:{body})" if flags & re.IGNORECASE else body

    def _seq(self, items: list[Any], flags: int) -> str:
        return "".join(self._item(op, av, flags) for op, av in items)

    def _item(self, op: Any, av: Any, flags: int) -> str:
        c = _ops()
        if flags & re.IGNORECASE and op in (c.LITERAL, c.NOT_LITERAL, c.IN):
            self.folds = True  # Python and RE2 fold a few non-ASCII letters differently
        if op is c.LITERAL:
            self._code(av, av, flags)
            return _char(av)
        if op is c.NOT_LITERAL:
            self._code(av, av, flags)
            return f"[^{_char(av)}]"
        if op is c.ANY:
            return "(?s:.)" if flags & re.DOTALL else "[^\\n]"
        if op is c.IN:
            return self._set(av, flags)
        if op is c.AT:
            return self._at(av, flags)
        if op is c.BRANCH:
            return "(?:" + "|".join(self._seq(list(alt), flags) for alt in av[1]) + ")"
        if op is c.SUBPATTERN:
            _group, add, remove, body = av
            if (add | remove) & (re.ASCII | re.UNICODE | re.LOCALE):
                raise _Untranslatable("scoped (?a:...)")  # Python's own meaning of it is irregular
            inner = (flags | add) & ~remove
            text = self._seq(list(body), inner)
            if bool(inner & re.IGNORECASE) != bool(flags & re.IGNORECASE):
                return f"(?{'i' if inner & re.IGNORECASE else '-i'}:{text})"
            return f"(?:{text})"
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, body = av
            if high != 1 and _nullable(list(body)):
                raise _Untranslatable("repeat of what can match empty")  # iterations end differently
            text = f"(?:{self._seq(list(body), flags)})"
            if high is c.MAXREPEAT or high == c.MAXREPEAT:
                count = "*" if low == 0 else "+" if low == 1 else f"{{{low},}}"
            else:
                count = "?" if (low, high) == (0, 1) else f"{{{low}}}" if low == high else f"{{{low},{high}}}"
            return text + count + ("?" if op is c.MIN_REPEAT else "")
        raise _Untranslatable(str(op))  # GROUPREF, ASSERT, ATOMIC_GROUP, POSSESSIVE_REPEAT, ...

    def _code(self, low: int, high: int, flags: int) -> None:
        """Note what a literal or range needs: the worker for case folding or surrogates."""
        if flags & re.IGNORECASE and high >= 0x80:
            raise _Untranslatable("case-insensitive non-ASCII")
        if low <= 0xDFFF and high >= 0xD800:
            if not (low <= 0xD800 and high >= 0xDFFF):
                raise _Untranslatable("surrogates")
            if not low <= 0xFFFD <= high:
                self.fffd = True
        elif low <= 0xFFFD <= high:
            self.fffd = True

    def _at(self, code: Any, flags: int) -> str:
        c = _ops()
        if code is c.AT_BEGINNING:
            return "(?m:^)" if flags & re.MULTILINE else "\\A"
        if code is c.AT_BEGINNING_STRING:
            return "\\A"
        if code is c.AT_END:
            if flags & re.MULTILINE:
                return "(?m:$)"
            self.eol_dollar = True
            return "\\z"
        if code is c.AT_END_STRING:
            return "\\z"
        if code in (c.AT_BOUNDARY, c.AT_NON_BOUNDARY):
            self.ascii_only = True  # Python's \b is Unicode; RE2's is ASCII and works on bytes
            self.non_boundary |= code is c.AT_NON_BOUNDARY
            return "\\b" if code is c.AT_BOUNDARY else "\\B"
        raise _Untranslatable(str(code))

    def _set(self, items: list[Any], flags: int) -> str:
        c = _ops()
        negate = False
        parts: list[str] = []
        alternatives: list[str] = []  # members a class cannot hold (Unicode \W)
        for op, av in items:
            if op is c.NEGATE:
                negate = True
            elif op is c.LITERAL:
                self._code(av, av, flags)
                parts.append(_char(av))
            elif op is c.RANGE:
                self._code(av[0], av[1], flags)
                parts.append(_ranges([av]))
            elif op is c.CATEGORY:
                member = self._category(av, flags)
                if member.startswith("["):
                    alternatives.append(member)
                else:
                    parts.append(member)
            else:
                raise _Untranslatable(str(op))
        if negate:
            if alternatives:
                raise _Untranslatable("negated class with \\W")
            return f"[^{''.join(parts)}]"
        if not alternatives:
            return f"[{''.join(parts)}]"
        return "(?:" + "|".join(([f"[{''.join(parts)}]"] if parts else []) + alternatives) + ")"

    def _category(self, code: Any, flags: int) -> str:
        """Class contents for a category, or a whole bracketed class when it cannot sit inside one."""
        c = _ops()
        ascii_mode = bool(flags & re.ASCII)
        if code is c.CATEGORY_DIGIT:
            return _ranges(_ASCII_DIGIT) if ascii_mode else "\\p{Nd}"
        if code is c.CATEGORY_NOT_DIGIT:
            return _ranges(_complement(_ASCII_DIGIT)) if ascii_mode else "\\P{Nd}"
        if code is c.CATEGORY_SPACE:
            return _ranges(_ASCII_SPACE if ascii_mode else SPACE_RANGES)
        if code is c.CATEGORY_NOT_SPACE:
            return _ranges(_complement(_ASCII_SPACE if ascii_mode else SPACE_RANGES))
        if code is c.CATEGORY_WORD:
            return _ranges(_ASCII_WORD) if ascii_mode else "\\p{L}\\p{N}_"
        if code is c.CATEGORY_NOT_WORD:
            return _ranges(_complement(_ASCII_WORD)) if ascii_mode else "[^\\p{L}\\p{N}_]"
        raise _Untranslatable(str(code))


# -- matching with RE2 -------------------------------------------------------------------------


def _re2_spans(compiled: _Compiled, text: str, limit: int | None) -> list[tuple[int, int]] | None:
    """Match spans in character offsets, or None when the call must go to the worker."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # surrogate escapes of undecodable bytes: stand-ins of equal length
        if compiled.fffd:
            return None
        data = _SURROGATES().sub("\ufffd", text).encode("utf-8")
    plain = len(data) == len(text)
    spans: list[tuple[int, int]] = []
    pos, byte_mark, char_mark = 0, 0, 0
    while limit is None or len(spans) < limit:
        found = compiled.re2.search(data, pos)
        if found is None:
            break
        start, end = found.span()
        if plain:
            spans.append((start, end))
        else:
            char_mark += len(data[byte_mark:start].decode("utf-8"))
            char_end = char_mark + len(data[start:end].decode("utf-8"))
            byte_mark = start
            spans.append((char_mark, char_end))
        if end == start:
            if limit is None or len(spans) < limit:
                return None  # Python may find a longer match at this same position next
            break
        pos = end
    return spans


# -- the worker --------------------------------------------------------------------------------


class _Worker:
    """One long-lived child process running Python's re; killed and replaced when a call overruns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._owner = 0

    def run(
        self, pattern: str, flags: int, text: str, limit: int | None, timeout: float
    ) -> tuple[str, Any, float]:
        request = marshal.dumps((pattern, flags, text, limit))
        with self._lock:
            proc = self._start()
            deadline = time.monotonic() + timeout
            try:
                proc.stdin.write(struct.pack(">Q", len(request)) + request)
                proc.stdin.flush()
                size = struct.unpack(">Q", self._read(proc, 8, deadline))[0]
                status, result, used = marshal.loads(self._read(proc, size, deadline))
            except TimeoutError:
                self.stop()
                raise
            except (OSError, EOFError, ValueError, struct.error) as exc:
                self.stop()
                raise OSError(f"the matching worker failed ({type(exc).__name__})") from None
            return str(status), result, float(used)

    def _start(self) -> Any:
        if self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None:
            return self._proc
        import subprocess

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        code = "import sys; sys.path.insert(0, sys.argv[1]); import imagelint.textmatch as t; t.worker_main()"
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code, root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._owner = os.getpid()
        return self._proc

    @staticmethod
    def _read(proc: Any, size: int, deadline: float) -> bytes:
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        while size > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or self._owner != os.getpid():
            return
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()


_WORKER = _Worker()
atexit.register(_WORKER.stop)


def worker_main() -> None:
    """The worker's loop: read (pattern, flags, text, limit), answer (status, spans, seconds)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    except (ImportError, ValueError, OSError):
        pass
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    cache: dict[tuple[str, int], re.Pattern[str]] = {}
    while True:
        header = source.read(8)
        if len(header) < 8:
            return
        pattern, flags, text, limit = marshal.loads(source.read(struct.unpack(">Q", header)[0]))
        started = time.perf_counter()
        try:
            compiled = cache.get((pattern, flags))
            if compiled is None:
                compiled = cache[(pattern, flags)] = re.compile(pattern, flags)
            reply: tuple[str, Any, float] = (
                "ok",
                [m.span() for m in itertools.islice(compiled.finditer(text), limit)],
                time.perf_counter() - started,
            )
        except MemoryError:
            reply = ("memory", [], time.perf_counter() - started)
        except Exception as exc:
            reply = ("error", f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
        data = marshal.dumps(reply)
        sink.write(struct.pack(">Q", len(data)) + data)
        sink.flush()
