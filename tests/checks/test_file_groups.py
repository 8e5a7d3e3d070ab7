"""``group_by: directory`` on the file check kinds: one observation per directory, with true figures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagelint.checks import CheckContext, registry
from imagelint.checks.files import GROUP_FILES_LISTED
from imagelint.errors import RulePackError
from imagelint.rulepacks import load_packs
from imagelint.targets import RootfsTarget
from tests.support import build_tree


def _evaluate(root: Path, kind: str, **params: object) -> list:
    check = registry()[kind]
    return check.evaluate(CheckContext.for_target(RootfsTarget(root)), check.arguments(params))


def test_one_observation_per_directory_with_count_size_and_names(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {
            "/srv/a/zeta.tmp": "z" * 10,
            "/srv/a/alpha.tmp": "a" * 20,
            "/srv/a/mid.tmp": "m" * 30,
            "/srv/a/beta.tmp": "",
            "/srv/b/only.tmp": "o" * 5,
        },
    )
    found = _evaluate(root, "file.present", paths=["/srv/*/*.tmp"], group_by="directory")
    assert [(o.subject, o.path, o.line) for o in found] == [
        ("/srv/a", "/srv/a", None),
        ("/srv/b", "/srv/b", None),
    ]
    a = found[0].evidence
    assert a["count"] == 4 and a["count_text"] == "4"
    assert a["bytes"] == 60 and a["bytes_text"] == "60 B"
    assert a["examples"] == ["alpha.tmp", "beta.tmp", "mid.tmp"]  # the first three, sorted
    assert a["examples_text"] == "alpha.tmp, beta.tmp, mid.tmp"
    assert a["files"] == ["alpha.tmp", "beta.tmp", "mid.tmp", "zeta.tmp"] and a["files_omitted"] == 0
    assert a["type"] == "file"  # what all members share is kept...
    assert "size" not in a  # ...what describes one member is not
    assert found[1].evidence["count"] == 1 and found[1].evidence["bytes"] == 5


def test_without_group_by_nothing_changes(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "image", {"/srv/a/x.tmp": "x", "/srv/a/y.tmp": "yy"})
    found = _evaluate(root, "file.present", paths=["/srv/a/*"])
    assert [(o.path, o.evidence) for o in found] == [
        ("/srv/a/x.tmp", {"type": "file", "size": 1}),
        ("/srv/a/y.tmp", {"type": "file", "size": 2}),
    ]


def test_the_list_is_capped_but_the_count_is_not(tmp_path: Path) -> None:
    d = tmp_path / "image/var/spool/junk"
    d.mkdir(parents=True)
    n = GROUP_FILES_LISTED + 234
    for i in range(n):
        with open(d / f"f{i:05d}", "wb") as f:
            f.truncate(1024)
    (found,) = _evaluate(
        tmp_path / "image", "file.present", paths=["/var/spool/junk/*"], group_by="directory"
    )
    ev = found.evidence
    assert ev["count"] == n and ev["count_text"] == f"{n:,}" and ev["bytes"] == n * 1024
    assert len(ev["files"]) == GROUP_FILES_LISTED and ev["files_omitted"] == 234
    assert ev["files"] == sorted(ev["files"]) and ev["files"][0] == "f00000"


def test_a_matched_directory_counts_with_the_files_below_it(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {
            "/var/cache/dnf/fedora-1/packages/a.rpm": "a" * 100,
            "/var/cache/dnf/fedora-1/repodata/primary.xml": "p" * 50,
            "/var/cache/dnf/expired_repos.json": "[]",
            "/var/cache/dnf/updates-2/link": {"link": "/etc/passwd"},
        },
    )
    (found,) = _evaluate(
        root, "file.present", paths=["/var/cache/dnf/*"], types=["file", "directory"], group_by="directory"
    )
    ev = found.evidence
    assert found.path == "/var/cache/dnf"
    assert ev["count"] == 3 and ev["files"] == ["expired_repos.json", "fedora-1", "updates-2"]
    assert ev["bytes"] == 152  # the files below fedora-1, and the json; a link counts for nothing
    assert "type" not in ev  # files and directories: no common type


def test_permissions_group_keeps_the_problem_only_when_shared(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {
            "/opt/app/lib/a.so": {"content": "", "mode": "0666"},
            "/opt/app/lib/b.so": {"content": "", "mode": "0666"},
            "/opt/app/bin/run": {"content": "", "mode": "0777"},
            "/opt/app/bin/tool": {"content": "", "mode": "0666"},
        },
    )
    found = _evaluate(
        root,
        "file.permissions",
        paths=["/opt/app"],
        recursive=True,
        types=["file"],
        mode_any="0002",
        group_by="directory",
    )
    by_dir = {o.path: o.evidence for o in found}
    assert set(by_dir) == {"/opt/app/lib", "/opt/app/bin"}
    assert (
        by_dir["/opt/app/lib"]["problem"] == "mode 0666 has 0002 set" and by_dir["/opt/app/lib"]["count"] == 2
    )
    assert "problem" not in by_dir["/opt/app/bin"] and by_dir["/opt/app/bin"]["count"] == 2


def test_contains_group_counts_files_not_lines(tmp_path: Path) -> None:
    root = build_tree(
        tmp_path / "image",
        {"/etc/app/a.conf": "token=1\ntoken=2\n", "/etc/app/b.conf": "token=3\n", "/etc/app/c.conf": "ok\n"},
    )
    (found,) = _evaluate(
        root,
        "file.contains",
        paths=["/etc/app/*.conf"],
        pattern="^token=",
        max_per_file=5,
        group_by="directory",
    )
    assert found.line is None and found.evidence["count"] == 2
    assert found.evidence["files"] == ["a.conf", "b.conf"]
    assert "excerpt" not in found.evidence  # the lines differ


def test_empty_and_lacks_take_group_by(tmp_path: Path) -> None:
    root = build_tree(tmp_path / "image", {"/etc/x/a": "", "/etc/x/b": "", "/etc/x/c": "set\n"})
    (empty,) = _evaluate(root, "file.empty", paths=["/etc/x/*"], group_by="directory")
    assert empty.evidence["files"] == ["a", "b"] and empty.evidence["bytes"] == 0
    (lacks,) = _evaluate(root, "file.lacks", paths=["/etc/x/*"], pattern="^set$", group_by="directory")
    assert lacks.evidence["count"] == 2


def test_image_names_are_kept_as_they_are(tmp_path: Path) -> None:
    d = tmp_path / "image/var/tmp"
    d.mkdir(parents=True)
    for raw in (b"bad\xff.deb", b"line\nbreak.deb", b"\x1b[31mred.deb"):
        (d / os.fsdecode(raw)).write_bytes(b"x")
    (found,) = _evaluate(tmp_path / "image", "file.present", paths=["/var/tmp/*"], group_by="directory")
    assert sorted(found.evidence["files"]) == sorted(
        os.fsdecode(r) for r in (b"bad\xff.deb", b"line\nbreak.deb", b"\x1b[31mred.deb")
    )


def test_an_unknown_grouping_is_refused_where_it_is_written(tmp_path: Path) -> None:
    pack = tmp_path / "p.yaml"
    pack.write_text(
        "pack: {name: p}\nrules:\n"
        "  - id: X001\n    name: x\n    title: x\n    severity: low\n    scope: [image]\n"
        "    check: {kind: file.present, paths: [/x/*], group_by: file}\n"
        "    message: m\n    remediation: r\n"
    )
    with pytest.raises(RulePackError) as info:
        load_packs([pack], builtin=[])
    assert "p.yaml:8" in str(info.value.where)
