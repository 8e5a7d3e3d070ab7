"""``ssh://`` specs: what is accepted, what is refused (one line, exit 2), and that the destination
reaches the client after ``--`` as one argument, never through a shell."""

from __future__ import annotations

import pytest

from imagelint.collector.ssh.spec import HostSpec, parse
from imagelint.collector.ssh.transport import DEFAULT_COMMAND, command_line
from imagelint.errors import UsageError
from tests.support import run_cli


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("ssh://build-7.lab", HostSpec("build-7.lab")),
        ("ssh://admin@10.0.0.7:2222", HostSpec("10.0.0.7", "admin", 2222)),
        ("ssh://root@[::1]:22", HostSpec("::1", "root", 22)),
        ("ssh://lab_alias", HostSpec("lab_alias")),
    ],
)
def test_a_host_spec_is_parsed(spec: str, parsed: HostSpec) -> None:
    assert parse(spec) == parsed
    assert str(parsed) == spec


@pytest.mark.parametrize(
    "spec",
    [
        "ssh://-oProxyCommand=touch%20x",
        "ssh://host -oProxyCommand=x",
        "ssh://$(id)@host",
        "ssh://-l@host",
        "ssh://host/path",
        "ssh://host:0",
        "ssh://host:70000",
        "ssh://host;id",
        "ssh://ho\nst",
        "ssh://",
    ],
)
def test_a_hostile_spec_is_refused(spec: str) -> None:
    with pytest.raises(UsageError):
        parse(spec)


def test_the_destination_comes_after_the_end_of_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMAGELINT_SSH_COMMAND", raising=False)
    argv = command_line(parse("ssh://admin@h:2222"), sudo=True)
    assert argv == [*DEFAULT_COMMAND, "-p", "2222", "--", "admin@h", "sudo -n sh -s"]
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", "ssh -F '/my config' -J jump")
    assert command_line(parse("ssh://h"), sudo=False) == [
        "ssh",
        "-F",
        "/my config",
        "-J",
        "jump",
        "--",
        "h",
        "sh -s",
    ]


def test_a_bad_spec_on_the_command_line_is_one_line_and_exit_2() -> None:
    proc = run_cli("audit", "ssh://-oProxyCommand=id")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_sudo_is_for_ssh_hosts_only() -> None:
    proc = run_cli("audit", "/", "--sudo")
    assert proc.returncode == 2 and "--sudo" in proc.stderr, proc.stderr


def test_a_client_given_by_the_caller_replaces_the_users_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", "ssh -J jump")
    client = ["ssh", "-F", "/dev/null", "-p", "2200"]
    argv = command_line(parse("ssh://root@127.0.0.1"), sudo=False, client=client)
    assert argv == ["ssh", "-F", "/dev/null", "-p", "2200", "--", "root@127.0.0.1", "sh -s"]
