"""``--hosts FILE``: every line checked before any host is reached (the real hosts are in
``tests/openers/test_ssh.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.support import run_cli


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
