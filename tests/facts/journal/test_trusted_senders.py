"""Who sent a restart record: only journald's trusted fields decide (``_PID=1`` and ``_UID=0`` for the
system manager), never the fields a client writes.

Any user can log ``MESSAGE_ID=5eb0…``, ``UNIT=`` and ``N_RESTARTS=`` with ``logger --journald`` or
``systemd-cat``; journald then adds the underscore fields from the kernel's credentials. The journals
here are written by the real ``systemd-journal-remote`` from export format, which keeps the underscore
fields as given, so genuine and forged records sit side by side with the same client fields.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagelint.facts.journal import analyze_restarts, open_directory
from imagelint.facts.journal.window import restarts_logged_between
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.journal.conftest import have_tools
from tests.facts.journal.exportgen import PID1, Host, forger, user_manager, write_journal
from tests.support import os_root, run_cli


def _cycles(host: Host, unit: str, n: int) -> bytes:
    return b"".join(b"".join(host.crash_cycle(unit, unit.split(".")[0], i)) for i in range(1, n + 1))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image whose journal holds PID 1's crash loop of real.service (3 turns) and a user manager's
    of app.service (4), among forgeries by uid 1000 of every record the analysis counts, for
    real.service and for others."""
    have_tools()
    host = Host(21)
    host.new_boot(1_736_000_000_000_000)
    export = _cycles(host, "real.service", 3)
    host.sender = forger(4242, 1000)
    export += _cycles(host, "victim.service", 30) + _cycles(host, "real.service", 5)
    export += b"".join(host.start_limit("limit.service", "limit", text_only=False))
    export += b"".join(host.start_limit("limit-text.service", "limit", text_only=True))
    host.sender = forger(1, 1000)  # PID 1 of a PID namespace, or a lie: not root, not the manager
    export += _cycles(host, "ns.service", 6)
    host.sender = forger(4243, 1000, unit_field="USER_UNIT")
    export += _cycles(host, "fake-user.service", 6)
    host.sender = user_manager(1500, 1000)
    export += _cycles(host, "app.service", 4)
    host.sender = PID1
    root = os_root(tmp_path_factory.mktemp("mixed") / "image")
    write_journal(export, root / "var/log/journal")
    return root


def test_only_pid1_and_user_managers_are_counted(mixed: Path) -> None:
    with open_directory(mixed / "var/log/journal") as journal:
        report = analyze_restarts(journal)
    units = {(u.unit, u.manager): u for u in report.units}
    assert set(units) == {("real.service", "system"), ("app.service", "user")}, sorted(units)
    real = units[("real.service", "system")]
    assert real.restarts == 3 and real.max_n_restarts == 3 and real.failures_total == 3
    assert real.last_exit is not None
    assert units[("app.service", "user")].restarts == 4
    assert report.untrusted > 0


def test_the_soak_cites_only_genuine_restarts(mixed: Path) -> None:
    """What a soak cites from the journal for its window (``restarts_logged_between``)."""
    counts, _note = restarts_logged_between(RootfsTarget(mixed), 1_700_000_000, 1_800_000_000)
    assert counts == {"app.service": 4, "real.service": 3}


@pytest.fixture(scope="module")
def forged_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image whose journal holds a 30-turn crash loop of victim.service, all of it logged by uid 1000."""
    have_tools()
    host = Host(22, forger(4242, 1000))
    host.new_boot(1_736_000_000_000_000)
    root = os_root(tmp_path_factory.mktemp("forged") / "image")
    write_journal(_cycles(host, "victim.service", 30), root / "var/log/journal")
    return root


def test_a_forged_restart_loop_does_not_fail_the_audit(forged_only: Path) -> None:
    proc = run_cli("audit", str(forged_only), "--select", "pack:journal", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert not json.loads(proc.stdout)["findings"]


@pytest.fixture(scope="module")
def pid1_of_another_uid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """An image whose journal holds PID 1's crash loop of real.service in one boot, and in a second
    boot only the start-limit text line (no MESSAGE_ID) of a PID 1 that is not root (a namespace's)."""
    have_tools()
    host = Host(23)
    genuine = host.new_boot(1_736_000_000_000_000)
    export = _cycles(host, "real.service", 3)
    host.new_boot(1_736_100_000_000_000)
    host.sender = forger(1, 1000)
    export += host.pid1(
        "limit-text.service", "Start request repeated too quickly.", code_func="unit_test_start_limit"
    )
    root = os_root(tmp_path_factory.mktemp("pid1-uid") / "image")
    write_journal(export, root / "var/log/journal")
    return root, genuine


def test_a_text_record_of_pid1_under_another_uid_is_no_candidate(
    pid1_of_another_uid: tuple[Path, str],
) -> None:
    """The text patterns are looked up by ``_PID=1`` alone and ``_UID=0`` is checked on each entry:
    an entry failing it is not a candidate, so it is neither counted nor untrusted, and its boot is
    not one the analysis saw (as when ``_UID=0`` was an index term)."""
    root, genuine = pid1_of_another_uid
    with open_directory(root / "var/log/journal") as journal:
        report = analyze_restarts(journal)
    assert [(u.unit, u.start_limit_hits) for u in report.units] == [("real.service", 0)]
    assert report.untrusted == 0
    assert report.boots == [genuine]
