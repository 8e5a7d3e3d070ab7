"""systemd itself as the oracle: ``systemctl --root=ROOT list-unit-files`` and ``is-enabled``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from imagelint.facts.systemd import UnitIndex

SYSTEMCTL = "/usr/bin/systemctl"
# list-unit-files leaves the PRESET column empty for these states (systemctl's show_preset_for_state())
NO_PRESET_STATES = frozenset({"alias", "static", "generated", "transient"})


def systemctl_available() -> bool:
    return shutil.which(SYSTEMCTL) is not None or Path(SYSTEMCTL).exists()


def list_unit_files(root: Path) -> dict[str, tuple[str, str | None]]:
    """unit file name -> (state, preset or None), from ``systemctl list-unit-files -o json``."""
    proc = subprocess.run(
        [SYSTEMCTL, f"--root={root}", "list-unit-files", "-o", "json", "--no-pager"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {entry["unit_file"]: (entry["state"], entry["preset"]) for entry in json.loads(proc.stdout)}


def is_enabled(root: Path, unit_names: list[str]) -> dict[str, str]:
    """unit name -> what ``systemctl is-enabled`` prints, or ``error: MESSAGE`` when it fails.

    systemctl stops at the first unit it cannot look up, so a failed batch is retried one by one.

    Debian's systemctl first runs a SysV-compatibility pass for ``*.service`` names (is there an
    ``/etc/init.d`` script?), which looks units up *without* the generator directories and fails
    the whole command on errors that the real lookup never meets (say, a broken alias hidden under
    a generated unit). ``SYSTEMCTL_SKIP_SYSV=1`` turns that pass off so that is-enabled answers
    with the same lookup as list-unit-files; init.d scripts are not units of the image's unit
    search path and are out of scope here.
    """
    out: dict[str, str] = {}
    if not unit_names:
        return out
    env = {**os.environ, "SYSTEMCTL_SKIP_SYSV": "1"}
    proc = subprocess.run(
        [SYSTEMCTL, f"--root={root}", "is-enabled", "--no-pager", "--", *unit_names],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    lines = proc.stdout.split()
    if len(lines) == len(unit_names) and not proc.stderr.strip():
        return dict(zip(unit_names, lines, strict=True))
    for name in unit_names:
        one = subprocess.run(
            [SYSTEMCTL, f"--root={root}", "is-enabled", "--no-pager", "--", name],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        text = one.stdout.strip()
        out[name] = text if text else f"error: {one.stderr.strip()}"
    return out


@dataclass
class Comparison:
    compared_list: int
    compared_is_enabled: int
    mismatches: list[str]


def compare(
    root: Path, index: UnitIndex, *, expected_differences: dict[str, tuple[str, str]] | None = None
) -> Comparison:
    """Compare every unit file and every indexed name against systemctl.

    ``expected_differences`` maps a unit name to (systemd's state, ours) for documented, deliberate
    differences; they must occur exactly as documented, or that is a mismatch too.
    """
    expected = dict(expected_differences or {})
    expected_differences_seen = set(expected)
    mismatches: list[str] = []
    listed = list_unit_files(root)
    for name, (state, preset) in sorted(listed.items()):
        unit = index.get(name)
        if unit is None:
            mismatches.append(f"{name}: listed by systemctl ({state}) but not indexed")
            continue
        ours_preset = None if state in NO_PRESET_STATES else unit.preset
        if name in expected:
            if (state, unit.state) != expected.pop(name):
                mismatches.append(
                    f"{name}: documented difference did not occur: systemd {state}, ours {unit.state}"
                )
            continue
        if (unit.state, ours_preset) != (state, preset):
            mismatches.append(f"{name}: systemd {state}/{preset}, ours {unit.state}/{ours_preset}")
    for name, unit in index.units.items():
        if unit.path is not None and name not in listed:
            mismatches.append(f"{name}: indexed as a unit file at {unit.path} but systemctl does not list it")
    everything = sorted(index.units)
    answers = is_enabled(root, everything)
    for name in everything:
        answer = answers[name]
        ours = index.units[name].state
        if name in expected_differences_seen:
            continue
        if answer.startswith("error:"):
            if ours != "bad":
                mismatches.append(f"{name}: systemctl is-enabled fails ({answer}), ours {ours}")
        elif answer != ours:
            mismatches.append(f"{name}: is-enabled {answer}, ours {ours}")
    for name, (theirs, ours) in expected.items():
        mismatches.append(f"{name}: documented difference ({theirs} vs {ours}) was not seen at all")
    return Comparison(len(listed), len(everything), mismatches)
