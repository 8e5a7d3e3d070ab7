"""The printed fix script and ``--apply`` on trees with a link (or a FIFO, a directory, a file) planted
at every name either of them writes or passes through: the targets, their directories, the
temporaries' directory and the names earlier scripts used for their temporaries. Both must end the
same way (the same exit, the same tree, entry for entry), and nothing outside the root may change:
the script runs as root on a build host, so a write through the image's link is a host write."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from imagelint.errors import ImageReadError
from imagelint.remedy.apply import apply_plan
from imagelint.remedy.plan import Plan, Step
from imagelint.remedy.rootdir import RootDir
from imagelint.remedy.script import render_script
from tests.remedy.trees import differences, listing
from tests.support import is_root, need

STEPS = {
    "sshd": Step("set-sshd-option", (("option", "PasswordAuthentication"), ("value", "no"))),
    "lock": Step("lock-password", (("user", "root"),)),
    "empty": Step("empty-file", (("path", "/etc/machine-id"),)),
    "chmod": Step("chmod", (("path", "/etc/cron.d/backup"), ("clear", "0002"))),
    "remove": Step("remove-path", (("path", "/var/lib/dbus/machine-id"),)),
}
CANARY = "outside the root\n"


def _link_to(where: str) -> Callable[[Path, Path], None]:
    """A link whose target is ``where`` below the outside directory (an absolute host path)."""

    def plant(at: Path, outside: Path) -> None:
        os.symlink(outside / where, at)

    return plant


def _relative_link(target: str) -> Callable[[Path, Path], None]:
    def plant(at: Path, outside: Path) -> None:
        os.symlink(target, at)

    return plant


def _fifo(at: Path, outside: Path) -> None:
    os.mkfifo(at)


def _directory(at: Path, outside: Path) -> None:
    at.mkdir()
    (at / "inner").write_text("x")


def _file(at: Path, outside: Path) -> None:
    at.write_text("a file where a directory was\n")


PLANTS: dict[str, tuple[str, Callable[[Path, Path], None]]] = {
    "nothing": ("", lambda at, outside: None),
    "old sshd temporary": ("etc/ssh/sshd_config.imagelint-new", _link_to("canary")),
    "old shadow temporary": ("etc/shadow.imagelint-new", _link_to("canary")),
    "sshd_config": ("etc/ssh/sshd_config", _link_to("canary")),
    "sshd_config dangling": ("etc/ssh/sshd_config", _link_to("absent")),
    "sshd_config fifo": ("etc/ssh/sshd_config", _fifo),
    "sshd_config directory": ("etc/ssh/sshd_config", _directory),
    "ssh dir outside": ("etc/ssh", _link_to("ssh")),
    "ssh dir inside": ("etc/ssh", _relative_link("../usr/share/ssh")),
    "ssh dir a file": ("etc/ssh", _file),
    "shadow": ("etc/shadow", _link_to("canary")),
    "shadow fifo": ("etc/shadow", _fifo),
    "etc outside": ("etc", _link_to("etc")),
    "etc inside": ("etc", _relative_link("usr/etc")),
    "machine-id": ("etc/machine-id", _link_to("canary")),
    "cron.d": ("etc/cron.d", _link_to("cron.d")),
    "backup": ("etc/cron.d/backup", _link_to("canary")),
    "dbus dir": ("var/lib/dbus", _link_to("dbus")),
}


def _populate(base: Path) -> None:
    """The files the steps change, as an image has them (also used for the trees a link leads to)."""
    (base / "etc/ssh").mkdir(parents=True)
    (base / "etc/ssh/sshd_config").write_text("PermitRootLogin no\n")
    (base / "etc/ssh/sshd_config").chmod(0o600)
    (base / "etc/shadow").write_text("root:$6$salt$hash:20000:0:99999:7:::\n")
    (base / "etc/shadow").chmod(0o640)
    (base / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    (base / "etc/cron.d").mkdir()
    (base / "etc/cron.d/backup").write_text("* * * * * root true\n")
    (base / "etc/cron.d/backup").chmod(0o666)
    (base / "var/lib/dbus").mkdir(parents=True)
    (base / "var/lib/dbus/machine-id").write_text("0123456789abcdef0123456789abcdef\n")


def _tree(tmp_path: Path, name: str, plant: str) -> tuple[Path, Path]:
    """An image root with ``plant`` in place, and the outside directory its links may lead to."""
    root, outside = tmp_path / name / "root", tmp_path / name / "outside"
    _populate(root)
    (root / "etc/os-release").write_text("ID=debian\n")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/lib/systemd").mkdir(parents=True)
    (root / "usr/lib/systemd/systemd").touch()
    _populate(root / "usr")  # usr/etc/...: where the "inside" links lead
    (root / "usr/share/ssh").mkdir(parents=True)
    (root / "usr/share/ssh/sshd_config").write_text("PermitRootLogin no\n")
    _populate(outside)
    for directory in ("ssh", "cron.d", "dbus"):
        (outside / directory).mkdir()
    (outside / "ssh/sshd_config").write_text(CANARY)
    (outside / "cron.d/backup").write_text(CANARY)
    (outside / "cron.d/backup").chmod(0o666)
    (outside / "dbus/machine-id").write_text(CANARY)
    (outside / "canary").write_text(CANARY)
    (outside / "canary").chmod(0o666)
    where, make = PLANTS[plant]
    if where:
        at = root / where
        if at.is_dir() and not at.is_symlink():
            subprocess.run(["rm", "-rf", str(at)], check=True)
        elif at.exists() or at.is_symlink():
            at.unlink()
        make(at, outside)
    return root, outside


def _by_script(plan: Plan, root: Path) -> tuple[int, str]:
    script = render_script(plan, "test", "0")
    proc = subprocess.run(
        ["sh", "-c", script, "fix", str(root)], capture_output=True, text=True, timeout=60, check=False
    )
    return proc.returncode, proc.stderr


def _by_apply(plan: Plan, root: Path) -> int:
    try:
        apply_plan(plan, RootDir(root))
    except ImageReadError:
        return 3
    return 0


def _listing(root: Path, outside: Path) -> dict[str, tuple[str, str]]:
    """The tree, its links to the outside directory spelt alike for both copies."""
    return {k: (kind, v.replace(str(outside), "OUTSIDE")) for k, (kind, v) in listing(root).items()}


def _plan(*names: str) -> Plan:
    plan = Plan()
    for name in names:
        plan.add(STEPS[name], "test")
    return plan


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("steps", [(name,) for name in STEPS] + [tuple(STEPS)], ids="+".join)
def test_script_and_apply_end_alike_and_never_write_outside(
    tmp_path: Path, plant: str, steps: tuple[str, ...]
) -> None:
    plan = _plan(*steps)
    script_root, script_outside = _tree(tmp_path, "script", plant)
    apply_root, apply_outside = _tree(tmp_path, "apply", plant)
    outside_before = listing(script_outside)

    code, err = _by_script(plan, script_root)
    assert code == _by_apply(plan, apply_root), err
    assert code in (0, 3), err
    assert differences(_listing(script_root, script_outside), _listing(apply_root, apply_outside)) == []
    assert differences(outside_before, listing(script_outside)) == []
    assert differences(outside_before, listing(apply_outside)) == []
    if code == 3:
        assert len(err.strip().splitlines()) == 1 and err.startswith("imagelint fix: "), err


def test_the_rewrites_act_through_no_link_on_a_clean_tree(tmp_path: Path) -> None:
    """The control: with nothing planted, the rewrites happen (so the cases above are not all refusals)."""
    root, _ = _tree(tmp_path, "clean", "nothing")
    code, err = _by_script(_plan("sshd", "lock"), root)
    assert code == 0, err
    assert (root / "etc/ssh/sshd_config").read_text() == "PasswordAuthentication no\nPermitRootLogin no\n"
    assert (root / "etc/ssh/sshd_config").stat().st_mode & 0o777 == 0o600
    assert (root / "etc/shadow").read_text().startswith("root:!$6$salt$hash:")
    assert (root / "etc/shadow").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in (root / "etc/ssh").iterdir()) == ["sshd_config"]


def test_a_failed_rewrite_leaves_no_temporary() -> None:
    """The temporary is removed when the script stops half way (here: /etc/shadow cannot be written)."""
    need(is_root() and shutil.which("setpriv") is not None, "needs root and setpriv to run as nobody")
    script = render_script(_plan("lock"), "test", "0")
    # as nobody (root writes a read-only file), in a directory nobody can reach (pytest's is 0700)
    with tempfile.TemporaryDirectory(prefix="imagelint-links-") as work:
        os.chmod(work, 0o755)
        root, _ = _tree(Path(work), "failing", "nothing")
        subprocess.run(["chown", "-R", "65534:65534", str(root)], check=True)
        (root / "etc/shadow").chmod(0o444)
        before = sorted(p.name for p in (root / "etc").iterdir())
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                script,
                "fix",
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, proc.stderr
        assert sorted(p.name for p in (root / "etc").iterdir()) == before


@pytest.mark.parametrize(
    ("steps", "absent"),
    [
        (("chmod",), ("il_sshd()", "il_lock()", "il_replace()", "mktemp")),
        (("sshd",), ("il_lock()",)),
        (("lock",), ("il_sshd()",)),
    ],
)
def test_the_script_carries_only_the_helpers_its_steps_call(
    steps: tuple[str, ...], absent: tuple[str, ...]
) -> None:
    script = render_script(_plan(*steps), "test", "0")
    for text in absent:
        assert text not in script


def test_a_unit_only_plan_carries_no_file_helper() -> None:
    script = render_script(Plan(), "test", "0")
    assert "il_nolink()" not in script and "trap" not in script
    unit = Plan()
    unit.add(Step("disable-unit", (("unit", "ecs.service"),)), "test")
    assert "il_nolink()" not in render_script(unit, "test", "0")
