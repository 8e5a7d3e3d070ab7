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
from typing import Any

from imagelint import textmatch
from imagelint.checks import register
from imagelint.checks.base import CheckContext, CheckKind, NotApplicable, Observation, ParamError, PathNeed
from imagelint.checks.params import flag, strings
from imagelint.errors import ImageReadError
from imagelint.facts.accounts import read_ids
from imagelint.targets import FileKind, ImageStat
from imagelint.targets.interface import human_size

_GLOBS = {"type": "array", "items": {"type": "string", "pattern": "^/"}, "minItems": 1}
_PATHS = {"paths": {**_GLOBS, "description": "absolute image paths; shell globs, ** for any depth"}}
_EXCLUDE = {"exclude": strings("globs of paths to leave out (* also matches /, so '*.pub' works anywhere)")}
_TYPES = {
    "types": {
        "type": "array",
        "items": {"enum": [k.value for k in FileKind]},
        "minItems": 1,
        "description": "only entries of these types (the path itself, links not followed); default any",
    }
}
_OCTAL = {"type": "string", "pattern": "^0?[0-7]{1,4}$"}
_REGEX = {
    "pattern": {
        "type": "string",
        "description": "Python regular expression, matched per line (multiline); linear-time RE2 runs it "
        "when it can, else Python's re under a time budget",
    },
    "ignore_case": flag(),
}
EXCERPT_MAX = 160
GROUP_EXAMPLES = 3  # names shown in a grouped finding's message
GROUP_FILES_LISTED = 1000  # names kept in a grouped finding's evidence; the rest are counted
_GROUP = {
    "group_by": {
        "enum": ["directory"],
        "description": "directory: one finding per directory of matches, not one per match, with the "
        "count, total size, examples and names as evidence; its path is the directory, so a waiver "
        "covers it when the waiver's path glob matches the directory",
    }
}
# what the tree-walking kinds (file.present, file.permissions) select entries by
_ENTRIES = {**_PATHS, **_EXCLUDE, **_TYPES, **_GROUP}
_GROUP_VARIABLES = {
    "count": "with group_by: matches in the directory",
    "count_text": "with group_by: the count with thousands separators",
    "bytes": "with group_by: their total size in bytes (a matched directory with the files below it)",
    "bytes_text": "with group_by: the total size, human readable",
    "examples_text": f"with group_by: the first {GROUP_EXAMPLES} names, sorted",
}
_PER_MEMBER = frozenset({"size"})  # evidence that describes one member, never kept for a group
_MISSING = object()


def _expand(ctx: CheckContext, params: dict[str, Any]) -> list[str]:
    """Image paths matched by ``paths`` less ``exclude``, in order, without duplicates."""
    excluded = params.get("exclude", [])
    seen: dict[str, None] = {}
    for pattern in params["paths"]:
        for path in ctx.target.glob(pattern):
            if not any(fnmatch.fnmatchcase(path, ex) for ex in excluded):
                seen.setdefault(path)
    return list(seen)


def declared(params: dict[str, Any], how: str, tree_how: str = "tree") -> list[PathNeed]:
    """``paths`` as collector needs: a glob with ``**`` becomes a tree below its fixed part."""
    needs = []
    for pattern in params["paths"]:
        parts = pattern.split("/")
        if "**" in parts:
            top = "/".join(parts[: parts.index("**")]) or "/"
            needs.append(PathNeed(top, tree_how if how == "content" else "tree"))
        else:
            needs.append(PathNeed(pattern, how))
    return needs


def _typed(ctx: CheckContext, params: dict[str, Any], default: tuple[str, ...] = ()) -> list[ImageStat]:
    wanted = set(params.get("types", default))
    found = []
    for path in _expand(ctx, params):
        st = ctx.target.lstat(path)
        if st is not None and (not wanted or st.kind.value in wanted):
            found.append(st)
    return found


def _compile(params: dict[str, Any]) -> textmatch.Pattern:
    """The rule's pattern, matched with a bounded engine (the image's files are adversarial input)."""
    return textmatch.compile(params["pattern"], multiline=True, ignore_case=bool(params.get("ignore_case")))


