"""The collector keeps to its caps and says what it left out; the rules that would read what is not
there are inconclusive, never a pass. It needs nothing but a POSIX shell, coreutils and tar, and
works from a noexec directory."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from imagelint.collector.plan import Limits
from imagelint.config import Config
from imagelint.report import Verdict
from imagelint.rulepacks import load_packs
from tests.collector.support import bundle_report, collect, directory_report, findings, outcomes
from tests.support import build_tree, is_root, need

PACK = """\
rules:
  - id: T001
    name: secret-in-config
    title: a config holds a secret
    severity: high
    scope: [image]
    check: {kind: file.contains, paths: [/etc/app/*.conf], pattern: 'secret'}
    message: "{path}:{line}"
    remediation: x
  - id: T002
    name: big-files
    title: big files
    severity: high
    scope: [image]
    check: {kind: file.present, paths: [/etc/app/*], min_size: 1500}
    message: "{path} is {size} bytes"
    remediation: x
  - id: T003
    name: world-writable
    title: world-writable below /srv
    severity: high
    scope: [image]
    check: {kind: file.permissions, paths: [/srv], recursive: true, mode_any: '0002'}
    message: "{path}"
    remediation: x
  - id: T004
    name: fifos
    title: FIFOs below /run/app
    severity: high
    scope: [image]
    check: {kind: file.present, paths: ['/run/app/*'], types: [FIFO]}
    message: "{path}"
    remediation: x
"""


@pytest.fixture
def packs(tmp_path: Path) -> list:
    (tmp_path / "pack.yaml").write_text(PACK)
    return load_packs([tmp_path / "pack.yaml"], builtin=[])


def _tree(tmp_path: Path) -> Path:
    root = build_tree(
        tmp_path / "image",
        {
            "/etc/app/small.conf": "secret=1\n",
            "/etc/app/large.conf": "x" * 2000 + "\nsecret=2\n",
            "/srv/data/shared": {"content": "x", "mode": "0666"},
        },
    )
    for i in range(30):
        (root / "srv" / "data" / f"f{i}").write_text("x")
    (root / "run" / "app").mkdir(parents=True)
    os.mkfifo(root / "run" / "app" / "pipe")
    return root


def _manifest(bundle: Path) -> str:
    import tarfile

    with tarfile.open(bundle) as tar:
        member = tar.extractfile("imagelint/manifest.txt")
        assert member is not None
        return member.read().decode()


def test_within_the_caps_the_bundle_agrees_with_the_tree(tmp_path: Path, packs: list) -> None:
    root = _tree(tmp_path)
    direct = directory_report(root, packs=packs)
    remote = bundle_report(collect(root, tmp_path / "w", packs=packs), packs=packs)
    assert {f[0] for f in findings(direct)} == {"T001", "T002", "T003", "T004"}
    assert findings(remote) == findings(direct)
    # the FIFO is described, never archived, and still found as a FIFO
    assert any(f.rule_id == "T004" and f.evidence["type"] == "FIFO" for f in remote.findings)


def test_a_file_over_the_cap_is_described_and_its_reader_inconclusive(tmp_path: Path, packs: list) -> None:
    root = _tree(tmp_path)
    bundle = collect(root, tmp_path / "w", packs=packs, limits=Limits(file=1024))
    assert "over-file-limit /etc/app/large.conf" in _manifest(bundle)
    remote = bundle_report(bundle, packs=packs)
    # as for a file over imagelint's own read limit: the rule that reads it ends in error
    assert outcomes(remote)["T001"] == "error"
    assert any(
        "content not collected from the instance (over-file-limit)" in e.message for e in remote.errors
    )
    # metadata is there all the same: the size rule sees the real size
    assert any(f.rule_id == "T002" and f.evidence["size"] == 2010 for f in remote.findings)


def test_the_total_cap_and_the_entry_cap(tmp_path: Path, packs: list) -> None:
    root = _tree(tmp_path)
    bundle = collect(root, tmp_path / "w", packs=packs, limits=Limits(total=100))
    assert "over-total-limit /etc/app/large.conf" in _manifest(bundle)
    bundle = collect(root, tmp_path / "w2", packs=packs, limits=Limits(entries=10))
    assert "incomplete entries /srv/data" in _manifest(bundle)
    remote = bundle_report(bundle, packs=packs)
    assert outcomes(remote)["T003"] in ("error", "fail")
    assert any("not collected in full from the instance (entries)" in e.message for e in remote.errors)
    assert remote.verdict is not Verdict.PASS


def test_names_with_a_newline_are_counted_not_collected(tmp_path: Path, packs: list) -> None:
    root = _tree(tmp_path)
    (root / "etc" / "app" / "odd\nname.conf").write_text("secret\n")
    bundle = collect(root, tmp_path / "w", packs=packs)
    assert "unrepresentable-names " in _manifest(bundle)  # counted each time a glob meets it
    remote = bundle_report(bundle, packs=packs)
    assert any("with a newline were not collected" in w.message for w in remote.warnings)


ALLOWED = "sh mkdir readlink cat tr sort comm date mv stat tar gzip wc sleep rm".split()  # noqa: SIM905


def test_needs_only_shell_coreutils_tar_and_runs_from_a_noexec_directory(tmp_path: Path, packs: list) -> None:
    """PATH holds only the tools the collector may use (no python, find, grep, sed, awk), and its
    work directory is a tmpfs mounted noexec, as /tmp is on CIS images."""
    need(is_root(), "mounting a noexec tmpfs needs root")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ALLOWED:
        found = shutil.which(tool)
        assert found, tool
        os.symlink(found, bindir / tool)
    work = tmp_path / "noexec"
    work.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=64m", "tmpfs", str(work)], check=True)
    try:
        root = _tree(tmp_path)
        env = {"PATH": str(bindir), "LC_ALL": "C"}
        bundle = collect(root, work / "w", packs=packs, env=env)
        direct = directory_report(root, packs=packs)
        assert findings(bundle_report(bundle, packs=packs)) == findings(direct)
    finally:
        subprocess.run(["umount", str(work)], check=True)
    assert not Config().select  # the default config was used throughout


def test_names_that_printf_or_a_glob_would_read_are_walked_as_they_are(tmp_path: Path, packs: list) -> None:
    """A directory is listed by one printf whose format holds the directory's name: % and \\ in it,
    glob characters, dot names and a leading '-' come back as they are."""
    root = _tree(tmp_path)
    for name in ("a%sb\\n", "[x]*", ".hid", "..dd", "-n", "100%"):
        sub = root / "srv" / "data" / name
        sub.mkdir()
        for leaf in ("%d x ", "-e", ".dot", "*"):
            (sub / leaf).write_text("x")
            (sub / leaf).chmod(0o666)
    direct = directory_report(root, packs=packs)
    remote = bundle_report(collect(root, tmp_path / "w", packs=packs), packs=packs)
    assert len([f for f in findings(direct) if f[0] == "T003"]) == 1 + 6 * 4
    assert findings(remote) == findings(direct)


def test_a_link_target_holding_a_newline_is_counted_not_listed(tmp_path: Path, packs: list) -> None:
    root = _tree(tmp_path)
    os.symlink("x\ny", root / "etc" / "app" / "odd.conf")  # lists hold a path a line
    bundle = collect(root, tmp_path / "w", packs=packs)
    manifest = _manifest(bundle)
    assert "y" not in manifest.splitlines() and "absent /etc/app/x" not in manifest
    assert "unrepresentable-names " in manifest


def test_the_manifest_says_what_the_collector_cost_phase_by_phase(tmp_path: Path, packs: list) -> None:
    bundle = collect(_tree(tmp_path), tmp_path / "w", packs=packs)
    cost = bundle_report(bundle, packs=packs).facts["bundle"]["cost"]
    assert [p["phase"] for p in cost["phases"]] == ["paths", "references", "classify", "tar"]
    assert all(p["seconds"] >= 0 and p["cpu_seconds"] >= 0 for p in cost["phases"])
    assert cost["cpu_seconds"] >= sum(p["cpu_seconds"] for p in cost["phases"]) - 0.05


def test_a_file_below_a_directory_cut_by_the_entry_cap_is_not_read_as_absent(tmp_path: Path) -> None:
    """The entry cap leaves a directory listed in part: a file in it that the bundle does not describe
    may exist on the host, so looking it up is "not collected in full", never "absent"."""
    from imagelint.bundle.run import opened
    from imagelint.errors import ImageReadError

    root = _tree(tmp_path)
    check = "{kind: file.permissions, paths: [/srv], recursive: true, mode_any: '0002'}"
    (tmp_path / "walk.yaml").write_text(
        "rules:\n  - {id: T006, name: srv-walked, title: t, severity: high, scope: [image], message: x,"
        f" remediation: x, check: {check}}}\n"
    )
    packs = load_packs([tmp_path / "walk.yaml"], builtin=[])
    bundle = collect(root, tmp_path / "w", packs=packs, limits=Limits(entries=10))
    manifest = _manifest(bundle)
    assert "incomplete entries /srv/data" in manifest
    uncollected = next(f"/srv/data/f{i}" for i in range(30) if f"/srv/data/f{i}\n" not in manifest)
    assert (root / uncollected.lstrip("/")).exists()  # on the host it is there
    with opened(bundle) as got:
        with pytest.raises(ImageReadError, match="not collected in full"):
            got.target.lstat(uncollected)
        with pytest.raises(ImageReadError, match="not collected in full"):
            got.target.exists("/srv/data/never-there")
