"""What a unit would execute, whether it is in the image, and the conditions that would skip it.

Command lines (``ExecStart=`` and friends) are read as systemd 252's ``config_parse_exec()`` does:
the first word may carry the prefixes ``-`` (a failure, including a missing executable, is
ignored), ``@`` (the second word is argv[0]), ``:`` (no environment expansion), ``+``, ``!`` and
``!!`` (privilege handling), in any combination; a standalone ``;`` separates several commands on
one line. The executable is an absolute path, or a plain file name looked up in
``ExecSearchPath=`` when set, else in the manager's fixed path
``/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`` (Debian's systemd is built
with split-usr; the unit's ``Environment=`` PATH is not used for this lookup). Specifiers of the
unit name are expanded; a command whose executable depends on something only known at run time
(``%h``, ``$VAR``) is reported as unknown, never as missing.

Conditions: ``ConditionPathExists=``, ``ConditionPathExistsGlob=``, ``ConditionPathIsDirectory=``,
``ConditionFileNotEmpty=`` and ``ConditionFileIsExecutable=`` are evaluated on the image, with
``!`` (negation) and ``|`` (triggering: at least one triggering condition must hold) as systemd
does. A path with ``%v`` (the kernel release) is false when no kernel's path
matches at all (``/lib/modules/*/modules.devname`` in an image without kernel modules), else
unknown. Paths under the run-time file systems (``/run``, ``/proc``, ``/sys``, ``/dev``, ``/tmp``)
and every other condition type are unknown: a unit is only *skipped* when the conditions that are
known suffice to skip it. An empty ``Condition…=`` resets the whole list, as in systemd.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from imagelint.errors import ImageReadError
from imagelint.facts.systemd.model import Assignment
from imagelint.facts.systemd.parser import WordSyntaxError, split_words
from imagelint.facts.systemd.specifiers import SpecifierError, expand
from imagelint.targets.interface import FileKind, Target

if TYPE_CHECKING:
    from imagelint.facts.systemd.index import Unit

EXEC_KEYS = (
    "ExecCondition",
    "ExecStartPre",
    "ExecStart",
    "ExecStartPost",
    "ExecReload",
    "ExecStop",
    "ExecStopPre",
    "ExecStopPost",
)
EXEC_SECTIONS = ("Service", "Socket", "Mount", "Swap")
DEFAULT_EXEC_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
RUNTIME_FS = ("/run", "/proc", "/sys", "/dev", "/tmp", "/var/run")
EVALUABLE = (
    "PathExists",
    "PathExistsGlob",
    "PathIsDirectory",
    "FileNotEmpty",
    "FileIsExecutable",
)
_PREFIX_CHARS = "-@:+!"


class Command(NamedTuple):
    """One command of an ``Exec…=`` line."""

    key: str
    executable: str | None  # after specifier expansion; None when it cannot be known offline
    raw: str
    ignore_failure: bool
    assignment: Assignment
    note: str | None = None  # why the executable is unknown


def _prefixes(word: str) -> tuple[str, str]:
    i = 0
    while i < len(word) and word[i] in _PREFIX_CHARS:
        i += 1
    return word[:i], word[i:]


def commands(assignment: Assignment, unit_id: str) -> list[Command]:
    """The commands of one ``Exec…=`` assignment (several when separated by a standalone ``;``)."""
    try:
        words = split_words(assignment.value, unquote=True, retain_escape=False)
    except WordSyntaxError as exc:
        return [Command(assignment.key, None, assignment.value, False, assignment, f"unparsable: {exc}")]
    out: list[Command] = []
    groups: list[list[str]] = [[]]
    for word in words:
        if word == ";":
            groups.append([])
        else:
            groups[-1].append(word)
    for group in groups:
        if not group:
            continue
        prefix, first = _prefixes(group[0])
        ignore = "-" in prefix
        raw = " ".join(group)
        if not first:  # "@" alone etc.: systemd refuses the line
            out.append(Command(assignment.key, None, raw, ignore, assignment, "no executable"))
            continue
        try:
            exe = expand(first, unit_id)
        except SpecifierError as exc:
            out.append(Command(assignment.key, None, raw, ignore, assignment, str(exc)))
            continue
        if "$" in exe:
            out.append(Command(assignment.key, None, raw, ignore, assignment, "depends on the environment"))
            continue
        out.append(Command(assignment.key, exe, raw, ignore, assignment))
    return out


class Resolution(NamedTuple):
    """Where an executable was found (``path``), or why not (``problem``: "missing"/"not executable")."""

    path: str | None
    problem: str | None
    searched: tuple[str, ...] = ()


def _is_executable(target: Target, path: str) -> str | None:
    """None if ``path`` is an executable regular file in the image, else what is wrong with it."""
    try:
        st = target.stat(path)
    except ImageReadError as exc:
        return f"unreadable ({exc.reason})"
    if st is None:
        return "missing"
    if st.kind is not FileKind.FILE:
        return f"not a regular file ({st.kind})"
    if not st.mode & 0o111:
        return "not executable"
    return None


def resolve_executable(target: Target, exe: str, search_path: tuple[str, ...] | None) -> Resolution:
    """Find ``exe`` as the manager would: absolute as is, a bare name in the search path."""
    if exe.startswith("/"):
        problem = _is_executable(target, exe)
        return Resolution(exe if problem is None else None, problem, (exe,))
    if "/" in exe:
        return Resolution(None, "a relative path (systemd refuses it)", (exe,))
    dirs = search_path or DEFAULT_EXEC_PATH
    tried = tuple(f"{d.rstrip('/')}/{exe}" for d in dirs)
    for candidate in tried:
        if _is_executable(target, candidate) is None:
            return Resolution(candidate, None, tried)
    return Resolution(None, "missing", tried)


def unit_commands(target: Target, unit: Unit) -> list[tuple[Command, Resolution | None]]:
    """Every command of the unit's effective ``Exec…=`` settings, each with where its executable is
    found (None when the executable cannot be known offline)."""
    unit_id = unit.unit_id or unit.name
    search = unit.get_value("Service", "ExecSearchPath")
    search_path = tuple(p for p in search.split(":") if p) if search else None
    found: list[tuple[Command, Resolution | None]] = []
    for key in EXEC_KEYS:
        for section in EXEC_SECTIONS:
            for a in unit.get(section, key):
                for cmd in commands(a, unit_id):
                    exe = cmd.executable
                    found.append((cmd, None if exe is None else resolve_executable(target, exe, search_path)))
    return found


class UnitCommands:
    """:func:`unit_commands` of each unit, found once per run and shared by the rules and the
    inventory (:mod:`imagelint.facts.inventory`), which would otherwise resolve them all again."""

    def __init__(self, target: Target) -> None:
        self.target = target
        # by id(unit), the unit kept alongside so that its id cannot be reused while cached
        self._found: dict[int, tuple[Unit, list[tuple[Command, Resolution | None]]]] = {}

    def __call__(self, unit: Unit) -> list[tuple[Command, Resolution | None]]:
        cached = self._found.get(id(unit))
        if cached is None:
            cached = self._found[id(unit)] = (unit, unit_commands(self.target, unit))
        return cached[1]


def missing_files(
    target: Target, unit: Unit, include_ignored: bool = False, *, commands: UnitCommands | None = None
) -> tuple[list[str], Assignment | None]:
    """What the unit would run or read that is not in the image: (texts, the line to point at).

    Executables of every ``Exec…=`` (those whose failure is ignored with ``-`` only with
    ``include_ignored``), and required ``EnvironmentFile=`` paths outside the run-time file systems.
    ``commands``: the run's shared resolutions (else they are found here).
    """
    by_exe: dict[tuple[str, str], list[Assignment]] = {}
    for cmd, res in commands(unit) if commands is not None else unit_commands(target, unit):
        if cmd.executable is None or res is None or (cmd.ignore_failure and not include_ignored):
            continue
        if res.problem is not None:
            ignored = " (failure ignored: '-')" if cmd.ignore_failure else ""
            by_exe.setdefault((cmd.executable, res.problem + ignored), []).append(cmd.assignment)
    problems: list[tuple[Assignment, str]] = []
    for (exe, problem), where in by_exe.items():
        settings = ", ".join(f"{a.key}= line {a.line}" for a in where)
        problems.append((where[0], f"{exe} is {problem} ({settings})"))
    for a in unit.get("Service", "EnvironmentFile"):
        optional = a.value.startswith("-")
        path = a.value[1:].strip() if optional else a.value.strip()
        if optional or not path.startswith("/") or is_runtime_path(path):
            continue
        if target.stat(path) is None:
            problems.append((a, f"EnvironmentFile={path} is missing (line {a.line})"))
    if not problems:
        return [], None
    primary = next((a for w in by_exe.values() for a in w if a.key == "ExecStart"), problems[0][0])
    return [text for _, text in problems], primary


def is_runtime_path(path: str) -> bool:
    """Whether ``path`` lies on a file system that exists only at run time (/run, /proc, ...)."""
    return any(path == fs or path.startswith(fs + "/") for fs in RUNTIME_FS)


# -- conditions -------------------------------------------------------------------------------


class Condition(NamedTuple):
    kind: str  # "PathExists"...
    trigger: bool
    negate: bool
    parameter: str
    assignment: Assignment
    result: bool | None  # None: cannot be known offline


def _evaluate(target: Target, kind: str, param: str) -> bool | None:
    if kind not in EVALUABLE or not param.startswith("/"):
        return None
    if is_runtime_path(param):
        return None
    try:
        if kind == "PathExistsGlob":
            return bool(target.glob(param))
        st = target.stat(param)
    except ImageReadError:
        return None
    if kind == "PathExists":
        return st is not None
    if st is None:
        return False
    if kind == "PathIsDirectory":
        return st.kind is FileKind.DIR
    if kind == "FileNotEmpty":
        return st.kind is FileKind.FILE and st.size > 0
    return st.kind is FileKind.FILE and bool(st.mode & 0o111)  # FileIsExecutable


def _any_kernel(target: Target, kind: str, value: str, unit_id: str) -> bool | None:
    """A path with ``%v`` (the running kernel's release, unknown offline): False when the condition
    fails for every kernel release the image could boot (no match under any name), else unknown."""
    if "%v" not in value or kind == "PathExistsGlob":
        return None
    try:
        pattern = expand(value.replace("%v", "\0"), unit_id).replace("\0", "*")
    except SpecifierError:
        return None
    if not pattern.startswith("/") or "*" not in pattern:
        return None
    try:
        candidates = target.glob(pattern)
    except ImageReadError:
        return None
    if any(_evaluate(target, kind, path) is not False for path in candidates):
        return None
    return False


def conditions(target: Target, assignments: list[Assignment], unit_id: str) -> list[Condition]:
    """The unit's effective ``Condition…=`` list (after resets), each evaluated when possible."""
    out: list[Condition] = []
    for a in assignments:
        if a.section != "Unit" or not a.key.startswith("Condition"):
            continue
        if a.value == "":
            out.clear()
            continue
        kind = a.key[len("Condition") :]
        value = a.value
        trigger = value.startswith("|")
        value = value[1:].lstrip() if trigger else value
        negate = value.startswith("!")
        value = value[1:].lstrip() if negate else value
        try:
            param = expand(value, unit_id)
            result = _evaluate(target, kind, param)
        except SpecifierError:
            param, result = value, _any_kernel(target, kind, value, unit_id)
        if result is not None and negate:
            result = not result
        out.append(Condition(kind, trigger, negate, param, a, result))
    return out


def skipped_by(conds: list[Condition]) -> list[Condition] | None:
    """The conditions that certainly skip the unit on this image, or None if it may run.

    A non-triggering condition known to be false skips it; so do triggering conditions when all of
    them are known and all are false.
    """
    for c in conds:
        if not c.trigger and c.result is False:
            return [c]
    triggering = [c for c in conds if c.trigger]
    if triggering and all(c.result is False for c in triggering):
        return triggering
    return None
