"""The service manager's view of unit names: which file a name loads, and which names share a unit.

This follows ``unit_file_build_name_map()``: the first entry named NAME in the search path wins;
a regular file is the unit's fragment; a link whose target lies in the search path is an alias to
the target's *name* (checked like systemd checks it: same type, same kind of name); a link leading
elsewhere is a linked unit file (or a mask, when it leads to ``/dev/null``) and points at that path.
An instance with no file of its own loads its template, and an alias of a template carries the
instance over (``autovt@tty2.service`` is ``getty@tty2.service``).
"""

from __future__ import annotations

from dataclasses import field

from imagelint.errors import ImageReadError
from imagelint.facts.systemd import names
from imagelint.facts.systemd.install import InstallError, validate_alias
from imagelint.facts.systemd.model import Problem
from imagelint.facts.systemd.paths import LookupPaths, basename, parent_of
from imagelint.facts.systemd.sources import ImageTree, join
from imagelint.records import dataclass
from imagelint.targets.rootfs import FileKind

FOLLOW_MAX = 8


def climbs_above_root(directory: str, dest: str) -> bool:
    """Whether a link target, taken literally, would leave the image root through ``..``."""
    parts = [] if dest.startswith("/") else [p for p in directory.split("/") if p]
    for part in dest.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return True
            parts.pop()
        else:
            parts.append(part)
    return False


@dataclass
class NameMap:
    ids: dict[str, str] = field(default_factory=dict)  # name -> alias target name or absolute path
    entry_paths: dict[str, str] = field(default_factory=dict)  # name -> the search-path entry that defines it
    problems: list[Problem] = field(default_factory=list)

    @classmethod
    def build(cls, tree: ImageTree, lookup: LookupPaths) -> NameMap:
        nm = cls()
        target = tree.target
        for directory in lookup.search_path:
            entries = tree.entries(directory)
            if not entries:
                continue
            for name in sorted(entries):
                kind = entries[name]
                if name in nm.ids or not names.is_valid(name):
                    continue
                path = join(directory, name)
                if kind is FileKind.SYMLINK:
                    try:
                        raw = target.readlink(path)
                    except ImageReadError as exc:
                        nm.problems.append(Problem(path, None, f"link not read: {exc.reason}"))
                        continue
                    dest = raw if raw.startswith("/") else join(parent_of(path), raw)
                    try:
                        simplified = target.resolve(dest, follow_last=False)
                    except ImageReadError as exc:
                        nm.problems.append(
                            Problem(path, None, f"link -> {raw} cannot be resolved: {exc.reason}")
                        )
                        continue
                    if climbs_above_root(parent_of(path), raw):
                        nm.problems.append(
                            Problem(
                                path,
                                None,
                                f"link -> {raw} climbs above the image root; "
                                f"resolved inside the image to {simplified}",
                            )
                        )
                    if lookup.in_search_path(simplified) is not None:
                        try:
                            validate_alias(path, simplified)
                        except InstallError as exc:
                            nm.problems.append(
                                Problem(path, None, f"alias link -> {raw} rejected: {exc.message}")
                            )
                            continue
                        dst = basename(simplified)
                        if dst == name:
                            continue  # a self-alias has no effect; a lower directory may define the name
                        nm.ids[name] = dst
                    else:
                        nm.ids[name] = simplified
                elif kind is FileKind.FILE:
                    nm.ids[name] = path
                else:
                    continue
                nm.entry_paths[name] = path
        return nm

    def resolve(self, name: str) -> tuple[str, str] | None:
        """(unit id, fragment path) that loading ``name`` gives, or None when no file defines it.

        Raises InstallError(ELOOP) on an alias cycle.
        """
        current = name
        for _ in range(FOLLOW_MAX):
            found = self.ids.get(current)
            if found is None:
                if names.name_kind(current) is not names.NameKind.INSTANCE:
                    return None
                template = names.template_of(current)
                found = self.ids.get(template) if template else None
                if found is None:
                    return None
                if not found.startswith("/") and names.name_kind(found) is names.NameKind.TEMPLATE:
                    found = names.replace_instance(found, names.instance_of(current) or "")
            if found.startswith("/"):
                return current, found
            current = found
        raise InstallError(
            "ELOOP", f"alias chain from {name} is longer than {FOLLOW_MAX} links (an alias cycle)"
        )

    def names_by_unit(self) -> tuple[dict[str, list[str]], dict[str, InstallError]]:
        """For every name in the map, the unit it loads; grouped as unit id -> all names (sorted)."""
        groups: dict[str, list[str]] = {}
        errors: dict[str, InstallError] = {}
        for name in self.ids:
            try:
                resolved = self.resolve(name)
            except InstallError as exc:
                errors[name] = exc
                continue
            if resolved is not None:
                groups.setdefault(resolved[0], []).append(name)
        for members in groups.values():
            members.sort()
        return groups, errors
