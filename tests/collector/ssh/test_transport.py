"""The transport's answers when the host cannot collect, with the real ``sh`` standing in for the
remote side (``IMAGELINT_SSH_COMMAND`` is any command line, as ``GIT_SSH_COMMAND`` is): a missing
tool is one line and inconclusive, a client that cannot run is one line, a header that is not the
collector's is refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from imagelint.collector.ssh.spec import parse
from imagelint.collector.ssh.transport import RemoteError, collect


def _path_without(tmp_path: Path, missing: str) -> str:
    """A PATH with the collector's tools linked in, ``missing`` left out."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "tar", "mktemp", "stat", "readlink", "sort", "comm", "systemctl", "cat", "wc", "tr"):
        found = shutil.which(tool)
        if tool != missing and found:
            os.symlink(found, bin_dir / tool)
    return str(bin_dir)


@pytest.mark.parametrize("missing", ["tar", "systemctl"])
def test_a_host_without_a_tool_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    path = _path_without(tmp_path, missing)
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", f"env PATH={path} sh -c 'exec sh -s' remote")
    with pytest.raises(RemoteError, match=f"the host has no {missing}"):
        collect(parse("ssh://h"), "show 1\n", tmp_path, sudo=False, timeout=60)
    assert list(tmp_path.glob("bundle*")) == []


def test_a_client_that_does_not_exist_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", str(tmp_path / "no-such-ssh"))
    with pytest.raises(RemoteError, match="cannot run the ssh client"):
        collect(parse("ssh://h"), "", tmp_path, sudo=False, timeout=60)


def test_an_answer_that_is_not_the_collectors_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "IMAGELINT_SSH_COMMAND", "sh -c 'printf \"imagelint-ssh 1 ok 99999999999999\\n\"' remote"
    )
    with pytest.raises(RemoteError, match="no bundle size"):
        collect(parse("ssh://h"), "", tmp_path, sudo=False, timeout=60)


def test_a_bundle_cut_short_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", "sh -c 'printf \"imagelint-ssh 1 ok 1000\\nabc\"' remote")
    with pytest.raises(RemoteError, match="ended after 3 of 1,000 bytes"):
        collect(parse("ssh://h"), "", tmp_path, sudo=False, timeout=60)


def test_a_host_that_never_answers_is_stopped_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", "sh -c 'exec sleep 600' remote")
    with pytest.raises(RemoteError, match="no bundle within 1 s; stopped"):
        collect(parse("ssh://h"), "", tmp_path, sudo=False, timeout=1)


def test_a_bundle_given_up_does_not_leave_the_client_blocked_until_it_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle the runner refuses (here: over MAX_BUNDLE; a full scratch space is the same path) is
    not read. The client still has the rest to deliver, as ssh has what the host already sent: the
    runner closes its end of the stream, so the client's next write fails and it ends by itself,
    instead of blocking on a pipe no one reads until AFTER_CLOSE has passed and it is killed."""
    import subprocess

    from imagelint.collector import MAX_BUNDLE

    header = f"imagelint-ssh 1 ok {MAX_BUNDLE + 1}"
    monkeypatch.setenv("IMAGELINT_SSH_COMMAND", f"sh -c 'echo {header}; exec cat /dev/zero' remote")
    killed: list[object] = []
    kill = subprocess.Popen.kill
    monkeypatch.setattr(subprocess.Popen, "kill", lambda self: (killed.append(self.args), kill(self))[-1])
    with pytest.raises(RemoteError, match="not read"):
        collect(parse("ssh://h"), "", tmp_path, sudo=False, timeout=300)
    assert killed == []
