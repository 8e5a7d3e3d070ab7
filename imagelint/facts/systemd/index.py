"""The unit index: every unit of an image with its state, preset, files, merged settings and boot chain.

``UnitIndex.build(target)`` reads the image once: the search directories are listed, every unit
file and drop-in is parsed once, enablement comes from :mod:`.install`, presets from
:mod:`.presets`, the manager's name map from :mod:`.namemap`, and boot chains from :mod:`.boot`.
Nothing here raises on bad image content: it becomes an entry of ``index.problems``.

Which names are indexed: every name ``systemctl list-unit-files`` lists (valid unit names that are
files or links in a search directory, first directory wins), every name found in a ``.wants/``,
``.requires/`` or ``.upholds/`` directory that loads a unit (for instance ``getty@tty1.service``),
and every unit reached at boot.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import field
from typing import Any

from imagelint.errors import ImageReadError
from imagelint.facts.systemd import names
from imagelint.facts.systemd.boot import ASSUMED_DEFAULT, DEFAULT_TARGET, STOCK_TARGET_DEPS, boot_chains
from imagelint.facts.systemd.install import LINK_DIR_SUFFIXES, InstallError, InstallResolver
from imagelint.facts.systemd.model import Assignment, ParsedFile, Problem
from imagelint.facts.systemd.namemap import NameMap
from imagelint.facts.systemd.parser import WordSyntaxError, split_words
from imagelint.facts.systemd.paths import LookupPaths
from imagelint.facts.systemd.presets import Presets
from imagelint.facts.systemd.sources import DirectoryTooLargeError, ImageTree, join
from imagelint.facts.systemd.specifiers import SpecifierError, expand
from imagelint.records import dataclass
from imagelint.targets.interface import FileKind, Target

PULL_KEYS = ("Wants", "Requires", "BindsTo", "Upholds")
# systemctl list-unit-files prints "-" as the preset of these states (no [Install] to apply a preset to)
NO_PRESET_STATES = frozenset({"alias", "static", "generated", "transient"})
TRIGGER_KEYS = {"socket": ("Socket", "Service"), "timer": ("Timer", "Unit"), "path": ("Path", "Unit")}


@dataclass(slots=True)
class LoadedUnit:
    """One unit as the service manager would load it: fragment, drop-ins, merged assignments.

    The assignments are read from the files again when first asked for, then kept: an index of
    many units holds only those of the units walked at boot and of those a rule looked at.
    """

    unit_id: str
    names: tuple[str, ...]
    fragment: str | None
    # "loaded"; "masked" (empty or /dev/null); "not-found" (a link to a missing file); "error"
    # (systemd refuses the file: bad section header, unclean UTF-8, over-long line; what came
    # before is kept); "unread" (imagelint could not read it: over the read cap, a loop...)
    status: str = "loaded"
    dropins: tuple[str, ...] = ()  # those that add assignments, in order
    source: ImageTree | None = field(default=None, repr=False, compare=False)
    _assignments: list[Assignment] | None = field(default=None, repr=False, compare=False)

    @property
    def assignments(self) -> list[Assignment]:
        """The fragment's assignments (when it was read), then each drop-in's, in file order."""
        if self._assignments is None:
            self._assignments = self._read_assignments()
        return self._assignments

    def _read_assignments(self) -> list[Assignment]:
        if self.source is None:
            return []
        files = list(self.dropins)
        if self.fragment is not None and self.status in ("loaded", "error"):
            files.insert(0, self.fragment)
        found: list[Assignment] = []
        for path in files:
            parsed = self.source.parse(path)
            if isinstance(parsed, ParsedFile):
                found.extend(parsed.assignments)
        return found

    @property
    def masked(self) -> bool:
        return self.status == "masked"

    @property
    def starts(self) -> bool:
        """Whether a start job for it can run at all (it may still fail): not masked, not missing."""
        return self.status not in ("masked", "not-found")


@dataclass(slots=True)
class Unit:
    """One unit name of the image, in the vocabulary of ``systemctl list-unit-files``."""

    name: str
    state: str
    preset: str
    path: str | None  # the search-path entry of this name (what list-unit-files lists), if any
    unit_id: str | None  # the unit this name loads (differs from ``name`` for an alias)
    fragment: str | None
    dropins: tuple[str, ...]
    aliases: tuple[str, ...]  # the other names of the same unit
    masked: bool
    boot_chain: list[str] | None = None
    loaded: LoadedUnit | None = field(default=None, repr=False)

    @property
    def assignments(self) -> list[Assignment]:
        return [] if self.loaded is None else self.loaded.assignments

    def get(self, section: str, key: str) -> list[Assignment]:
        """The effective assignments of ``key``: those after its last empty (resetting) assignment.

        For list-valued settings this is the list; for single-valued ones the last item wins.
        """
        return effective(self.assignments, section, key)

    def get_value(self, section: str, key: str) -> str | None:
        return _last_value(effective(self.assignments, section, key))

    @property
    def boot_reachable(self) -> bool:
        return self.boot_chain is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "preset": self.preset,
            "path": self.path,
            "unit": self.unit_id,
            "fragment": self.fragment,
            "dropins": list(self.dropins),
            "aliases": list(self.aliases),
            "masked": self.masked,
            "load": self.loaded.status if self.loaded else None,
            "boot_chain": self.boot_chain,
        }


@dataclass
class UnitIndex:
    units: dict[str, Unit]
    problems: list[Problem]
    search_path: tuple[str, ...]
    default_target: str | None
    presets: Presets
    # no default.target in the tree: default.target is taken to be multi-user.target (see .boot)
    default_target_assumed: bool = False
    _builder: _Builder | None = field(default=None, repr=False, compare=False)

    def __getitem__(self, name: str) -> Unit:
        return self.units[name]

    def get(self, name: str) -> Unit | None:
        return self.units.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.units

    def __iter__(self) -> Iterator[Unit]:
        return iter(self.units.values())

    def load(self, name: str) -> Unit | None:
        """The unit for any name, indexed or not (an instance nothing links to, say); None if no file
        defines it. Loading a name not indexed yet adds it to the index (its boot chain stays None:
        nothing reachable at boot pulls it in, or it would be indexed already)."""
        unit = self.units.get(name)
        if unit is not None or self._builder is None:
            return unit
        unit = self._builder.unit_for(name, self.presets)
        if unit is not None:
            self.units[name] = unit
            self.problems = _dedupe([*self.problems, *self._builder.problems])
        return unit

    def triggers(self, unit: Unit) -> list[str]:
        """The names ``unit`` activates when it is a socket, timer, path or automount unit (as the
        boot walk follows them); [] otherwise or when it is not loaded."""
        if self._builder is None or unit.loaded is None or unit.unit_id is None:
            return []
        return self._builder.triggered(unit.unit_id, unit.loaded.assignments)

    def boot_units(self) -> list[Unit]:
        return [u for u in self.units.values() if u.boot_chain is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "search_path": list(self.search_path),
            "default_target": self.default_target,
            "default_target_assumed": self.default_target_assumed,
            "units": [self.units[n].to_dict() for n in sorted(self.units)],
            "problems": [p.to_dict() for p in self.problems],
        }

    @classmethod
    def build(cls, target: Target) -> UnitIndex:
        return _Builder(target).build()


# Each unit indexed costs ~6 KiB; a large real image has ~2,000 (unit files, aliases and instances
# that .wants/ links name). Past this many, the index would outgrow the run's memory: not judged.
MAX_UNITS = 10_000


class TooManyUnitsError(ImageReadError):
    """An image naming more units than imagelint indexes (the run is inconclusive)."""


class _Builder:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.tree = ImageTree(target)
        self.lookup = LookupPaths.for_target(target)
        self.resolver = InstallResolver(self.tree, self.lookup)
        self.problems: list[Problem] = []
        self.loaded: dict[str, LoadedUnit | None] = {}
        self.partial = False  # no default.target at all: walk as on a stock base (see .boot)
        self.stubs: set[str] = set()  # targets of a partial tree that no unit file defines
        self._suffixed: dict[str, frozenset[str]] = {}  # see _names_ending

    def build(self) -> UnitIndex:
        presets = Presets.load(self.target)
        self.problems.extend(presets.problems)
        self.namemap = NameMap.build(self.tree, self.lookup)
        self.problems.extend(self.namemap.problems)
        self.groups, alias_errors = self.namemap.names_by_unit()
        for unit_id in [u for u, group in self.groups.items() if group == [u]]:
            del self.groups[unit_id]  # a unit known by its own name only (most of them): implied
        for name, exc in alias_errors.items():
            self.problems.append(
                exc.problem(name) if exc.path else Problem(self.namemap.entry_paths[name], None, exc.message)
            )

        listed: dict[str, str] = {}
        for directory in self.lookup.search_path:
            for name, kind in sorted((self.tree.entries(directory) or {}).items()):
                if name not in listed and names.is_valid(name) and kind in (FileKind.FILE, FileKind.SYMLINK):
                    path = join(directory, name)
                    same = self.namemap.entry_paths.get(name)
                    listed[name] = same if same == path else path  # one string for both, if equal
            _check_unit_count(len(listed), directory)
        wanted = self._link_dir_names()
        _check_unit_count(len(listed) + len(wanted - listed.keys()), "/")

        units: dict[str, Unit] = {}
        for name in [*listed, *sorted(n for n in wanted if n not in listed)]:
            unit = self._unit(name, listed.get(name), presets)
            if unit is not None:
                units[name] = unit

        self.partial = bool(listed or wanted) and self._no_default_target()
        chains = boot_chains(
            self._resolve_loadable, self._deps, assumed_default=ASSUMED_DEFAULT if self.partial else None
        )
        for unit_id in chains:
            if unit_id not in units and unit_id not in self.stubs:
                unit = self._unit(unit_id, None, presets)
                if unit is None:
                    continue
                units[unit_id] = unit
        for unit in units.values():
            if unit.unit_id is not None and unit.unit_id in chains:
                unit.boot_chain = list(chains[unit.unit_id])
        self.problems.extend(self.tree.problems)
        default = self._resolve_loadable(DEFAULT_TARGET)
        assumed = default is None and self.partial
        return UnitIndex(
            units,
            _dedupe(self.problems),
            self.lookup.search_path,
            ASSUMED_DEFAULT if assumed else default,
            presets,
            default_target_assumed=assumed,
            _builder=self,
        )

    def _no_default_target(self) -> bool:
        try:
            return self.namemap.resolve(DEFAULT_TARGET) is None
        except InstallError:
            return False

    def unit_for(self, name: str, presets: Presets) -> Unit | None:
        if not names.is_valid(name):
            return None
        try:
            if self.namemap.resolve(name) is None:
                return None
        except InstallError:
            return None
        return self._unit(name, None, presets)

    # -- names ----------------------------------------------------------------------------------

    def _link_dir_names(self) -> set[str]:
        found: set[str] = set()
        for directory in self.lookup.search_path:
            for name, kind in (self.tree.entries(directory) or {}).items():
                if kind is not FileKind.DIR or name[name.rfind(".") :] not in LINK_DIR_SUFFIXES:
                    continue
                sub = join(directory, name)
                for entry in self.tree.entries(sub) or {}:
                    if not names.is_valid(entry) or names.name_kind(entry) is names.NameKind.TEMPLATE:
                        continue
                    try:
                        resolved = self.namemap.resolve(entry)
                    except InstallError:
                        resolved = None
                    if resolved is None:
                        self.problems.append(
                            Problem(join(sub, entry), None, f"links to {entry}, which no unit file defines")
                        )
                        continue
                    found.add(entry)
        return found

    def _unit(self, name: str, path: str | None, presets: Presets) -> Unit | None:
        lookup = self.resolver.state(name)
        if lookup.error is not None:
            self.problems.append(lookup.error.problem(name))
        try:
            resolved = self.namemap.resolve(name)
        except InstallError as exc:
            resolved = None
            self.problems.append(Problem(path or name, None, exc.message))
        loaded = self._load(resolved[0], resolved[1]) if resolved is not None else None
        unit_id = resolved[0] if resolved is not None else None
        aliases: tuple[str, ...] = ()
        if loaded is not None:
            aliases = tuple(n for n in loaded.names if n != name)
        return Unit(
            name=name,
            state=lookup.state,
            preset="-" if lookup.state in NO_PRESET_STATES else presets.verdict(name),
            path=path,
            unit_id=unit_id,
            fragment=loaded.fragment if loaded else None,
            dropins=loaded.dropins if loaded else (),
            aliases=aliases,
            masked=loaded.masked if loaded else lookup.state in ("masked", "masked-runtime"),
            loaded=loaded,
        )

    def _unit_names(self, unit_id: str) -> tuple[str, ...]:
        found = set(self.groups.get(unit_id, ()))
        found.add(unit_id)
        if names.name_kind(unit_id) is names.NameKind.INSTANCE:
            template = names.template_of(unit_id)
            instance = names.instance_of(unit_id) or ""
            assert template is not None
            for alias in self.groups.get(template, ()):
                if names.name_kind(alias) is names.NameKind.TEMPLATE:
                    found.add(names.replace_instance(alias, instance))
        return tuple(sorted(found, key=lambda n: (n != unit_id, n)))

    # -- loading --------------------------------------------------------------------------------

    def _load(self, unit_id: str, fragment: str) -> LoadedUnit | None:
        if unit_id in self.loaded:
            return self.loaded[unit_id]
        unit_names = self._unit_names(unit_id)
        loaded = LoadedUnit(unit_id, unit_names, fragment, source=self.tree)
        status = self._merge(loaded, fragment, main=True)
        if status == "masked":
            loaded.status = "masked"
        elif status == "missing":
            self.problems.append(
                Problem(fragment, None, f"{unit_id}: unit file does not exist (dangling link)")
            )
            loaded.status = "not-found"
        else:
            for dropin in self._find_files(unit_names, ".d", ".conf"):
                self._merge(loaded, dropin, main=False)
        self.loaded[unit_id] = loaded
        return loaded

    def _merge(self, loaded: LoadedUnit, path: str, *, main: bool) -> str:
        """Add one file's assignments: "ok", "masked" (empty or /dev/null), "missing" or "error"."""
        if path == "/dev/null":
            return "masked"
        try:
            kind = self.tree.kind_follow(path)
        except DirectoryTooLargeError:
            raise
        except ImageReadError as exc:
            self.problems.append(Problem(path, None, f"not read: {exc.reason}"))
            kind = FileKind.OTHER
        if kind is None:
            if not main:
                self.problems.append(Problem(path, None, "drop-in is a dangling link; ignored"))
            return "missing"
        if kind is FileKind.CHAR_DEVICE:
            return "masked"  # a /dev/null drop-in hides same-named lower ones and adds nothing
        parsed = (
            self.tree.parse(path) if kind is FileKind.FILE else Problem(path, None, f"is a {kind}; not read")
        )
        if isinstance(parsed, Problem):
            self.problems.append(parsed)
            if main:
                loaded.status = "unread"
            return "error"
        if parsed.size == 0:
            return "masked"
        if not main:
            loaded.dropins = (*loaded.dropins, path)
        self._record_parse(parsed)
        if parsed.fatal is not None:
            loaded.status = "error"
        return "ok"

    def _record_parse(self, parsed: ParsedFile) -> None:
        self.problems.extend(parsed.warnings)
        if parsed.fatal is not None:
            self.problems.append(parsed.fatal)

    def _names_ending(self, suffix: str) -> frozenset[str]:
        """The entry names ending in ``suffix`` (``.d``, ``.wants``...) of all search directories: a
        NAME.d looked for but named nowhere costs one set look-up instead of one per directory."""
        found = self._suffixed.get(suffix)
        if found is None:
            found = frozenset(
                name
                for directory in self.lookup.search_path
                for name in self.tree.entries(directory) or ()
                if name.endswith(suffix)
            )
            self._suffixed[suffix] = found
        return found

    def _find_dirs(self, unit_names: Sequence[str], suffix: str) -> list[str]:
        """unit_file_find_dirs() for every name in every search directory: NAME.d, then the
        template's, then the dash prefixes'; then the unit type's (``service.d``)."""
        anywhere = self._names_ending(suffix)
        wanted = [
            (stem + suffix, own)
            for name in unit_names
            for stem, own in names.dropin_stems(name)
            if stem + suffix in anywhere
        ]
        type_dir = names.unit_type(unit_names[0]) + suffix
        dirs: list[str] = []
        if not wanted and type_dir not in anywhere:
            return dirs
        listings = [(d, self.tree.entries(d)) for d in self.lookup.search_path]
        for directory, listing in listings:
            if not listing:
                continue
            for entry, own in wanted:
                kind = listing.get(entry)
                if kind is None:
                    continue
                path = join(directory, entry)
                if kind is FileKind.DIR or (own and kind is FileKind.SYMLINK and self._is_dir(path)):
                    dirs.append(path)
                elif own:
                    why = f"expected a directory of {suffix} entries, found a {kind}; ignored"
                    self.problems.append(Problem(path, None, why))
        for directory, listing in listings:
            if listing and listing.get(type_dir) is FileKind.DIR:
                dirs.append(join(directory, type_dir))
        return dirs

    def _is_dir(self, path: str) -> bool:
        try:
            st = self.target.stat(path)
        except ImageReadError as exc:
            self.problems.append(Problem(path, None, f"not read: {exc.reason}"))
            return False
        return st is not None and st.kind is FileKind.DIR

    def _find_files(self, unit_names: Sequence[str], dir_suffix: str, file_suffix: str | None) -> list[str]:
        found: dict[str, str] = {}
        for d in dict.fromkeys(self._find_dirs(unit_names, dir_suffix)):
            for entry, kind in (self.tree.entries(d) or {}).items():
                if entry in found or entry.startswith("."):
                    continue
                if file_suffix is not None and not entry.endswith(file_suffix):
                    continue
                if kind in (FileKind.FILE, FileKind.SYMLINK):
                    found[entry] = join(d, entry)
        return [found[n] for n in sorted(found)]

    # -- boot -----------------------------------------------------------------------------------

    def _resolve_loadable(self, name: str) -> str | None:
        try:
            resolved = self.namemap.resolve(name)
        except InstallError:
            return None
        if resolved is None:
            if self.partial and name != DEFAULT_TARGET and names.is_valid(name) and name.endswith(".target"):
                self.stubs.add(name)
                return name
            return None
        loaded = self._load(*resolved)
        if loaded is None or not loaded.starts:
            return None
        return resolved[0]

    def _deps(self, unit_id: str) -> list[str]:
        if unit_id in self.stubs:
            linked = [
                entry.rsplit("/", 1)[-1]
                for suffix in LINK_DIR_SUFFIXES
                for entry in self._find_files((unit_id,), suffix, None)
            ]
            return [*STOCK_TARGET_DEPS.get(unit_id, ()), *linked]
        loaded = self.loaded.get(unit_id)
        if loaded is None:
            return []
        out: list[str] = []
        instance = names.instance_of(unit_id)
        assignments = loaded.assignments
        for key in PULL_KEYS:
            for a in effective(assignments, "Unit", key):
                out.extend(self._dep_words(a, unit_id))
        for suffix in LINK_DIR_SUFFIXES:
            for entry in self._find_files(loaded.names, suffix, None):
                dep = entry.rsplit("/", 1)[-1]
                if names.name_kind(dep) is names.NameKind.TEMPLATE:
                    if not instance:
                        continue
                    dep = names.replace_instance(dep, instance)
                out.append(dep)
        out.extend(self.triggered(unit_id, assignments))
        return out

    def triggered(self, unit_id: str, assignments: list[Assignment]) -> list[str]:
        """What a socket, timer, path or automount unit activates (``Service=``/``Unit=``, else the
        unit of the same name; nothing for an ``Accept=yes`` socket's template); [] for other types."""
        utype = names.unit_type(unit_id)
        trigger = TRIGGER_KEYS.get(utype)
        if trigger is not None:
            explicit = effective(assignments, *trigger)
            if explicit:
                return self._dep_words(explicit[-1], unit_id)
            accept = _last_value(effective(assignments, "Socket", "Accept"))
            if not (utype == "socket" and _truthy(accept)):
                return [unit_id[: unit_id.rfind(".")] + ".service"]
        elif utype == "automount":
            return [unit_id[: unit_id.rfind(".")] + ".mount"]
        return []

    def _dep_words(self, a: Assignment, unit_id: str) -> list[str]:
        try:
            words = split_words(a.value, unquote=True, retain_escape=True)
        except WordSyntaxError as exc:
            self.problems.append(Problem(a.path, a.line, f"{a.key}=: {exc}"))
            return []
        out: list[str] = []
        for word in words:
            try:
                out.append(expand(word, unit_id))
            except SpecifierError as exc:
                self.problems.append(Problem(a.path, a.line, f"{a.key}=: {exc}"))
        return out


def effective(assignments: list[Assignment], section: str, key: str) -> list[Assignment]:
    """The assignments of ``key`` in ``section`` after its last empty (resetting) one, in order."""
    found: list[Assignment] = []
    for a in assignments:
        if a.key == key and a.section == section:
            if a.value == "":
                found.clear()
            else:
                found.append(a)
    return found


def _last_value(found: list[Assignment]) -> str | None:
    return found[-1].value if found else None


def _check_unit_count(count: int, where: str) -> None:
    if count > MAX_UNITS:
        raise TooManyUnitsError(
            where, f"more than {MAX_UNITS:,} units in the image: too many to index; not judged"
        )


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "yes", "y", "true", "t", "on")


def _dedupe(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
