"""File check kinds: presence and absence by glob, content by regex, emptiness, permissions and ownership.

All paths are image paths with shell globs (``**`` for any depth); they are read through the target,
so links resolve inside the image and special files are never opened.

Grouping (``group_by: directory``, taken by every kind that reports matched paths): when many files in one
directory are one problem (1,650 downloaded packages in /var/cache/apt/archives), the kind returns one
observation per directory instead of one per file. Its subject and path are the directory; its
evidence keeps what the members have in common and adds ``count``, ``bytes`` (regular files; a matched
directory counts with the files below it), the first names (``examples``) and the sorted names
(``files``, at most ``GROUP_FILES_LISTED``, the rest counted in ``files_omitted``). A waiver covers a
group when its ``path`` glob matches the directory (``/var/cache/apt/archives``, ``/var/cache/*``); a
glob written for the member files (``/var/cache/apt/archives/*.deb``) does not match it.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterator
from typing import Annotated, Literal, TypeVar

from imagelint import textmatch
from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, PathNeed
from imagelint.checks.params import Param, ParamError
from imagelint.errors import ImageReadError
from imagelint.facts.accounts import read_ids
from imagelint.records import dataclass
from imagelint.targets import FileKind, ImageStat
from imagelint.targets.interface import human_size

EXCERPT_MAX = 160
GROUP_EXAMPLES = 3  # names shown in a grouped finding's message
GROUP_FILES_LISTED = 1000  # names kept in a grouped finding's evidence; the rest are counted
_OCTAL = "^0?[0-7]{1,4}$"


# -- parameters: the groups the kinds share, each a base dataclass -----------------------------


@dataclass(frozen=True, kw_only=True)
class Globs:
    paths: Annotated[
        tuple[Annotated[str, Param(pattern="^/")], ...],
        Param("absolute image paths; shell globs, ** for any depth", minItems=1),
    ]


@dataclass(frozen=True, kw_only=True)
class Files(Globs):
    exclude: Annotated[
        tuple[str, ...], Param("globs of paths to leave out (* also matches /, so '*.pub' works anywhere)")
    ] = ()


@dataclass(frozen=True, kw_only=True)
class Entries(Files):
    """What the tree-walking kinds (file.present, file.permissions) select entries by."""

    types: Annotated[
        tuple[FileKind, ...],
        Param("only entries of these types (the path itself, links not followed); default any", minItems=1),
    ] = ()


@dataclass(frozen=True, kw_only=True)
class Grouped:
    group_by: Annotated[
        Literal["directory"] | None,
        Param(
            "directory: one finding per directory of matches, not one per match, with the count, total "
            "size, examples and names as evidence; its path is the directory, so a waiver covers it when "
            "the waiver's path glob matches the directory"
        ),
    ] = None


@dataclass(frozen=True, kw_only=True)
class Regex:
    pattern: Annotated[
        str,
        Param(
            "Python regular expression, matched per line (multiline); linear-time RE2 runs it when it "
            "can, else Python's re under a time budget"
        ),
    ]
    ignore_case: Annotated[bool, Param("match regardless of case")] = False

    def compile(self) -> textmatch.Pattern:
        """The pattern, matched with a bounded engine (the image's files are adversarial input)."""
        return textmatch.compile(self.pattern, multiline=True, ignore_case=self.ignore_case)

    def validate(self) -> None:
        try:
            self.compile()
        except textmatch.PatternError as exc:
            raise ParamError(["pattern"], exc.message) from None


_GROUP_VARIABLES = {
    "count": "with group_by: matches in the directory",
    "count_text": "with group_by: the count with thousands separators",
    "bytes": "with group_by: their total size in bytes (a matched directory with the files below it)",
    "bytes_text": "with group_by: the total size, human readable",
    "examples_text": f"with group_by: the first {GROUP_EXAMPLES} names, sorted",
}
_PER_MEMBER = frozenset({"size"})  # evidence that describes one member, never kept for a group
_MISSING = object()


def _expand(ctx: CheckContext, params: Files) -> list[str]:
    """Image paths matched by ``paths`` less ``exclude``, in order, without duplicates."""
    seen: dict[str, None] = {}
    for pattern in params.paths:
        for path in ctx.target.glob(pattern):
            if not _excluded(path, params):
                seen.setdefault(path)
    return list(seen)


def _excluded(path: str, params: Files) -> bool:
    return any(fnmatch.fnmatchcase(path, ex) for ex in params.exclude)


def declared(params: Globs, how: str, tree_how: str = "tree") -> list[PathNeed]:
    """``paths`` as collector needs: a glob with ``**`` becomes a tree below its fixed part."""
    needs = []
    for pattern in params.paths:
        parts = pattern.split("/")
        if "**" in parts:
            top = "/".join(parts[: parts.index("**")]) or "/"
            needs.append(PathNeed(top, tree_how if how == "content" else "tree"))
        else:
            needs.append(PathNeed(pattern, how))
    return needs


def _typed(ctx: CheckContext, params: Entries) -> list[ImageStat]:
    found = []
    for path in _expand(ctx, params):
        st = ctx.target.lstat(path)
        if st is not None and (not params.types or st.kind in params.types):
            found.append(st)
    return found


def _account_id(ctx: CheckContext, name: str | int, table_path: str) -> int:
    if isinstance(name, int) or name.isdigit():
        return int(name)
    table = ctx.fact(("accounts", table_path), lambda: read_ids(ctx.target, table_path))
    if name not in table:
        raise ImageReadError(table_path, f"has no entry for {name!r}")
    return int(table[name])


def redact(line: str) -> str:
    """Keep what names a secret (``aws_secret_access_key =``), never the secret itself."""
    rest = line.lstrip()
    end = 0
    while end < len(rest) and rest[end] not in "=:" and not rest[end].isspace():
        end += 1
    if end == 0:
        return "<redacted>"
    key, after = rest[:end], rest[end:].lstrip()
    separator = after[:1] if after[:1] in ("=", ":") else ""
    return f"{key} {separator} <redacted>" if separator else f"{key} <redacted>"


def _existing_files(ctx: CheckContext, params: Files) -> list[str]:
    """Matching paths that exist and are not directories (a FIFO stays in: reading it is an error)."""
    files = [
        p
        for p in _expand(ctx, params)
        if (st := ctx.target.stat(p)) is not None and st.kind is not FileKind.DIR
    ]
    if not files:
        raise NotApplicable(f"no file matches {', '.join(params.paths)}")
    return files


def _bytes_below(ctx: CheckContext, path: str) -> int:
    """Size of a regular file, or of every regular file below a directory (links not followed)."""
    st = ctx.target.lstat(path)
    if st is None:
        return 0
    if st.kind is FileKind.FILE:
        return st.size
    if st.kind is FileKind.DIR:
        return sum(e.size for e in ctx.target.walk(path) if e.kind is FileKind.FILE)
    return 0


def _grouped(ctx: CheckContext, params: Grouped, found: list[Observation]) -> list[Observation]:
    """``found`` as it is, or with ``group_by: directory`` one observation per directory (see the module)."""
    if params.group_by != "directory":
        return found
    members: dict[str, dict[str, Observation]] = {}  # directory -> path -> its first observation
    for obs in found:
        if obs.path is not None:
            members.setdefault(posixpath.dirname(obs.path), {}).setdefault(obs.path, obs)
    groups = []
    for directory, by_path in members.items():
        observations = list(by_path.values())
        common = {
            key: value
            for key, value in observations[0].evidence.items()
            if key not in _PER_MEMBER and all(o.evidence.get(key, _MISSING) == value for o in observations)
        }
        names = sorted(posixpath.basename(path) for path in by_path)
        total = sum(_bytes_below(ctx, path) for path in by_path)
        listed = names[:GROUP_FILES_LISTED]
        evidence = {
            **common,
            "count": len(names),
            "count_text": f"{len(names):,}",
            "bytes": total,
            "bytes_text": human_size(total),
            "examples": names[:GROUP_EXAMPLES],
            "examples_text": ", ".join(names[:GROUP_EXAMPLES]),
            "files": listed,
            "files_omitted": len(names) - len(listed),
        }
        groups.append(Observation(directory, path=directory, evidence=evidence))
    return groups


@dataclass(frozen=True, kw_only=True)
class PresentParams(Grouped, Entries):
    min_size: Annotated[int | None, Param("only files of at least this many bytes", minimum=0)] = None


@register
class FilePresent(CheckKind[PresentParams]):
    name = "file.present"
    summary = (
        "Fires for each existing path that matches the globs (something that should not be in an image)."
    )
    parameters = PresentParams
    variables = {
        "path": "the matching image path (with group_by: the directory)",
        "type": "file type (with group_by: when all are of one type)",
        "size": "size in bytes (not with group_by: see bytes)",
        **_GROUP_VARIABLES,
    }

    def paths(self, params: PresentParams) -> list[PathNeed]:
        return declared(params, "tree" if params.group_by else "metadata")

    def evaluate(self, ctx: CheckContext, params: PresentParams) -> list[Observation]:
        min_size = params.min_size
        found = [
            Observation(st.path, path=st.path, evidence={"type": st.kind.value, "size": st.size})
            for st in _typed(ctx, params)
            if min_size is None or st.size >= min_size or st.kind is not FileKind.FILE
        ]
        return _grouped(ctx, params, found)


@register
class FileAbsent(CheckKind[Globs]):
    name = "file.absent"
    summary = "Fires for each glob that matches nothing (something an image must have)."
    parameters = Globs
    variables = {"pattern": "the glob that matched nothing"}

    def paths(self, params: Globs) -> list[PathNeed]:
        return declared(params, "metadata")

    def evaluate(self, ctx: CheckContext, params: Globs) -> list[Observation]:
        return [
            Observation(pattern, path=pattern, evidence={"pattern": pattern})
            for pattern in params.paths
            if not ctx.target.glob(pattern)
        ]


@dataclass(frozen=True, kw_only=True)
class LacksParams(Grouped, Regex, Files):
    pass


@dataclass(frozen=True, kw_only=True)
class ContainsParams(LacksParams):
    redact: Annotated[bool, Param("never show the matched text's value")] = False
    max_per_file: Annotated[int, Param("matches reported per file", minimum=1)] = 1


F = TypeVar("F", bound=Files)


class _ContentKind(CheckKind[F]):
    """A kind that reads the matching files' content: the collector gathers them with it."""

    def paths(self, params: F) -> list[PathNeed]:
        return declared(params, "content", "tree-content")


@register
class FileContains(_ContentKind[ContainsParams]):
    name = "file.contains"
    summary = (
        "Fires for each line of the matching files that matches the regex; not applicable if no file exists."
    )
    parameters = ContainsParams
    variables = {
        "path": "the file (with group_by: the directory)",
        "line": "line number of the match (none with group_by)",
        "excerpt": "the line (redacted if asked; with group_by: when all are the same)",
        **_GROUP_VARIABLES,
    }

    def validate(self, params: ContainsParams) -> None:
        params.validate()

    def evaluate(self, ctx: CheckContext, params: ContainsParams) -> list[Observation]:
        regex = params.compile()
        found = []
        for path in _existing_files(ctx, params):
            for match in regex.match_lines(ctx.read_text(path), where=path, limit=params.max_per_file):
                line_text = match.line.strip()
                excerpt = redact(line_text) if params.redact else line_text[:EXCERPT_MAX]
                found.append(Observation(path, path=path, line=match.number, evidence={"excerpt": excerpt}))
        return _grouped(ctx, params, found)


@register
class FileLacks(_ContentKind[LacksParams]):
    name = "file.lacks"
    summary = "Fires for each existing matching file where the regex matches nowhere; n/a if none exists."
    parameters = LacksParams
    variables = {"path": "the file (with group_by: the directory)", **_GROUP_VARIABLES}

    def validate(self, params: LacksParams) -> None:
        params.validate()

    def evaluate(self, ctx: CheckContext, params: LacksParams) -> list[Observation]:
        regex = params.compile()
        found = [
            Observation(path, path=path)
            for path in _existing_files(ctx, params)
            if regex.search(ctx.read_text(path), where=path) is None
        ]
        return _grouped(ctx, params, found)


@dataclass(frozen=True, kw_only=True)
class EmptyParams(Grouped, Files):
    whitespace_is_empty: Annotated[bool, Param("a file of only whitespace counts as empty")] = False


@register
class FileEmpty(_ContentKind[EmptyParams]):
    name = "file.empty"
    summary = "Fires for each existing matching file that is empty; not applicable if none exists."
    parameters = EmptyParams
    variables = {
        "path": "the file (with group_by: the directory)",
        "size": "size in bytes",
        **_GROUP_VARIABLES,
    }

    def evaluate(self, ctx: CheckContext, params: EmptyParams) -> list[Observation]:
        found = []
        for path in _existing_files(ctx, params):
            data = ctx.target.read_bytes(path)
            if not data or (params.whitespace_is_empty and not data.strip()):
                found.append(Observation(path, path=path, evidence={"size": len(data)}))
        return _grouped(ctx, params, found)


@dataclass(frozen=True, kw_only=True)
class PermissionsParams(Grouped, Entries):
    recursive: Annotated[bool, Param("also every entry below matched dirs")] = False
    mode_any: Annotated[
        str | None, Param("fire when any of these bits is set, e.g. '0002'", pattern=_OCTAL)
    ] = None
    unless_mode_any: Annotated[
        str | None, Param("but not when any of these is set, e.g. '1000' (sticky)", pattern=_OCTAL)
    ] = None
    mode_missing: Annotated[str | None, Param("fire when any of these bits is not set", pattern=_OCTAL)] = (
        None
    )
    owner: Annotated[str | int | None, Param("required owner (name from the image or uid)")] = None
    group: Annotated[str | int | None, Param("required group (name from the image or gid)")] = None


def _bits(octal: str | None) -> int:
    return int(octal, 8) if octal else 0


@register
class FilePermissions(CheckKind[PermissionsParams]):
    name = "file.permissions"
    summary = "Fires for each matching entry whose mode bits or ownership are not as required."
    parameters = PermissionsParams
    variables = {
        "path": "the entry (with group_by: the directory)",
        "mode": "its mode, octal",
        "uid": "owner uid",
        "gid": "group gid",
        "problem": "what is wrong (with group_by: when it is the same for all)",
        **_GROUP_VARIABLES,
    }

    def paths(self, params: PermissionsParams) -> list[PathNeed]:
        needs = declared(params, "tree" if params.recursive or params.group_by else "metadata")
        needs += [
            PathNeed(table)
            for account, table in ((params.owner, "/etc/passwd"), (params.group, "/etc/group"))
            if account is not None
        ]
        return needs

    def evaluate(self, ctx: CheckContext, params: PermissionsParams) -> list[Observation]:
        any_bits = _bits(params.mode_any)
        unless_bits = _bits(params.unless_mode_any)
        missing_bits = _bits(params.mode_missing)
        uid = _account_id(ctx, params.owner, "/etc/passwd") if params.owner is not None else None
        gid = _account_id(ctx, params.group, "/etc/group") if params.group is not None else None
        found = []
        types, symlink = params.types, FileKind.SYMLINK  # looked up once: the loop sees every entry walked
        for st in self._entries(ctx, params):
            if (types and st.kind not in types) or st.kind is symlink:
                continue
            problems = []
            if any_bits and st.mode & any_bits and not st.mode & unless_bits:
                problems.append(f"mode {st.mode:04o} has {st.mode & any_bits:04o} set")
            if missing_bits and (st.mode & missing_bits) != missing_bits:
                problems.append(f"mode {st.mode:04o} lacks {missing_bits & ~st.mode:04o}")
            if uid is not None and st.uid != uid:
                problems.append(f"owner uid {st.uid}, expected {uid}")
            if gid is not None and st.gid != gid:
                problems.append(f"group gid {st.gid}, expected {gid}")
            if problems:
                evidence = {
                    "mode": f"{st.mode:04o}",
                    "uid": st.uid,
                    "gid": st.gid,
                    "problem": "; ".join(problems),
                }
                found.append(Observation(st.path, path=st.path, evidence=evidence))
        return _grouped(ctx, params, found)

    @staticmethod
    def _entries(ctx: CheckContext, params: PermissionsParams) -> Iterator[ImageStat]:
        """The entries to judge, as they are walked: a walk is never held whole (up to 2,000,000
        entries, whose paths are long when a directory cycle makes the tree deep)."""
        tops = [st for st in (ctx.target.lstat(p) for p in _expand(ctx, params)) if st is not None]
        yield from tops
        if not params.recursive:
            return
        # A usr-merged image reaches /usr/bin as /bin too: walk each real directory once.
        walked: set[str] = set()
        for top in tops:
            top_st = ctx.target.stat(top.path)
            if top_st is None or top_st.kind is not FileKind.DIR:
                continue
            real = ctx.target.resolve(top.path)
            if any(real == w or real.startswith(w.rstrip("/") + "/") for w in walked):
                continue
            walked.add(real)
            if params.exclude:
                yield from (st for st in ctx.target.walk(real) if not _excluded(st.path, params))
            else:
                yield from ctx.target.walk(real)
