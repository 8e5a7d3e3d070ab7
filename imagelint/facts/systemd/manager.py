"""The service manager's defaults from the image's ``system.conf``: start limit and restart delay.

systemd 252 reads ``/etc/systemd/system.conf`` and then the ``*.conf`` drop-ins of
``system.conf.d`` in ``/etc``, ``/run``, ``/usr/local/lib``, ``/usr/lib`` and ``/lib`` (an earlier
directory's file hides the same name in later ones; all in file-name order); the last assignment
in ``[Manager]`` wins. Built-in defaults when nothing is set: ``DefaultStartLimitIntervalSec=10s``,
``DefaultStartLimitBurst=5``, ``DefaultRestartSec=100ms``. The kernel command line can override
them on a running host; offline that is unknown and ignored.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, NamedTuple

from imagelint.errors import ImageReadError
from imagelint.facts.systemd.model import Problem
from imagelint.facts.systemd.parser import parse_unit_bytes
from imagelint.facts.systemd.sources import conf_files
from imagelint.facts.systemd.timespan import parse_timespan
from imagelint.records import dataclass
from imagelint.targets.interface import Target

MAIN = "/etc/systemd/system.conf"
DROPIN_DIRS = (
    "/etc/systemd/system.conf.d",
    "/run/systemd/system.conf.d",
    "/usr/local/lib/systemd/system.conf.d",
    "/usr/lib/systemd/system.conf.d",
    "/lib/systemd/system.conf.d",
)
BUILTIN = "systemd 252 built-in default"


class Setting(NamedTuple):
    """One effective value and where it comes from (``path`` is BUILTIN for a compiled-in default)."""

    value: float
    text: str
    path: str
    line: int | None

    @property
    def source(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


@dataclass
class ManagerDefaults:
    start_limit_interval: Setting = field(default_factory=lambda: Setting(10.0, "10s", BUILTIN, None))
    start_limit_burst: Setting = field(default_factory=lambda: Setting(5, "5", BUILTIN, None))
    restart_sec: Setting = field(default_factory=lambda: Setting(0.1, "100ms", BUILTIN, None))
    files: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "DefaultStartLimitIntervalSec": self.start_limit_interval.text,
            "DefaultStartLimitBurst": self.start_limit_burst.text,
            "DefaultRestartSec": self.restart_sec.text,
        }

    @classmethod
    def load(cls, target: Target) -> ManagerDefaults:
        defaults = cls()
        dropins, problems = conf_files(target, DROPIN_DIRS, ".conf")
        defaults.problems.extend(problems)
        for path in [MAIN, *dropins]:
            try:
                if target.stat(path) is None:
                    continue
                data = target.read_bytes(path)
            except ImageReadError as exc:
                defaults.problems.append(Problem(path, None, f"not read: {exc.reason}"))
                continue
            defaults.files.append(path)
            parsed = parse_unit_bytes(data, path)
            defaults.problems.extend(parsed.warnings)
            if parsed.fatal:
                defaults.problems.append(parsed.fatal)
            for a in parsed.assignments:
                if a.section != "Manager":
                    continue
                defaults._apply(a.key, a.value, a.path, a.line)
        return defaults

    def _apply(self, key: str, value: str, path: str, line: int) -> None:
        try:
            if key in ("DefaultStartLimitIntervalSec", "DefaultStartLimitInterval"):
                self.start_limit_interval = Setting(parse_timespan(value), value, path, line)
            elif key == "DefaultRestartSec":
                self.restart_sec = Setting(parse_timespan(value), value, path, line)
            elif key == "DefaultStartLimitBurst":
                self.start_limit_burst = Setting(int(value), value, path, line)
        except ValueError:
            self.problems.append(Problem(path, line, f"{key}={value}: not a valid value; ignored"))
