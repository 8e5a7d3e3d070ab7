"""Enablement state of unit files, in ``systemctl is-enabled`` vocabulary, following systemd's ``install.c``.

For one name this does what ``unit_file_lookup_state()`` does under ``--root``:

1. *discover*: find the first file named NAME in the search path (an instance falls back to its
   template); an empty file or a link to ``/dev/null`` is a mask; a link inside the search path
   is an alias and is followed by the target's name, a link outside it is a linked unit file and is
   followed by path; drop-ins ``NAME.d/*.conf`` (and the template's) add ``[Install]`` settings.
   Two systemd 252 quirks are kept because systemctl is the oracle: a link to the *same* name
   elsewhere in the search path (a "self-alias") cannot be looked up (``bad``), and a link to an
   empty file is followed and the mask reported where that file is (``masked``, even from /run);
2. *classify*: masked / masked-runtime; alias when NAME is not the file's own name; generated and
   transient by directory; then enabled / enabled-runtime / linked / linked-runtime when a link
   that ``systemctl enable`` would create (the name itself in a ``.wants``/``.requires``
   directory, an ``Alias=`` name, the ``DefaultInstance=``) or a same-name link exists
   (systemctl 252 does not look in ``.upholds`` directories, nor know ``UpheldBy=``);
   indirect when any other link leads to it or it only has ``Also=``; disabled when it has
   ``[Install]`` rules; static otherwise. Any failure on the way is ``bad``.

Links are scanned once per search directory and indexed, so a state costs dictionary look-ups.
"""

from __future__ import annotations

from dataclasses import field

from imagelint.errors import ImageReadError
from imagelint.facts.systemd import names
from imagelint.facts.systemd.model import ParsedFile, Problem
from imagelint.facts.systemd.parser import WordSyntaxError, split_words
from imagelint.facts.systemd.paths import PERSISTENT_CONFIG, LookupPaths, basename, parent_of, path_startswith
from imagelint.facts.systemd.sources import DirectoryTooLargeError, ImageTree, join
from imagelint.facts.systemd.specifiers import SpecifierError, expand
from imagelint.records import dataclass
from imagelint.targets.rootfs import FileKind

FOLLOW_MAX = 64
LINK_DIR_SUFFIXES = (".wants", ".requires", ".upholds")  # what the service manager follows
INSTALL_LINK_DIR_SUFFIXES = (".wants", ".requires")  # what systemctl 252 scans for enablement

REGULAR, MASKED, ALIAS, LINKED = "regular", "masked", "alias", "linked"