def _validate_regex(params: dict[str, Any]) -> None:
    try:
        _compile(params)
    except textmatch.PatternError as exc:
        raise ParamError(["pattern"], exc.message) from None


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


def _existing_files(ctx: CheckContext, params: dict[str, Any]) -> list[str]:
    """Matching paths that exist and are not directories (a FIFO stays in: reading it is an error)."""
    files = [
        p
        for p in _expand(ctx, params)
        if (st := ctx.target.stat(p)) is not None and st.kind is not FileKind.DIR
    ]
    if not files:
        raise NotApplicable(f"no file matches {', '.join(params['paths'])}")
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


def _grouped(ctx: CheckContext, params: dict[str, Any], found: list[Observation]) -> list[Observation]:
    """``found`` as it is, or with ``group_by: directory`` one observation per directory (see the module)."""
    if params.get("group_by") != "directory":
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


@register
class FilePresent(CheckKind):
    name = "file.present"
    summary = (
        "Fires for each existing path that matches the globs (something that should not be in an image)."
    )
    parameters = {
        **_ENTRIES,
        "min_size": {
            "type": "integer",
            "minimum": 0,
            "description": "only files of at least this many bytes",
        },
    }
    required = ("paths",)
    variables = {
        "path": "the matching image path (with group_by: the directory)",
        "type": "file type (with group_by: when all are of one type)",
        "size": "size in bytes (not with group_by: see bytes)",
        **_GROUP_VARIABLES,
    }

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        return declared(params, "tree" if params.get("group_by") else "metadata")

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        min_size = params.get("min_size", 0)
        found = [
            Observation(st.path, path=st.path, evidence={"type": st.kind.value, "size": st.size})
            for st in _typed(ctx, params)
            if st.size >= min_size or st.kind is not FileKind.FILE
        ]
        return _grouped(ctx, params, found)


@register
class FileAbsent(CheckKind):
    name = "file.absent"
    summary = "Fires for each glob that matches nothing (something an image must have)."
    parameters = {**_PATHS}
    required = ("paths",)
    variables = {"pattern": "the glob that matched nothing"}

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        return declared(params, "metadata")

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        return [
            Observation(pattern, path=pattern, evidence={"pattern": pattern})
            for pattern in params["paths"]
            if not ctx.target.glob(pattern)
        ]


@register
class FileContains(CheckKind):
    name = "file.contains"
    summary = (
        "Fires for each line of the matching files that matches the regex; not applicable if no file exists."
    )
    parameters = {
        **_PATHS,
        **_EXCLUDE,
        **_REGEX,
        **_GROUP,
        "redact": flag("never show the matched text's value"),
        "max_per_file": {
            "type": "integer",
            "minimum": 1,
            "default": 1,
            "description": "matches reported per file",
        },
    }
    required = ("paths", "pattern")
    variables = {
        "path": "the file (with group_by: the directory)",
        "line": "line number of the match (none with group_by)",
        "excerpt": "the line (redacted if asked; with group_by: when all are the same)",
        **_GROUP_VARIABLES,
    }

    def validate(self, params: dict[str, Any]) -> None:
        _validate_regex(params)

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        return declared(params, "content", "tree-content")

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        regex = _compile(params)
        limit = params.get("max_per_file", 1)
        found = []
        for path in _existing_files(ctx, params):
            for match in regex.match_lines(ctx.read_text(path), where=path, limit=limit):
                line_text = match.line.strip()
                excerpt = redact(line_text) if params.get("redact") else line_text[:EXCERPT_MAX]
                found.append(Observation(path, path=path, line=match.number, evidence={"excerpt": excerpt}))
        return _grouped(ctx, params, found)


@register
class FileLacks(CheckKind):
    name = "file.lacks"
    summary = "Fires for each existing matching file where the regex matches nowhere; n/a if none exists."
    parameters = {**_PATHS, **_EXCLUDE, **_REGEX, **_GROUP}
    required = ("paths", "pattern")
    variables = {"path": "the file (with group_by: the directory)", **_GROUP_VARIABLES}

    def validate(self, params: dict[str, Any]) -> None:
        _validate_regex(params)

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        return declared(params, "content", "tree-content")

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        regex = _compile(params)
        found = [
            Observation(path, path=path)
            for path in _existing_files(ctx, params)
            if regex.search(ctx.read_text(path), where=path) is None
        ]
        return _grouped(ctx, params, found)


