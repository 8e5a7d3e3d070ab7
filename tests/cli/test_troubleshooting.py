"""Every error the troubleshooting page lists is one line on stderr with its documented exit code.

Each row of docs/troubleshooting.md that names an exit code is either reproduced here (and its stderr
lines counted) or names the test that reproduces it and counts them; a new row with neither fails."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, os_root, run_cli, run_cli_measured
from tests.targets.disk import images

PAGE = REPO / "docs" / "troubleshooting.md"
ELSEWHERE = {  # row (its first words) -> the test that reproduces it and counts its stderr lines
    "reading disk images needs the optional disk extra": "tests/targets/disk/test_bad_images.py::"
    "test_a_missing_disk_extra_is_one_line_naming_it",
    "the ext4 journal needs recovery": "tests/targets/disk/test_bad_images.py::"
    "test_an_ext4_whose_journal_needs_recovery",
    "a LUKS partition": "tests/targets/disk/test_bad_images.py::test_a_luks_partition",
    "a public or shared AMI in snapshot mode": "tests/aws/test_kms.py::"
    "test_snapshot_mode_refuses_another_accounts_snapshot",
    "a denied call, a snapshot not found": "tests/aws/test_ebs_blocks.py::"
    "test_access_denied_says_what_to_check",
    "a run longer than the credentials": "tests/aws/test_faults.py::"
    "test_credentials_expire_at_is_what_the_run_is_checked_against",
    "the memory limit": "tests/cli/test_box.py::"
    "test_the_real_cli_under_a_tight_memory_limit_is_inconclusive_with_the_image_named",
    "internal error": "tests/cli/test_catch_all.py::"
    "test_an_internal_error_is_one_line_exit_3_and_names_where",
    "PATH: is a symbolic link": "tests/formats/test_outputs.py::"
    "test_a_planted_output_path_is_refused_in_one_line_and_left_alone",
    "a rule pattern runs out of time": "tests/textmatch/test_regex_budget.py::"
    "test_a_pattern_only_python_can_run_that_overruns_its_budget_is_an_error_not_a_pass",
    "not an operating system's root": "tests/openers/test_os_root.py::"
    "test_a_target_without_the_marks_of_an_os_root_is_inconclusive",
}
HERE = ("an unknown key, a waiver for an unknown rule", "a `-f FORMAT:PATH` is refused")


def _rows_with_exit_codes() -> list[str]:
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    return [row.split("|")[1].strip().strip("`") for row in rows if re.search(r"\(exit \d[,)]", row)]


def test_every_error_row_is_reproduced_somewhere() -> None:
    rows = _rows_with_exit_codes()
    assert len(rows) >= 9
    for row in rows:
        if row.startswith(HERE):
            continue
        where = next((test for start, test in ELSEWHERE.items() if row.startswith(start)), None)
        assert where is not None, f"no test reproduces the troubleshooting row {row!r}"
        path, _, name = where.partition("::")
        source = (REPO / path).read_text(encoding="utf-8")
        assert f"def {name}(" in source, where


def test_a_config_error_is_one_line_with_file_line_column(tmp_path: Path) -> None:
    config = tmp_path / "imagelint.yaml"
    config.write_text(
        "fail-on: high\nwaivers:\n  - rule: IL999\n    reason: an old image\n    expires: 2027-01-01\n"
    )
    (tmp_path / "etc").mkdir()
    run = run_cli_measured("audit", str(tmp_path), "-c", str(config))
    run.assert_one_line(2, f"{config}:3:")


def test_an_output_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    run = run_cli_measured("audit", str(tmp_path), "-f", f"json:{tmp_path}/no/such/dir/r.json")
    run.assert_one_line(2, "no/such/dir")
    assert not (tmp_path / "no").exists()


def test_several_root_filesystems_name_the_partitions_and_the_option(tmp_path: Path) -> None:
    filesystems = []
    for name in ("a", "b"):
        tree = os_root(tmp_path / f"tree-{name}", {"/etc/os-release": f"ID={name}\n"})
        fs = tmp_path / f"{name}.ext4"
        subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(tree), str(fs), "16M"], check=True)
        filesystems.append(fs)
    disk = tmp_path / "two-roots.raw"
    images._partitioned(disk, "gpt", [("L", fs, 16 * images.MIB) for fs in filesystems])
    run = run_cli_measured("audit", str(disk))
    run.assert_one_line(3, "pick one with --partition N")
    assert run_cli("audit", str(disk), "--partition", "2", "--no-builtin-rules").returncode == 0


@pytest.mark.parametrize("row", HERE)
def test_the_rows_reproduced_here_are_on_the_page(row: str) -> None:
    assert any(r.startswith(row) for r in _rows_with_exit_codes()), row