class InstallError(Exception):
    """Why a unit file could not be looked up (systemctl then reports the state ``bad``)."""

    def __init__(self, code: str, message: str, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.line = line

    def problem(self, name: str) -> Problem:
        if self.path is None:
            return Problem(name, None, self.message)
        return Problem(self.path, self.line, self.message)


@dataclass(slots=True)
class InstallInfo:
    name: str
    path: str | None = None
    mode: str | None = None
    symlink_target: str | None = None
    aliases: list[str] = field(default_factory=list)
    wanted_by: list[str] = field(default_factory=list)
    required_by: list[str] = field(default_factory=list)
    also: list[str] = field(default_factory=list)
    default_instance: str | None = None
    dropins: list[str] = field(default_factory=list)

    def has_rules(self) -> bool:
        return bool(self.aliases or self.wanted_by or self.required_by)


@dataclass(slots=True)
class _DirLinks:
    """The symlinks of one search directory, indexed for find_symlinks_in_directory()."""

    link_dir_names: set[str] = field(default_factory=set)  # link names inside *.wants/.requires/.upholds
    link_dir_by_template: dict[str, list[str]] = field(default_factory=dict)
    top_by_name: dict[str, str] = field(default_factory=dict)  # top-level link name -> target basename
    top_by_dest: dict[str, list[str]] = field(default_factory=dict)  # target basename -> link names


@dataclass(slots=True)
class Lookup:
    """The outcome of one state lookup."""

    name: str
    state: str
    info: InstallInfo | None
    error: InstallError | None = None


class InstallResolver:
    def __init__(self, tree: ImageTree, lookup: LookupPaths) -> None:
        self.tree = tree
        self.target = tree.target
        self.lookup = lookup
        self._links: dict[str, _DirLinks] = {}
        self._scope: list[tuple[str, _DirLinks | None]] | None = None  # see _linked_dirs

    # -- symlink scan --------------------------------------------------------------------------

    def _dir_links(self, directory: str) -> _DirLinks:
        cached = self._links.get(directory)
        if cached is not None:
            return cached
        links = _DirLinks()
        entries = self.tree.entries(directory) or {}
        for name, kind in entries.items():
            if kind is FileKind.DIR and name[name.rfind(".") :] in INSTALL_LINK_DIR_SUFFIXES:
                for sub, sub_kind in (self.tree.entries(join(directory, name)) or {}).items():
                    if sub_kind is not FileKind.SYMLINK:
                        continue
                    links.link_dir_names.add(sub)
                    template = names.template_of(sub)
                    if template is not None:
                        links.link_dir_by_template.setdefault(template, []).append(sub)
            elif kind is FileKind.SYMLINK:
                try:
                    dest = self.target.readlink(join(directory, name))
                except ImageReadError:
                    continue
                dest_base = basename(dest)
                links.top_by_name[name] = dest_base
                links.top_by_dest.setdefault(dest_base, []).append(name)
        self._links[directory] = links
        return links

    @staticmethod
    def _known_name(info: InstallInfo, link_name: str) -> bool:
        if link_name == info.name or link_name in info.aliases:
            return True
        if info.default_instance and names.name_kind(info.name) is names.NameKind.TEMPLATE:
            return link_name == names.replace_instance(info.name, info.default_instance)
        return False

    def _linked_dirs(self) -> list[tuple[str, _DirLinks | None]]:
        """Each search directory with its links, None for one without any (most of them)."""
        if self._scope is None:
            self._scope = []
            for directory in self.lookup.search_path:
                links = self._dir_links(directory)
                has_links = links.link_dir_names or links.top_by_name
                self._scope.append((directory, links if has_links else None))
        return self._scope

    def _find_symlinks(
        self, info: InstallInfo, match_name: bool, ignore_same_name: bool, links: _DirLinks
    ) -> tuple[bool, bool]:
        """(found, same_name_link) for one search directory."""
        candidates: list[str] = []
        if info.name in links.link_dir_names:
            candidates.append(info.name)
        candidates.extend(x for x in links.link_dir_by_template.get(info.name, ()) if x != info.name)
        for link_name in candidates:
            if not match_name or self._known_name(info, link_name):
                return True, False
        same_name = False
        top: list[str] = list(links.top_by_dest.get(info.name, ()))
        if not ignore_same_name and info.name in links.top_by_name and info.name not in top:
            top.append(info.name)
        for link_name in top:
            found_dest = links.top_by_name[link_name] == info.name
            found_path = not ignore_same_name and link_name == info.name
            if found_path and found_dest:
                same_name = True
            elif (found_path or found_dest) and (not match_name or self._known_name(info, link_name)):
                return True, same_name
        return False, same_name

    def _find_symlinks_in_scope(self, info: InstallInfo, match_name: bool) -> str | None:
        same_config = same_runtime = enabled_runtime = enabled_at_all = False
        ignore_same_name = False
        assert info.path is not None
        for directory, links in self._linked_dirs():
            if links is None:
                found = same_name = False
            else:
                found, same_name = self._find_symlinks(info, match_name, ignore_same_name, links)
            if found:
                if directory == PERSISTENT_CONFIG:
                    return "enabled"
                if LookupPaths.dir_is_runtime(directory):
                    enabled_runtime = True
                else:
                    enabled_at_all = True
            elif same_name:
                if directory == PERSISTENT_CONFIG:
                    same_config = True
                elif LookupPaths.dir_is_runtime(directory):
                    same_runtime = True
            if not ignore_same_name and path_startswith(info.path, directory) is not None:
                ignore_same_name = True
        if enabled_runtime:
            return "enabled-runtime"
        if enabled_at_all and names.name_kind(info.name) is names.NameKind.INSTANCE:
            return "static"
        if same_config:
            return "linked"
        if same_runtime:
            return "linked-runtime"
        return None

    # -- discovery -----------------------------------------------------------------------------

    def _load(self, ctx: dict[str, InstallInfo], info: InstallInfo, path: str, dropin: bool) -> None:
        """unit_file_load(): the main file (mode set) or a drop-in ([Install] settings added)."""
        if not dropin:
            _check_templatable(info.name)
            kind = self.tree.kind(path)
            if kind is None:
                raise InstallError("ENOENT", "no such file", path)
            if kind is FileKind.SYMLINK:
                raise InstallError("ELOOP", "is a symlink", path)
        else:
            try:
                kind = self.tree.kind_follow(path)
            except DirectoryTooLargeError:
                raise
            except ImageReadError as exc:
                raise InstallError("ELOOP", exc.reason, path) from None
            if kind is None:
                raise InstallError("ENOENT", "drop-in does not exist (dangling link)", path)
        if kind is FileKind.CHAR_DEVICE:
            if not dropin:
                info.mode = MASKED
            return
        if kind is not FileKind.FILE:
            raise InstallError("EISDIR" if kind is FileKind.DIR else "EBADFD", f"is a {kind}", path)
        parsed = self.tree.parse(path)
        if isinstance(parsed, Problem):
            raise InstallError("EIO", parsed.message, path)
        if parsed.size == 0:
            if not dropin:
                info.mode = MASKED
            return
        if parsed.fatal is not None:
            raise InstallError("EBADMSG", parsed.fatal.message, path, parsed.fatal.line)
        self._apply_install_section(ctx, info, parsed)
        if not dropin:
            info.mode = REGULAR
        else:
            info.dropins.append(path)

    def _apply_install_section(
        self, ctx: dict[str, InstallInfo], info: InstallInfo, parsed: ParsedFile
    ) -> None:
        utype = names.unit_type(info.name)
        for a in parsed.assignments:
            if a.section != "Install":
                continue
            key = a.key
            if key in ("Alias", "WantedBy", "RequiredBy"):  # systemd 252 has no UpheldBy= in [Install]
                if key == "Alias" and utype not in names.ALIAS_TYPES:
                    continue
                target = {"Alias": info.aliases, "WantedBy": info.wanted_by, "RequiredBy": info.required_by}[
                    key
                ]
                if not a.value:
                    target.clear()
                    continue
                try:
                    target.extend(split_words(a.value, unquote=True, retain_escape=True))
                except WordSyntaxError:
                    continue
            elif key == "DefaultInstance":
                kind = names.name_kind(info.name)
                if kind is not names.NameKind.TEMPLATE:
                    continue
                try:
                    value = expand(a.value, info.name)
                except SpecifierError as exc:
                    raise InstallError("EBADMSG", str(exc), a.path, a.line) from None
                if value and not names.instance_is_valid(value):
                    raise InstallError("EINVAL", f"invalid DefaultInstance={value!r}", a.path, a.line)
                info.default_instance = value or None
            elif key == "Also":
                try:
                    words = split_words(a.value, unquote=False, retain_escape=False)
                except WordSyntaxError as exc:
                    raise InstallError("EINVAL", str(exc), a.path, a.line) from None
                for word in words:
                    try:
                        printed = expand(word, info.name)
                    except SpecifierError as exc:
                        raise InstallError("EBADMSG", str(exc), a.path, a.line) from None
                    if not names.is_valid(printed):
                        raise InstallError(
                            "EINVAL", f"Also={printed!r} is not a valid unit name", a.path, a.line
                        )
                    ctx.setdefault(printed, InstallInfo(printed))
                    info.also.append(printed)

    def _resolve_link(self, path: str) -> tuple[str, bool]:
        """unit_file_resolve_symlink(): (destination, outside_search_path), validating aliases."""
        dest = self.target.readlink(path)
        if not dest.startswith("/"):
            dest = join(parent_of(path), dest)
        try:
            simplified = self.target.resolve(dest, follow_last=False)
        except ImageReadError as exc:
            raise InstallError("ELOOP", exc.reason, path) from None
        tail = self.lookup.in_search_path(simplified)
        if tail is None:
            return simplified, True
        validate_alias(path, simplified)
        if simplified == path:
            raise InstallError("ELOOP", "links to itself (a symlink loop)", path)
        if basename(simplified) == basename(path):
            raise InstallError(
                "ELOOP",
                f"links to {simplified}, a unit of the same name in the search path (a self-alias); "
                "systemctl 252 cannot look it up",
                path,
            )
        return simplified, False

    @staticmethod
    def _is_mask_link(target: str) -> bool:
        """Whether a unit link is a mask by its target alone.

        systemctl 252 recognises only a link to ``/dev/null`` here (its stat of the target under
        ``--root`` never succeeds); a link to an empty file is followed and the file found empty,
        so the mask is reported where that file is (``masked``, even for a link in ``/run``).
        """
        return target == "/dev/null"

    def _load_or_readlink(self, ctx: dict[str, InstallInfo], info: InstallInfo, path: str) -> str | None:
        """Load ``path`` as the unit's file, or read it as a link; returns the mode it gave ``info``."""
        try:
            self._load(ctx, info, path, dropin=False)
            return info.mode
        except InstallError as exc:
            if exc.code != "ELOOP" or self.tree.kind(path) is not FileKind.SYMLINK:
                raise
        target, outside = self._resolve_link(path)
        info.symlink_target = target
        if self._is_mask_link(target):
            info.mode = MASKED
        elif outside:
            info.mode = LINKED
        else:
            info.mode = ALIAS
        return info.mode

    def _search(self, ctx: dict[str, InstallInfo], info: InstallInfo) -> None:
        if info.mode is not None:
            return
        if info.path is not None:
            self._load_or_readlink(ctx, info, info.path)
            return
        template = (
            names.template_of(info.name) if names.name_kind(info.name) is names.NameKind.INSTANCE else None
        )
        found = False
        mode: str | None = None
        _check_templatable(info.name)  # what loading any candidate would raise first
        for candidate in [info.name] + ([template] if template else []):
            for directory in self.lookup.search_path:
                listing = self.tree.entries(directory)
                if listing is None or candidate not in listing:
                    continue  # loading it would raise ENOENT: skipped without building its path
                path = join(directory, candidate)
                try:
                    mode = self._load_or_readlink(ctx, info, path)
                except InstallError as exc:
                    if exc.code == "ENOENT":
                        continue
                    raise
                info.path = path
                found = True
                break
            if found:
                break
        if not found:
            also = f" or {template}" if template else ""
            raise InstallError("ENOENT", f"cannot find unit {info.name}{also}")
        if mode == MASKED:
            return
        dirs = [
            join(d, stem + ".d")
            for stem in ([info.name, template] if template else [info.name])
            for d in self.lookup.search_path
            if stem + ".d" in (self.tree.entries(d) or ())  # a NAME.d named nowhere has no listing
        ]
        for dropin in self._conf_files(dirs):
            self._load(ctx, info, dropin, dropin=True)

    def _conf_files(self, dirs: list[str]) -> list[str]:
        found: dict[str, str] = {}
        for directory in dirs:
            entries = self.tree.entries(directory)
            if not entries:
                continue
            for name, kind in entries.items():
                if name in found or name.startswith(".") or not name.endswith(".conf"):
                    continue
                if kind in (FileKind.FILE, FileKind.SYMLINK):
                    found[name] = join(directory, name)
        return [found[n] for n in sorted(found)]

    def _follow(self, ctx: dict[str, InstallInfo], info: InstallInfo, ignore_different_name: bool) -> bool:
        """install_info_follow(); False when the target has another name (the caller switches unit)."""
        assert info.symlink_target is not None
        if not ignore_different_name and basename(info.symlink_target) != info.name:
            return False
        info.path, info.symlink_target = info.symlink_target, None
        info.mode = None
        self._load_or_readlink(ctx, info, info.path)
        return True

    def traverse(self, ctx: dict[str, InstallInfo], start: InstallInfo) -> InstallInfo:
        self._search(ctx, start)
        info = start
        hops = 0
        seen: set[str | None] = set()
        while info.mode in (ALIAS, LINKED):
            hops += 1
            if hops > FOLLOW_MAX:
                why = (
                    "leads back to itself (a symlink loop or an alias cycle)"
                    if info.path in seen
                    else f"more than {FOLLOW_MAX} levels of links"
                )
                raise InstallError("ELOOP", why, info.path)
            seen.add(info.path)
            if self._follow(ctx, info, ignore_different_name=info.mode == LINKED):
                continue
            assert info.symlink_target is not None
            target_name = basename(info.symlink_target)
            if (
                names.name_kind(info.name) is names.NameKind.INSTANCE
                and names.name_kind(target_name) is names.NameKind.TEMPLATE
            ):
                filled = names.replace_instance(target_name, names.instance_of(info.name) or "")
                if filled == info.name:
                    self._follow(ctx, info, ignore_different_name=True)
                    continue
                target_name = filled
            if not names.is_valid(target_name):
                raise InstallError(
                    "EINVAL", f"alias target {target_name!r} is not a valid unit name", info.path
                )
            link_path = info.path
            info = ctx.setdefault(target_name, InstallInfo(target_name))
            try:
                self._search(ctx, info)
            except InstallError as exc:
                if exc.code == "ENOENT":
                    raise InstallError(
                        "ENOLINK", f"alias points to a missing unit {target_name}", link_path
                    ) from None
                raise
        return info

    def discover(self, name: str) -> InstallInfo:
        """install_info_discover() with SEARCH_LOAD | SEARCH_FOLLOW_CONFIG_SYMLINKS."""
        if not names.is_valid(name):
            raise InstallError("EINVAL", f"{name!r} is not a valid unit name")
        ctx: dict[str, InstallInfo] = {}
        start = ctx.setdefault(name, InstallInfo(name))
        try:
            return self.traverse(ctx, start)
        except DirectoryTooLargeError:
            raise
        except ImageReadError as exc:
            raise InstallError("EIO", exc.reason, exc.path) from None

    def state(self, name: str) -> Lookup:
        try:
            info = self.discover(name)
            return Lookup(name, self._classify(name, info), info)
        except InstallError as exc:
            return Lookup(name, "bad", None, exc)

    def _classify(self, name: str, info: InstallInfo) -> str:
        assert info.path is not None
        if info.mode == MASKED:
            return "masked-runtime" if LookupPaths.path_is_runtime(info.path) else "masked"
        if name != basename(info.path) and names.name_kind(info.name) is not names.NameKind.INSTANCE:
            return "alias"
        if LookupPaths.path_is_generated(info.path):
            return "generated"
        if LookupPaths.path_is_transient(info.path):
            return "transient"
        state = self._find_symlinks_in_scope(info, match_name=True)
        if state is not None:
            return state
        if self._find_symlinks_in_scope(info, match_name=False) is not None:
            return "indirect"
        if info.has_rules():
            return "disabled"
        if info.also:
            return "indirect"
        return "static"


def _check_templatable(name: str) -> None:
    """unit_file_load()'s first test: only some unit types may be templates or instances."""
    utype = names.unit_type(name)
    if names.name_kind(name) is not names.NameKind.PLAIN and utype not in names.TEMPLATE_TYPES:
        raise InstallError("EINVAL", f"unit type {utype} cannot be templated")


def validate_alias(source: str, dest: str) -> None:
    """unit_validate_alias_symlink_or_warn(): an alias link must keep type and name kind."""
    src, dst = basename(source), basename(dest)
    src_kind = names.name_kind(src)
    if src_kind is None:
        raise InstallError("EINVAL", f"{src!r} is not a valid unit name", source)
    src_type = names.unit_type(src)
    if src_type not in names.ALIAS_TYPES:
        raise InstallError("EINVAL", f"symlinks are not allowed for {src_type} units", source)
    if src_kind is not names.NameKind.PLAIN and src_type not in names.TEMPLATE_TYPES:
        raise InstallError("EINVAL", f"templates are not allowed for {src_type} units", source)
    dst_kind = names.name_kind(dst)
    if dst_kind is None:
        raise InstallError("EXDEV", f"points to {dst!r}, which is not a valid unit name", source)
    if not (
        dst_kind == src_kind or (src_kind is names.NameKind.INSTANCE and dst_kind is names.NameKind.TEMPLATE)
    ):
        raise InstallError("EXDEV", f"link target {dst!r} is not the same kind of name", source)
    if dst_kind is names.NameKind.INSTANCE and names.instance_of(src) != names.instance_of(dst):
        raise InstallError("EXDEV", f"link target {dst!r} has another instance", source)
    if names.unit_type(dst) != src_type:
        raise InstallError("EXDEV", f"link target {dst!r} has another unit type", source)
