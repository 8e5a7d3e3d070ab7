"""A report given to ``audit --baseline`` or ``diff`` is hostile input: each way of making it costly
(size, depth, values, non-finite numbers, a FIFO or a device instead of a file) is one line and
exit 3 from the real CLI, naming the file, quickly and within the memory bound."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from imagelint.errors import TargetError
from imagelint.report.reading import MAX_DEPTH, MAX_VALUES, read_report_dict
from tests.formats.ci_helpers import sample_image
from tests.support import MAX_RSS_MIB, run_cli, run_cli_measured


@pytest.fixture(scope="module")
def image_and_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("sample")
    image = sample_image(tmp / "image")
    proc = run_cli("audit", str(image), "-f", f"json:{tmp / 'report.json'}")
    assert proc.returncode == 1, proc.stderr  # the sample fails: it has findings to carry evidence
    report = json.loads((tmp / "report.json").read_text())
    read_report_dict(tmp / "report.json")  # the good one is read
    return image, report


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def _with_evidence(report: dict, evidence: object, path: Path) -> Path:
    report = json.loads(json.dumps(report))
    report["findings"][0]["evidence"] = evidence
    path.write_text(json.dumps(report, allow_nan=True))
    return path


def _hostile(kind: str, report: dict, tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / f"{kind}.json"
    if kind == "40-mb":
        path.write_text(json.dumps(report))
        with open(path, "r+b") as f:
            f.truncate(40 * 1024 * 1024)  # sparse: refused from its size, before it is read
        return path, "larger than 8 MiB"
    if kind == "600-deep":
        return _with_evidence(report, _nested(600), path), f"nested more than {MAX_DEPTH} levels"
    if kind == "nan":
        return _with_evidence(report, {"ratio": float("nan")}, path), "NaN is not a JSON number"
    if kind == "infinity":
        return _with_evidence(report, {"ratio": float("inf")}, path), "Infinity is not a JSON number"
    if kind == "overflowing-float":
        path.write_text(json.dumps(report).replace('"findings": [', '"findings": [1e999, ', 1))
        return path, "overflows a float"
    if kind == "huge-integer":
        path.write_text(json.dumps(report).replace('"findings": [', '"findings": [' + "9" * 5000 + ", ", 1))
        return path, "an integer of 5,000 digits"
    if kind == "many-values":
        return _with_evidence(report, [[] for _ in range(MAX_VALUES + 1)], path), "more than"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking open would never return
        return path, "not a regular file"
    raise AssertionError(kind)


KINDS = ["40-mb", "600-deep", "nan", "infinity", "overflowing-float", "huge-integer", "many-values", "fifo"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_baseline_is_one_line_and_exit_3(
    image_and_report: tuple[Path, dict], tmp_path: Path, kind: str
) -> None:
    image, report = image_and_report
    bad, why = _hostile(kind, report, tmp_path)
    run_cli_measured("audit", str(image), "--baseline", str(bad), timeout=60).assert_one_line(
        3, str(bad), why
    )


def test_a_missing_baseline_is_bad_usage_as_a_missing_config_is(
    image_and_report: tuple[Path, dict], tmp_path: Path
) -> None:
    image, _ = image_and_report
    missing = tmp_path / "missing.json"
    run_cli_measured("audit", str(image), "--baseline", str(missing), timeout=60).assert_one_line(
        2, str(missing), "no such file"
    )
    run_cli_measured("audit", str(image), "-c", str(tmp_path / "missing.yaml"), timeout=60).assert_one_line(
        2, "missing.yaml", ""
    )


@pytest.mark.parametrize("kind", ["40-mb", "600-deep", "nan"])
def test_a_hostile_report_side_of_diff_is_one_line_and_exit_3(
    image_and_report: tuple[Path, dict], tmp_path: Path, kind: str
) -> None:
    image, report = image_and_report
    bad, why = _hostile(kind, report, tmp_path)
    run_cli_measured("diff", str(bad), str(image), timeout=60).assert_one_line(3, str(bad), why)


def test_a_device_is_refused_before_it_is_opened() -> None:
    with pytest.raises(TargetError, match="not a regular file"):
        read_report_dict(Path("/dev/zero"))


def test_a_costly_report_within_the_bounds_is_read_within_the_memory_bound(
    image_and_report: tuple[Path, dict], tmp_path: Path
) -> None:
    # just under MAX_VALUES small strings: the most Python objects a report within the bounds makes
    image, report = image_and_report
    costly = _with_evidence(report, {"v": ["ab"] * (MAX_VALUES * 2 - 10_000)}, tmp_path / "costly.json")
    measured = run_cli_measured("audit", str(image), "--baseline", str(costly), timeout=60)
    assert measured.returncode == 1, measured.stderr  # read: the sample's findings fail as before
    assert measured.peak_mib <= MAX_RSS_MIB, f"{measured.peak_mib:.0f} MiB"
