"""``--hosts FILE``: every line checked before any host is reached; one host's bundle that the local
scratch space cannot hold is that host's row (the real hosts of ``tests/openers/test_ssh.py``)."""

from __future__ import annotations

from pathlib import Path

# the booted ssh hosts of tests/openers/test_ssh.py (booted again for this module)
from tests.openers.test_ssh import ACCESS, BOOT_ARTIFACTS, Host, client_key, hosts, ssh_image  # noqa: F401
from tests.support import need, run_cli


def test_a_bad_line_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    listing = tmp_path / "hosts.txt"
    listing.write_text("# lab\nssh://root@10.0.0.7\nssh://-oProxyCommand=id\n")
    proc = run_cli("audit", "--hosts", str(listing))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"imagelint: error: {listing}:3: ") and len(proc.stderr.splitlines()) == 1


def test_an_empty_list_and_a_target_beside_it_are_refused(tmp_path: Path) -> None:
    listing = tmp_path / "hosts.txt"
    listing.write_text("# nothing\n\n")
    assert run_cli("audit", "--hosts", str(listing)).returncode == 2
    listing.write_text("ssh://h\n")
    proc = run_cli("audit", "/", "--hosts", str(listing), "--live")
    assert proc.returncode == 2 and "not both" in proc.stderr


JUNK = "var/log/journal/imagelint-test-junk/junk.journal"  # the collector brings journals home whole


def test_a_host_whose_bundle_would_fill_the_scratch_space_is_its_row(
    hosts: dict[str, Host],  # noqa: F811
    tmp_path: Path,
) -> None:
    """Issue 47, item 4: the local scratch space (TMPDIR, a 40 MiB tmpfs here) cannot hold the faulty
    host's bundle (48 MiB that do not compress, in a journal file): that host is an inconclusive
    row naming the space, the clean host is judged, the report is written, exit 3. Before the fix
    the bundle was saved until ENOSPC and the run ended in an OSError, exit 3, no report."""
    import json
    import os
    import subprocess

    need(os.geteuid() == 0, "mounting a tmpfs as the scratch space needs root")
    faulty, clean = hosts["faulty"], hosts["clean"]
    junk = faulty.root / JUNK
    junk.parent.mkdir(parents=True, exist_ok=True)
    junk.write_bytes(os.urandom(48 * 1024 * 1024))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m,mode=1777", "tmpfs", str(scratch)], check=True)
    try:
        listing = tmp_path / "hosts.txt"
        listing.write_text(f"{faulty.spec()}\n{clean.spec()}\n")
        both = tmp_path / "known_hosts"
        both.write_text(faulty.known_hosts.read_text() + clean.known_hosts.read_text())
        out = tmp_path / "hosts.json"
        proc = run_cli(
            "audit", "--hosts", str(listing), "--parallel", "2", "--ignore", f"{BOOT_ARTIFACTS},{ACCESS}",
            "-f", f"json:{out}", timeout=300,
            env={"IMAGELINT_SSH_COMMAND": faulty.command(both), "TMPDIR": str(scratch)},
        )  # fmt: skip
        left = sorted(p.name for p in scratch.iterdir())
    finally:
        subprocess.run(["umount", str(scratch)], check=False)
        junk.unlink()
        junk.parent.rmdir()
    assert proc.returncode == 3, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {r["host"]: r for r in report["facts"]["hosts"]}
    assert rows[faulty.spec()]["coverage"] == "no-report"
    assert "no room for its bundle in the local scratch space" in rows[faulty.spec()]["reason"]
    assert (rows[clean.spec()]["coverage"], rows[clean.spec()]["verdict"]) == ("checked", "pass")
    assert [e["where"] for e in report["errors"]] == [faulty.spec()]
    assert left == []  # every host's scratch removed
    assert faulty.scratch_left() == [] and clean.scratch_left() == []  # and the hosts' own
