"""The file actions beyond units: ``lock-password`` writes /etc/shadow as the real ``passwd -R ROOT -l``
does (and, unlike it, leaves no ``/etc/shadow-`` backup holding the old hash), and ``remove-matching``
removes what ``rm -rf -- DIR/PATTERN`` removes, through no link; the printed script and ``--apply``
agree on each."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from imagelint.errors import ImageReadError
from imagelint.remedy.apply import apply_plan
from imagelint.remedy.plan import Plan, Step
from imagelint.remedy.rootdir import RootDir
from imagelint.remedy.script import render_script
from tests.remedy.trees import differences, listing
from tests.support import is_root, need

SHADOWS = {
    "hashed": "root:$6$salt$hash:20000:0:99999:7:::\ndaemon:*:20000:0:99999:7:::\n",
    "locked already": "root:!$6$salt$hash:20000:0:99999:7:::\n",
    "star": "root:*:20000:0:99999:7:::\n",
    "empty field": "root::20000:0:99999:7:::\n",
    "root not first": "daemon:*:1::::::\nroot:$y$j9T$abc$def:20000::::::\nrootx:$6$x:1::::::\n",
    "no trailing newline": "root:$6$a$b:20000:0:99999:7:::",
}


def _plan(*steps: Step) -> Plan:
    plan = Plan()
    for step in steps:
        plan.add(step, "test")
    return plan


def _tree(tmp_path: Path, name: str, shadow: str) -> Path:
    root = tmp_path / name
    (root / "etc").mkdir(parents=True)
    shutil.copy("/etc/passwd", root / "etc/passwd")
    shutil.copy("/etc/group", root / "etc/group")
    (root / "etc/shadow").write_text(shadow)
    (root / "etc/shadow").chmod(0o640)
    return root


def _run_script(plan: Plan, root: Path) -> None:
    script = render_script(plan, "test", "0")
    subprocess.run(["sh", "-c", script, "fix", str(root)], check=True, capture_output=True)


@pytest.mark.parametrize("case", sorted(SHADOWS))
def test_lock_password_writes_shadow_as_passwd_does(tmp_path: Path, case: str) -> None:
    need(is_root(), "the real passwd -R needs root")
    by_passwd = _tree(tmp_path, "passwd", SHADOWS[case])
    subprocess.run(["passwd", "-R", str(by_passwd), "-l", "root"], check=True, capture_output=True)
    expected = (by_passwd / "etc/shadow").read_text()
    plan = _plan(Step("lock-password", (("user", "root"),)))

    by_script, by_apply = _tree(tmp_path, "script", SHADOWS[case]), _tree(tmp_path, "apply", SHADOWS[case])
    _run_script(plan, by_script)
    changed = apply_plan(plan, RootDir(by_apply))

    if SHADOWS[case] != expected:
        assert changed == ["lock-password: /etc/shadow: root's password locked"]
    for root in (by_script, by_apply):
        assert (root / "etc/shadow").read_text() == expected
        assert not (root / "etc/shadow-").exists()  # passwd's backup would keep the hash in the image
        assert (root / "etc/shadow").stat().st_mode & 0o777 == 0o640
    before = listing(by_script)
    _run_script(plan, by_script)
    assert apply_plan(plan, RootDir(by_apply)) == []
    assert differences(before, listing(by_script)) == []
    assert differences(listing(by_script), listing(by_apply)) == []


def _cache(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    archives = root / "var/cache/apt/archives"
    (archives / "partial").mkdir(parents=True)
    (archives / "lock").touch()
    (archives / "a_1.0_amd64.deb").write_bytes(b"!<arch>\n")
    (archives / ".hidden.deb").write_bytes(b"kept: sh's * skips dot files")
    (archives / "dir.deb").mkdir()
    (archives / "dir.deb/inner").write_text("x")
    outside = tmp_path / f"{name}-outside.deb"
    outside.write_text("outside the root")
    os.symlink(outside, archives / "link.deb")
    return root


def test_remove_matching_removes_what_rm_removes_and_never_follows_a_link(tmp_path: Path) -> None:
    plan = _plan(Step("remove-matching", (("path", "/var/cache/apt/archives"), ("match", "*.deb"))))
    by_script, by_apply = _cache(tmp_path, "script"), _cache(tmp_path, "apply")
    _run_script(plan, by_script)
    apply_plan(plan, RootDir(by_apply))

    for root in (by_script, by_apply):
        left = sorted(p.name for p in (root / "var/cache/apt/archives").iterdir())
        assert left == [".hidden.deb", "lock", "partial"]
        assert (tmp_path / f"{root.name}-outside.deb").read_text() == "outside the root"
    assert differences(listing(by_script), listing(by_apply)) == []
    before = listing(by_script)
    _run_script(plan, by_script)
    assert apply_plan(plan, RootDir(by_apply)) == []
    assert differences(before, listing(by_script)) == []


def test_remove_matching_refuses_a_directory_that_became_a_link(tmp_path: Path) -> None:
    plan = _plan(Step("remove-matching", (("path", "/var/cache/apt/archives"), ("match", "*.deb"))))
    root = _cache(tmp_path, "root")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(root / "var/cache/apt/archives", elsewhere)
    os.symlink(elsewhere, root / "var/cache/apt/archives")
    script = subprocess.run(
        ["sh", "-c", render_script(plan, "t", "0"), "fix", str(root)], capture_output=True, text=True
    )
    assert script.returncode == 3 and "a link on the way" in script.stderr
    with pytest.raises(ImageReadError):
        apply_plan(plan, RootDir(root))
    assert (elsewhere / "a_1.0_amd64.deb").exists()


def test_a_pattern_that_could_reach_the_shell_is_refused_when_rendered() -> None:
    plan = _plan(Step("remove-matching", (("path", "/var/cache"), ("match", "*;touch x"))))
    with pytest.raises(ValueError, match="shell-inert"):
        render_script(plan, "t", "0")


@pytest.mark.parametrize("root", ["-rf", "--help", "-", "--no-preserve-root"])
def test_a_root_that_looks_like_an_option_is_refused(tmp_path: Path, root: str) -> None:
    """``sh fix.sh "$ROOT"`` with ROOT from a variable: a leading ``-`` would reach chmod, readlink
    and cat as an option; the script refuses it before it touches anything (write ./NAME)."""
    (tmp_path / root).mkdir()
    (tmp_path / root / "etc").mkdir()
    (tmp_path / root / "etc" / "x").write_text("x")
    (tmp_path / root / "etc" / "x").chmod(0o666)
    plan = _plan(Step("chmod", (("path", "/etc/x"), ("clear", "0002"))))
    script = render_script(plan, "test", "0")
    proc = subprocess.run(["sh", "-c", script, "fix", root], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and "the root is a path, not an option" in proc.stderr, proc.stderr
    assert (tmp_path / root / "etc" / "x").stat().st_mode & 0o777 == 0o666  # untouched
    dotted = subprocess.run(
        ["sh", "-c", script, "fix", f"./{root}"], cwd=tmp_path, capture_output=True, text=True
    )
    assert dotted.returncode == 0, dotted.stderr
    assert (tmp_path / root / "etc" / "x").stat().st_mode & 0o777 == 0o664
