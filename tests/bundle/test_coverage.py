"""A bundle fails closed: a path missing from it reads as absent only where the collector looked.

The collector records each glob it expanded (``asked``) and each link target it found missing
(``absent``); :class:`imagelint.bundle.coverage.Coverage` decides from those whether a missing path
is known to be absent. A check kind that declares too few paths reads "not collected" from a real
bundle (the rule is inconclusive), where the same rule on the directory finds the path absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagelint.bundle.coverage import Coverage
from imagelint.checks import registry
from imagelint.rulepacks import load_packs
from tests.collector.support import bundle_report, collect, directory_report, outcomes

RULE = """\
pack:
  name: user
rules:
  - id: USR001
    name: app-config-present
    title: the application's configuration is baked in
    description: a user rule on a path the built-in rules never read
    severity: high
    scope: [image]
    check:
      kind: file.present
      paths: [/opt/app/app.conf]
    message: "{path} is baked into the image"
    remediation: remove it
"""


def test_coverage_reads_absent_only_what_the_collector_looked_for() -> None:
    coverage = Coverage(
        [("C", "/etc/ssh/sshd_config"), ("T", "/etc/systemd/system"), ("M", "/etc/ssh/ssh_host_*_key")],
        absent=["/usr/lib/missing-target"],
    )
    covered = [
        "/etc/ssh/sshd_config",  # asked
        "/etc",  # on the way to an asked path
        "/",
        "/etc/systemd/system/a.service.d/x.conf",  # below a walked tree
        "/etc/ssh/ssh_host_rsa_key",  # matches a wildcard glob
        "/usr/lib/missing-target",  # a link target found missing
    ]
    not_covered = ["/opt/app/app.conf", "/etc/ssh/sshd_config.d/x.conf", "/etc/ssh/moduli", "/usr/lib"]
    assert [p for p in covered if not coverage.covers(p)] == []
    assert [p for p in not_covered if coverage.covers(p)] == []


@pytest.fixture()
def app_image(tmp_path: Path) -> Path:
    root = tmp_path / "image"
    (root / "etc").mkdir(parents=True)
    (root / "opt").mkdir()  # /opt/app/app.conf is absent: the rule passes on the directory
    return root


def test_a_rule_whose_kind_declares_its_path_agrees_with_the_directory(
    app_image: Path, tmp_path: Path
) -> None:
    pack = tmp_path / "user.yaml"
    pack.write_text(RULE)
    packs = load_packs([pack])
    bundle = collect(app_image, tmp_path / "work", packs=packs)
    assert outcomes(directory_report(app_image, packs=packs)) == {"USR001": "pass"}
    assert outcomes(bundle_report(bundle, packs=packs)) == {"USR001": "pass"}


def test_a_kind_that_declares_too_little_is_inconclusive_not_absent(
    app_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = tmp_path / "user.yaml"
    pack.write_text(RULE)
    packs = load_packs([pack])
    monkeypatch.setattr(type(registry()["file.present"]), "paths", lambda self, params: [])
    bundle = collect(app_image, tmp_path / "work", packs=packs)
    report = bundle_report(bundle, packs=packs)
    assert outcomes(report) == {"USR001": "error"}
    [result] = report.rules
    assert "/opt" in result.reason and "not collected" in result.reason, result.reason
    assert report.verdict.value == "inconclusive"