@register
class FileEmpty(CheckKind):
    name = "file.empty"
    summary = "Fires for each existing matching file that is empty; not applicable if none exists."
    parameters = {
        **_PATHS,
        **_EXCLUDE,
        **_GROUP,
        "whitespace_is_empty": flag(),
    }
    required = ("paths",)
    variables = {
        "path": "the file (with group_by: the directory)",
        "size": "size in bytes",
        **_GROUP_VARIABLES,
    }

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        return declared(params, "content", "tree-content")

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        found = []
        for path in _existing_files(ctx, params):
            data = ctx.target.read_bytes(path)
            if not data or (params.get("whitespace_is_empty") and not data.strip()):
                found.append(Observation(path, path=path, evidence={"size": len(data)}))
        return _grouped(ctx, params, found)


@register
class FilePermissions(CheckKind):
    name = "file.permissions"
    summary = "Fires for each matching entry whose mode bits or ownership are not as required."
    parameters = {
        **_ENTRIES,
        "recursive": flag("also every entry below matched dirs"),
        "mode_any": {**_OCTAL, "description": "fire when any of these bits is set, e.g. '0002'"},
        "unless_mode_any": {
            **_OCTAL,
            "description": "but not when any of these is set, e.g. '1000' (sticky)",
        },
        "mode_missing": {**_OCTAL, "description": "fire when any of these bits is not set"},
        "owner": {
            "type": ["string", "integer"],
            "description": "required owner (name from the image or uid)",
        },
        "group": {
            "type": ["string", "integer"],
            "description": "required group (name from the image or gid)",
        },
    }
    required = ("paths",)
    variables = {
        "path": "the entry (with group_by: the directory)",
        "mode": "its mode, octal",
        "uid": "owner uid",
        "gid": "group gid",
        "problem": "what is wrong (with group_by: when it is the same for all)",
        **_GROUP_VARIABLES,
    }

    def paths(self, params: dict[str, Any]) -> list[PathNeed]:
        needs = declared(params, "tree" if params.get("recursive") or params.get("group_by") else "metadata")
        needs += [
            PathNeed(table)
            for key, table in (("owner", "/etc/passwd"), ("group", "/etc/group"))
            if key in params
        ]
        return needs

    def evaluate(self, ctx: CheckContext, params: dict[str, Any]) -> list[Observation]:
        any_bits = int(params.get("mode_any", "0"), 8)
        unless_bits = int(params.get("unless_mode_any", "0"), 8)
        missing_bits = int(params.get("mode_missing", "0"), 8)
        uid = _account_id(ctx, params["owner"], "/etc/passwd") if "owner" in params else None
        gid = _account_id(ctx, params["group"], "/etc/group") if "group" in params else None
        wanted = set(params.get("types", ()))
        found = []
        for st in self._entries(ctx, params):
            if (wanted and st.kind.value not in wanted) or st.kind is FileKind.SYMLINK:
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
    def _entries(ctx: CheckContext, params: dict[str, Any]) -> list[ImageStat]:
        tops = [st for st in (ctx.target.lstat(p) for p in _expand(ctx, params)) if st is not None]
        if not params.get("recursive"):
            return tops
        excluded = params.get("exclude", [])
        # A usr-merged image reaches /usr/bin as /bin too: walk each real directory once.
        walked: set[str] = set()
        entries = list(tops)
        for top in tops:
            top_st = ctx.target.stat(top.path)
            if top_st is None or top_st.kind is not FileKind.DIR:
                continue
            real = ctx.target.resolve(top.path)
            if any(real == w or real.startswith(w.rstrip("/") + "/") for w in walked):
                continue
            walked.add(real)
            entries.extend(
                st
                for st in ctx.target.walk(real)
                if not any(fnmatch.fnmatchcase(st.path, ex) for ex in excluded)
            )
        return entries
