"""Seeded random unit trees: small, dense tangles of files, links and drop-ins across the search path.

Each tree mixes regular unit files (with random [Install] settings, some empty, some broken),
links of every shape (to /dev/null, to names in and out of the search path, relative and
absolute, through /lib, dangling, looping), link directories and drop-in directories, in all the
search directories including /run and the generator directories. systemctl is the oracle; the
shapes are the ones a real image can contain, not the ones we thought of.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.facts.systemd.crafted import skeleton

NAMES = (
    "a.service",
    "b.service",
    "c@.service",
    "c@x.service",
    "d.socket",
    "d.service",
    "e.target",
    "m.mount",
    "t.timer",
    "f@.socket",
    "g-h.service",
    "g-.service",
)
DIRS = (
    "etc/systemd/system",
    "usr/lib/systemd/system",
    "run/systemd/system",
    "run/systemd/generator",
    "etc/systemd/system.control",
    "usr/local/lib/systemd/system",
)
INSTALL_KEYS = ("WantedBy", "RequiredBy", "Alias", "Also", "DefaultInstance", "UpheldBy")
INSTALL_VALUES = (*NAMES, "", "multi-user.target", "x y", "%p-x.service", "inst")


def _unit_text(r: random.Random) -> str:
    if r.random() < 0.05:
        return ""
    parts = ["[Unit]\nDescription=x\n", "[Service]\nExecStart=/bin/true\n"]
    if r.random() < 0.7:
        lines = ["[Install]"]
        lines += [f"{r.choice(INSTALL_KEYS)}={r.choice(INSTALL_VALUES)}" for _ in range(r.randint(0, 3))]
        parts.append("\n".join(lines) + "\n")
    if r.random() < 0.05:
        parts.append("[Broken\n")
    return "".join(parts)


def random_tree(root: Path, seed: int) -> Path:
    r = random.Random(seed)
    skeleton(root)
    for _ in range(r.randint(3, 14)):
        directory, name = r.choice(DIRS), r.choice(NAMES)
        if r.random() < 0.25:
            owner = r.choice(("multi-user.target", "e.target", r.choice(NAMES)))
            suffix = r.choice((".wants", ".requires", ".upholds", ".d"))
            directory = f"{directory}/{owner}{suffix}"
            if suffix == ".d":
                name = r.choice(("10.conf", "20.conf"))
        path = root / directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            continue
        if r.random() < 0.5:
            if name.endswith(".conf"):
                setting = r.choice(("WantedBy=multi-user.target", "Alias=zz.service", "WantedBy="))
                path.write_text(f"[Install]\n{setting}\n")
            else:
                path.write_text(_unit_text(r))
            continue
        target = r.choice(
            (
                "/dev/null",
                f"/{r.choice(DIRS)}/{r.choice(NAMES)}",
                r.choice(NAMES),
                f"../{r.choice(NAMES)}",
                f"/opt/{r.choice(NAMES)}",
                f"/lib/systemd/system/{r.choice(NAMES)}",
            )
        )
        os.symlink(target, path)
        if target.startswith("/opt/") and r.random() < 0.7:
            outside = root / target.lstrip("/")
            outside.parent.mkdir(parents=True, exist_ok=True)
            if not outside.exists():
                outside.write_text(_unit_text(r))
    if r.random() < 0.5:
        (root / "dev").mkdir(exist_ok=True)
        os.mknod(root / "dev/null", 0o666 | 0o020000, os.makedev(1, 3))
    return root
