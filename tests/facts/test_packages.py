"""The package inventory against the package managers themselves: dpkg-query on the real Debian tree,
and rpm on a real sqlite rpmdb made by rpmbuild + rpm --justdb; the image's database is never written."""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest

from imagelint.errors import ImageReadError
from imagelint.facts.packages import MAX_LINE, StanzaError, _Guard, load_packages, parse_header, parse_stanzas
from imagelint.targets import RootfsTarget
from tests.support import copy_rootfs, need, os_root, run_cli_measured

SPEC = """\
Name: {name}
Version: {version}
Release: {release}
{epoch}Summary: imagelint test package
License: MIT
BuildArch: noarch
%description
A package for the rpm inventory test.
%install
mkdir -p %{{buildroot}}/usr/share/{name}
echo hi > %{{buildroot}}/usr/share/{name}/hi
%files
/usr/share/{name}/hi
"""
RPMDB = "var/lib/rpm/rpmdb.sqlite"


def test_dpkg_packages_are_what_dpkg_query_lists(debian_rootfs: Path) -> None:
    packages = load_packages(RootfsTarget(debian_rootfs))
    proc = subprocess.run(
        ["dpkg-query", f"--admindir={debian_rootfs}/var/lib/dpkg", "-W", "-f", "${Package} ${Version}\n"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert packages.manager == "dpkg" and packages.complete
    assert packages.items == expected and len(expected) > 100


def _rpm_image(root: Path, tmp: Path, specs: list[dict[str, str]]) -> Path:
    need(shutil.which("rpmbuild") is not None and shutil.which("rpm") is not None, "rpm is not installed")
    top = tmp / "rpmbuild"
    subprocess.run(["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "--initdb"], check=True)
    for spec in specs:
        path = tmp / f"{spec['name']}.spec"
        epoch = f"Epoch: {spec['epoch']}\n" if spec.get("epoch") else ""
        path.write_text(SPEC.format(**{**spec, "epoch": epoch}))
        subprocess.run(
            ["rpmbuild", "-bb", "--define", f"_topdir {top}", str(path)], check=True, capture_output=True
        )
    rpms = sorted(str(p) for p in (top / "RPMS").rglob("*.rpm"))
    subprocess.run(
        ["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "-i", "--justdb", "--nodeps", *rpms],
        check=True, capture_output=True,
    )  # fmt: skip
    with sqlite3.connect(root / RPMDB) as conn:  # the backend is sqlite, as on RHEL 9 and AL2023
        assert conn.execute("SELECT count(*) FROM Packages").fetchone()[0] == len(specs)
    return root


def _rpm_qa(root: Path) -> dict[str, str]:
    proc = subprocess.run(
        ["rpm", f"--root={root}", "--dbpath=/var/lib/rpm", "-qa", "--qf",
         "%{NAME} %|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\n"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_rpm_sqlite_packages_are_what_rpm_lists_and_nothing_is_written(tmp_path: Path) -> None:
    root = _rpm_image(
        tmp_path / "image",
        tmp_path,
        [
            {"name": "imagelint-agent", "version": "1.2.3", "release": "4.amzn2023", "epoch": "2"},
            {"name": "imagelint-tools", "version": "0.9", "release": "1.el9"},
        ],
    )
    (root / "var/lib/rpm/rpmdb.sqlite-shm").unlink(missing_ok=True)
    (root / "var/lib/rpm/rpmdb.sqlite-wal").unlink(missing_ok=True)
    before = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in (root / "var/lib/rpm").iterdir()}
    os.chmod(root / RPMDB, 0o444)  # read-only: any write attempt would fail loudly
    packages = load_packages(RootfsTarget(root))
    after = {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in (root / "var/lib/rpm").iterdir()}
    assert after == before  # no journal, -wal, -shm or lock file appeared, nothing changed
    assert packages.manager == "rpm" and packages.complete, packages.problems
    expected = {"imagelint-agent": "2:1.2.3-4.amzn2023", "imagelint-tools": "0.9-1.el9"}
    assert packages.items == expected == _rpm_qa(root)  # rpm itself (it writes -shm: so last)


def test_a_malformed_rpmdb_is_a_problem_never_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "var/lib/rpm").mkdir(parents=True)
    (root / RPMDB).write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    packages = load_packages(RootfsTarget(root))
    assert packages.manager == "rpm" and not packages.complete and "sqlite" in packages.problems[0]
    (root / RPMDB).unlink()
    with sqlite3.connect(root / RPMDB) as conn:
        conn.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB NOT NULL)")
        conn.execute("INSERT INTO Packages (blob) VALUES (?)", (struct.pack(">II", 0xFFFFFF, 0),))
        conn.execute("INSERT INTO Packages (blob) VALUES (?)", (b"abc",))
        conn.execute("INSERT INTO Packages (blob) VALUES (?)", ("text",))
    packages = load_packages(RootfsTarget(root))
    assert len(packages.problems) == 3 and packages.items == {}
    assert any("over rpm's limits" in p for p in packages.problems)


@pytest.mark.parametrize(
    "blob, why",
    [
        (
            struct.pack(">II", 1, 4) + struct.pack(">iiii", 1000, 6, 100, 1) + b"abc\0",
            "outside the data store",
        ),
        (struct.pack(">II", 1, 4) + struct.pack(">iiii", 1000, 6, 0, 1) + b"abcd", "not terminated"),
        (struct.pack(">II", 2, 0), "runs past the blob"),
        (struct.pack(">II", 1, 4) + struct.pack(">iiii", 1000, 7, 0, 1) + b"abc\0", "unexpected type"),
    ],
)
def test_header_parser_bounds(blob: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_header(blob)


def test_a_status_file_over_the_read_cap_is_incomplete(debian_rootfs: Path, tmp_path: Path) -> None:
    root = copy_rootfs(debian_rootfs, tmp_path / "rootfs")
    with open(root / "var/lib/dpkg/status", "r+b") as f:
        f.truncate(17 * 1024 * 1024)
    packages = load_packages(RootfsTarget(root))
    assert not packages.complete and packages.items == {}


# -- hostile databases: each is one line and exit 3 from the real CLI, within the memory bound ----------


def _rpmdb_with(root: Path, *statements: str) -> Path:
    os_root(root)  # the CLI audits it: an OS root's marks besides the database
    (root / "var/lib/rpm").mkdir(parents=True)
    with sqlite3.connect(root / RPMDB) as conn:
        for statement in statements:
            conn.execute(statement)
    conn.close()
    return root


def test_an_rpmdb_whose_packages_is_a_view_over_zeroblob_is_refused(tmp_path: Path) -> None:
    root = _rpmdb_with(
        tmp_path / "image",
        "CREATE TABLE t (x)",
        "CREATE VIEW Packages AS SELECT 1 AS hnum, zeroblob(900000000) AS blob",
    )
    run_cli_measured("audit", str(root)).assert_one_line(3, RPMDB, "not an ordinary table")


def test_an_rpmdb_whose_packages_is_an_endless_recursive_view_is_refused(tmp_path: Path) -> None:
    root = _rpmdb_with(
        tmp_path / "image",
        "CREATE VIEW Packages AS WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
        "SELECT n AS hnum, x'00000000' AS blob FROM c",
    )
    run_cli_measured("audit", str(root), timeout=60).assert_one_line(3, RPMDB, "refused")


@pytest.mark.parametrize(
    "statements, why",
    [
        (["CREATE TABLE Packages (hnum INTEGER, blob BLOB GENERATED ALWAYS AS (zeroblob(900000000)))",
          "INSERT INTO Packages (hnum) VALUES (1)"], "generated"),
        (["CREATE TABLE t (x)", "CREATE TRIGGER Packages AFTER INSERT ON t BEGIN SELECT 1; END"],
         "not an ordinary table"),
    ],
)  # fmt: skip
def test_a_packages_table_that_computes_is_refused(tmp_path: Path, statements: list[str], why: str) -> None:
    root = _rpmdb_with(tmp_path / "image", *statements)
    with pytest.raises(ImageReadError, match=why):
        load_packages(RootfsTarget(root))


def test_the_authorizer_lets_only_the_base_table_be_read() -> None:
    # defence in depth behind the schema check: what a view, a function or a recursive CTE needs
    guard = _Guard(RPMDB)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB)")
    conn.execute("CREATE VIEW v AS SELECT blob FROM Packages")
    conn.set_authorizer(guard.authorize)
    assert conn.execute("SELECT blob FROM Packages").fetchall() == []
    for query in [
        "SELECT zeroblob(10)",
        "SELECT blob FROM v",
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c",
        "SELECT name FROM sqlite_master",
    ]:
        with pytest.raises(sqlite3.DatabaseError, match=r"not authorized|prohibited"):
            conn.execute(query)
    conn.close()


def test_a_400_mib_sparse_rpmdb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    root = _rpm_image(
        tmp_path / "image", tmp_path, [{"name": "imagelint-agent", "version": "1", "release": "1"}]
    )
    with open(root / RPMDB, "r+b") as f:
        f.truncate(400 * 1024 * 1024)
    assert os.stat(root / RPMDB).st_blocks * 512 < 10 * 1024 * 1024  # sparse: the test costs no disk
    os_root(root)
    run_cli_measured("audit", str(root)).assert_one_line(3, RPMDB, "over the 128 MiB rpmdb limit")


@pytest.mark.parametrize(
    "unit, why",
    [(b"\n", "stanzas"), (b"a: b\n\n", "stanzas"), (b"x\n", "lines"), (b"Package: x\n", "fields")],
)
def test_a_16_mib_status_file_of_tiny_stanzas_is_refused(tmp_path: Path, unit: bytes, why: str) -> None:
    status = os_root(tmp_path / "image") / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_bytes(unit * ((16 * 1024 * 1024 - 1) // len(unit)))
    run_cli_measured("audit", str(tmp_path / "image")).assert_one_line(3, "/var/lib/dpkg/status", why)


def test_a_status_line_over_the_line_bound_is_refused() -> None:
    with pytest.raises(StanzaError, match="longer than"):
        list(parse_stanzas(b"Package: a\nDescription: " + b"x" * MAX_LINE + b"\n"))
