"""A target must be an operating system's root to be judged, through every door (openers/__init__.py's
require_os_root): an empty directory, a docs folder, a half-extracted tree, a mount point whose mount
went away, a disk image's chosen filesystem and a collector bundle without the marks are one line and
exit 3 for `audit`, `units`, both sides of `diff`, `fix` and `soak --from-bundle`;
--allow-partial-root audits them as they are."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import build_tree, half_extracted_root, is_root, need, os_root, run_cli

REFUSED = "not an operating system's root"


def _empty(where: Path) -> Path:
    where.mkdir()
    return where


def _docs(where: Path) -> Path:
    """A documentation folder handed over by mistake (it has an etc/ of its own)."""
    return build_tree(
        where,
        {"/mkdocs.yml": "site_name: x\n", "/docs/index.md": "# Home\n", "/etc/example.conf": "a = 1\n"},
    )


def _unmounted(where: Path) -> Path:
    """The image was mounted here, and the mount went away (or never happened): what is left is the
    empty mount point, which is what a workflow's failed `mount` leaves at $RUNNER_TEMP/rootfs."""
    need(is_root(), "mounts a tmpfs")
    where.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", f"imagelint-{uuid.uuid4().hex[:8]}", str(where)], check=True
    )
    try:
        os_root(where)
        assert (where / "usr/lib/systemd/systemd").exists()
    finally:
        subprocess.run(["umount", str(where)], check=True)
    return where


TARGETS: dict[str, Callable[[Path], Path]] = {
    "empty directory": _empty,
    "docs folder": _docs,
    "half-extracted tree": half_extracted_root,
    "unmounted mount point": _unmounted,
}
MISSING = {
    "empty directory": ["no os-release", "no usr tree", "no init"],
    "docs folder": ["no os-release", "no usr tree", "no init"],
    "half-extracted tree": ["no init"],
    "unmounted mount point": ["no os-release", "no usr tree", "no init"],
}


def _refused(proc: subprocess.CompletedProcess[str], target: Path, missing: list[str]) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"imagelint: error: {target}: {REFUSED}"), lines[0]
    for word in missing:
        assert word in lines[0], lines[0]
    present = {"no os-release", "no usr tree", "no init"} - set(missing)
    for word in present:
        assert word not in lines[0], lines[0]
    assert "PASS" not in proc.stdout


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return os_root(tmp_path_factory.mktemp("good") / "rootfs")


@pytest.mark.parametrize("kind", list(TARGETS))
@pytest.mark.parametrize("door", ["audit", "units", "fix", "diff-old", "diff-new"])
def test_a_target_without_the_marks_of_an_os_root_is_inconclusive(
    tmp_path: Path, good: Path, kind: str, door: str
) -> None:
    target = TARGETS[kind](tmp_path / "rootfs")
    args = {
        "diff-old": ["diff", str(target), str(good)],
        "diff-new": ["diff", str(good), str(target)],
    }.get(door, [door, str(target)])
    _refused(run_cli(*args), target, MISSING[kind])


@pytest.mark.parametrize("door", ["audit", "units", "fix", "diff"])
def test_allow_partial_root_audits_a_partial_tree_as_it_is(tmp_path: Path, good: Path, door: str) -> None:
    target = half_extracted_root(tmp_path / "rootfs")
    args = ["diff", str(good), str(target)] if door == "diff" else [door, str(target)]
    proc = run_cli(*args, "--allow-partial-root")
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr)
    assert REFUSED not in proc.stderr
    if door == "units":
        assert "ecs.service" in proc.stdout


def test_a_tree_with_the_marks_is_audited(good: Path) -> None:
    proc = run_cli("audit", str(good))
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout


def test_a_hostile_target_name_stays_one_escaped_line(tmp_path: Path) -> None:
    target = tmp_path / "mnt\n::error::pwned\x1b[31m"
    target.mkdir()
    proc = run_cli("audit", str(target))
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and REFUSED in lines[0], proc.stderr
    assert "\x1b" not in proc.stderr and not any(line.startswith("::") for line in lines)


def test_a_disk_image_whose_root_filesystem_lacks_the_init_is_inconclusive(tmp_path: Path) -> None:
    """mke2fs -d of a half-extracted tree: the disk opener picks its filesystem (it has an
    os-release), and the marks are asked of it as of a directory."""
    need(shutil.which("mke2fs") is not None, "mke2fs is not installed (e2fsprogs)")
    tree = half_extracted_root(tmp_path / "tree")
    image = tmp_path / "disk.img"
    subprocess.run(
        ["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree), str(image), "8M"],
        check=True,
        capture_output=True,
    )
    _refused(run_cli("audit", str(image)), image, ["no init"])
    allowed = run_cli("audit", str(image), "--allow-partial-root")
    assert allowed.returncode == 1 and "ecs.service" in allowed.stdout, (
        allowed.stderr
    )  # its dangling unit link


def test_a_bundle_of_a_docs_folder_is_inconclusive_and_of_an_os_root_is_audited(tmp_path: Path) -> None:
    """The real collector on a tree: it gathers the marks (the plan asks for them), and a bundle
    without them is refused as a directory would be."""
    from tests.collector.support import collect

    docs = collect(_docs(tmp_path / "docs"), tmp_path / "w1")
    _refused(run_cli("audit", str(docs)), docs, MISSING["docs folder"])
    half = collect(half_extracted_root(tmp_path / "half"), tmp_path / "w2")
    _refused(run_cli("units", str(half)), half, ["no init"])
    whole = collect(os_root(tmp_path / "whole"), tmp_path / "w3")
    proc = run_cli("audit", str(whole))
    assert proc.returncode == 0, proc.stderr


def test_soak_from_a_bundle_without_the_marks_is_inconclusive(tmp_path: Path) -> None:
    from tests.bundle.support import collect_soak_bundle

    bundle = collect_soak_bundle(tmp_path, marks=False)
    _refused(run_cli("soak", "--from-bundle", str(bundle)), bundle, MISSING["empty directory"])
