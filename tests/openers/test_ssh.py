"""``ssh://HOST`` against a real OpenSSH server: Debian's sshd in the test image (plus sudo: the
``ssh`` flavour of ``scripts/build-test-rootfs.sh``), booted with systemd-nspawn in a network
namespace of its own (``--private-network``: only a loopback). The tests reach it on that loopback by
running the real ``ssh`` client inside the namespace: ``IMAGELINT_SSH_COMMAND`` is ``nsenter -n -t
PID ssh ...``, so no address of this machine is involved, and the variable is exercised too.

One container per image for the whole module (the faulty one: the sample image's faults planted,
so ``ecs.service`` is enabled and fails at boot; the clean one: the image cleaned, its host keys made
at first boot), reached as root and as ``tester``, a login with passwordless sudo.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _test_image
from tests.nspawn import booted
from tests.support import as_a_foreground_job, clean_image, copy_rootfs, run_cli, wait_for

# the lane (tests/conftest.py): the hosts' soaks and a collector's deadline are waited out
pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.lane]

# Files a boot itself writes (machine-id, journal, random seed, host keys made at first boot): a
# booted host always has them, so the clean host is judged without these hygiene rules.
BOOT_ARTIFACTS = "IL101,IL102,IL112,IL115"
ACCESS = "IL104"  # the authorized_keys this test logs in with are baked into the image, rightly found
SCRATCH = "var/tmp"


@pytest.fixture(scope="module")
def ssh_image() -> Path:
    return _test_image("ssh", "bookworm-ssh")


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = tmp_path_factory.mktemp("client") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


def _authorize(root: Path, home: str, key: Path, owner: str) -> None:
    ssh = root / home.lstrip("/") / ".ssh"
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    (ssh / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    (ssh / "authorized_keys").chmod(0o600)
    subprocess.run(["chroot", str(root), "chown", "-R", f"{owner}:{owner}", f"{home}/.ssh"], check=True)


def _host_tree(src: Path, dest: Path, key: Path, *, faulty: bool) -> Path:
    from tests.aws.disk_image import plant_sample_faults

    root = copy_rootfs(src, dest)
    if faulty:
        plant_sample_faults(root)
        # the planted ed25519 host key is not a key: sshd serves the image's other ones
    else:
        clean_image(root)  # no host keys: made at first boot, as cloud images do
        dropin = root / "etc/systemd/system/ssh.service.d"
        dropin.mkdir(parents=True, exist_ok=True)
        (dropin / "host-keys.conf").write_text(
            "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n"
        )
    # a password field that is not a lock ("!"): the faulty image's sshd_config has no UsePAM
    subprocess.run(["chroot", str(root), "useradd", "-m", "-s", "/bin/sh", "-p", "*", "tester"], check=True)
    (root / "etc/sudoers.d/tester").write_text("tester ALL=(ALL) NOPASSWD: ALL\n")
    (root / "etc/sudoers.d/tester").chmod(0o440)
    _authorize(root, "/root", key, "root")
    _authorize(root, "/home/tester", key, "tester")
    return root


class Host:
    """A booted image and how to reach it: the ssh command line and its known_hosts."""

    def __init__(self, root: Path, prefix: list[str], netns: str, port: int, key: Path, work: Path) -> None:
        self.root, self.prefix, self.netns, self.key = root, prefix, netns, key
        self.address = "127.0.0.1" if port == 22 else f"127.0.0.1:{port}"
        self.known_hosts = work.with_name(f"{work.name}-known_hosts")
        name = "127.0.0.1" if port == 22 else f"[127.0.0.1]:{port}"
        keys = sorted((root / "etc/ssh").glob("ssh_host_*_key.pub"))
        lines = [f"{name} {' '.join(k.read_text().split()[:2])}" for k in keys if "ed25519" not in k.name]
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def spec(self, user: str = "root") -> str:
        return f"ssh://{user}@{self.address}"

    def command(self, known_hosts: Path | None = None) -> str:
        return (
            f"nsenter -n -t {self.netns} ssh -F none -T -o BatchMode=yes -o IdentitiesOnly=yes "
            f"-i {self.key} -o UserKnownHostsFile={known_hosts or self.known_hosts} "
            "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o ConnectTimeout=20 "
            "-o HostKeyAlgorithms=ecdsa-sha2-nistp256,rsa-sha2-512,rsa-sha2-256"
        )

    def cli(self, *args: str, known_hosts: Path | None = None, timeout: float = 300):
        return run_cli(*args, env={"IMAGELINT_SSH_COMMAND": self.command(known_hosts)}, timeout=timeout)

    def scratch_left(self) -> list[str]:
        return sorted(p.name for p in (self.root / SCRATCH).glob("imagelint.*"))


def _ready(prefix: list[str]) -> bool:
    proc = subprocess.run([*prefix, "systemctl", "is-active", "ssh.service"], capture_output=True, text=True)
    return proc.stdout.strip() == "active"


@pytest.fixture(scope="module")
def hosts(
    ssh_image: Path, client_key: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Host]]:
    """Both hosts in one network namespace the test makes (the faulty one's): sshd on its loopback,
    port 22 for the faulty host, 2222 for the clean one."""
    work = tmp_path_factory.mktemp("ssh-hosts")
    faulty = _host_tree(ssh_image, work / "faulty", client_key, faulty=True)
    clean = _host_tree(ssh_image, work / "clean", client_key, faulty=False)
    (clean / "etc/ssh/sshd_config.d/port.conf").write_text("Port 2222\n")
    boot = {"volatile": False, "ready": _ready, "timeout": 120}
    with booted(faulty, name="f", network=("--private-network",), **boot) as fp:  # type: ignore[arg-type]
        netns = f"--network-namespace-path=/proc/{fp[2]}/ns/net"
        with booted(clean, name="c", network=(netns,), **boot) as cp:  # type: ignore[arg-type]
            yield {
                "faulty": Host(faulty, fp, fp[2], 22, client_key, work / "f"),
                "clean": Host(clean, cp, fp[2], 2222, client_key, work / "c"),
            }


def _findings(path: Path) -> set[tuple[str, str]]:
    return {(f["rule_id"], f["subject"]) for f in json.loads(path.read_text())["findings"]}


def _assert_same_findings(one: Path, other: Path) -> None:
    """The same findings, but for the manager's state, which moves between two collections
    (ecs.service restarting, then failed): there the live rules name the same unit."""
    live = {"IL211", "IL212"}
    a, b = _findings(one), _findings(other)
    assert {f for f in a if f[0] not in live} == {f for f in b if f[0] not in live}
    assert {s for r, s in a if r in live} == {s for r, s in b if r in live} == {"ecs.service"}


@pytest.fixture(scope="module")
def faulty_over_ssh(hosts: dict[str, Host], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The faulty host audited over ssh as root: its JSON report (exit 1 asserted)."""
    out = tmp_path_factory.mktemp("faulty-over-ssh") / "report.json"
    proc = hosts["faulty"].cli("audit", hosts["faulty"].spec(), "-f", f"json:{out}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    return out


def test_faulty_host_fails_naming_ecs_from_the_image_and_the_manager(
    hosts: dict[str, Host], faulty_over_ssh: Path
) -> None:
    report = json.loads(faulty_over_ssh.read_text())
    ecs = {f["rule_id"] for f in report["findings"] if f["subject"] == "ecs.service"}
    assert {"IL201", "IL203"} <= ecs, ecs  # the image: enabled, its executable missing
    assert ecs & {"IL211", "IL212"}, ecs  # the running manager: failed or restarting
    assert report["target"]["path"] == "ssh://root@127.0.0.1"
    assert hosts["faulty"].scratch_left() == []
    cost = report["facts"]["bundle"]["cost"]  # what the collector cost the host, phase by phase
    assert [p["phase"] for p in cost["phases"]] == ["show", "paths", "references", "classify", "tar"]
    assert cost["cpu_seconds"] > 0


def test_the_result_equals_auditing_the_same_hosts_bundle(
    hosts: dict[str, Host], faulty_over_ssh: Path, tmp_path: Path
) -> None:
    host = hosts["faulty"]
    over_ssh = faulty_over_ssh
    # the documented manual path: write the collector, run it on the host, judge its bundle here
    gate = host.root / "var/tmp/gate"
    assert run_cli("collector", str(gate)).returncode == 0
    ran = subprocess.run(
        [*host.prefix, "sh", "/var/tmp/gate/collect.sh", "/var/tmp/gate"], capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    bundle = host.root / ran.stdout.strip().lstrip("/")
    from_bundle = tmp_path / "bundle.json"
    assert run_cli("audit", str(bundle), "-f", f"json:{from_bundle}").returncode == 1
    _assert_same_findings(over_ssh, from_bundle)


def test_a_clean_host_passes(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["clean"]
    out = tmp_path / "r.json"
    proc = host.cli("audit", host.spec(), "--ignore", f"{BOOT_ARTIFACTS},{ACCESS}", "-f", f"json:{out}")
    failing = [(f["rule_id"], f["subject"]) for f in json.loads(out.read_text())["findings"] if f["failing"]]
    assert proc.returncode == 0, failing
    assert host.scratch_left() == []


def test_a_changed_host_key_is_refused(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["faulty"]
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(f"127.0.0.1 {' '.join(Path(f'{other}.pub').read_text().split()[:2])}\n")
    proc = host.cli("audit", host.spec(), known_hosts=known)
    assert proc.returncode == 3, proc.stderr
    assert "host key" in proc.stderr.lower() and "Traceback" not in proc.stderr
    assert host.scratch_left() == []


def test_a_login_without_root_uses_sudo(
    hosts: dict[str, Host], faulty_over_ssh: Path, tmp_path: Path
) -> None:
    host = hosts["faulty"]
    as_root, with_sudo = faulty_over_ssh, tmp_path / "sudo.json"
    proc = host.cli("audit", host.spec("tester"), "--sudo", "-f", f"json:{with_sudo}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    _assert_same_findings(with_sudo, as_root)
    assert host.scratch_left() == []


def test_sudo_that_asks_for_a_password_is_one_line(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["clean"]
    rule = host.root / "etc/sudoers.d/tester"
    rule.write_text("tester ALL=(ALL) ALL\n")  # a password now: `sudo -n` refuses, nothing waits
    try:
        proc = host.cli("audit", host.spec("tester"), "--sudo", timeout=120)
    finally:
        rule.write_text("tester ALL=(ALL) NOPASSWD: ALL\n")
    assert proc.returncode == 3, proc.stderr
    assert "sudo" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def _collectors(host: Host) -> list[int]:
    """The collector's processes in the host's network namespace."""
    netns = os.readlink(f"/proc/{host.netns}/ns/net")
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and os.readlink(proc / "ns/net") == netns
                and b"collect.sh" in (proc / "cmdline").read_bytes()
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _soak(host: Host, tmp_path: Path, *login: str) -> subprocess.Popen[str]:
    """A 600 s soak of ``host`` over ssh as root, or as ``login`` (a user and ``--sudo``)."""
    exe = shutil.which("imagelint", path=str(Path(sys.executable).parent)) or "imagelint"
    env = {**os.environ, "IMAGELINT_SSH_COMMAND": host.command(), "NO_COLOR": "1"}
    spec = host.spec(*login[:1])
    argv = [exe, "soak", spec, *login[1:], "-d", "600s", "-i", "1s", "-f", f"json:{tmp_path / 's.json'}"]
    return subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_a_foreground_job,
    )


def _ended(run: subprocess.Popen[str], timeout: float = 120) -> tuple[str, str]:
    """The soak's stdout and stderr once it ended; killed with its children, and the test failed with
    what it said, when it did not end within ``timeout`` (left running, its collector's scratch
    directory would fail the next test of the host too)."""
    try:
        return run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        state = _session_state(run.pid)
        os.killpg(run.pid, signal.SIGKILL)
        _, err = run.communicate()
        pytest.fail(f"the soak did not end within {timeout:.0f} s; its stderr: {err[-3000:]}; {state}")


def _session_state(sid: int) -> str:
    """Each process of session ``sid``: its signal masks and dispositions, and where each thread waits."""
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.getsid(int(entry.name)) != sid:
                continue
            status = (entry / "status").read_text()
            fields = [line for line in status.splitlines() if line.startswith(("Name", "Sig", "ShdPnd"))]
            threads = [
                f"{t.name}:{(t / 'comm').read_text().strip()}:{(t / 'wchan').read_text()}"
                for t in (entry / "task").iterdir()
            ]
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:120].decode(errors="replace")
            lines.append(f"{entry.name} [{cmd}] {' '.join(fields)} threads {threads}")
        except OSError:
            continue
    return " | ".join(lines)


def test_a_collector_killed_midway_is_inconclusive(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["clean"]
    run = _soak(host, tmp_path)
    assert wait_for(lambda: bool(_collectors(host)), 60), "no collector started"
    time.sleep(2)  # midway: the soak is sampling
    pids = _collectors(host)
    killed = 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a short-lived subshell of the collector
            os.kill(pid, signal.SIGKILL)
            killed += 1
    assert killed, pids
    out, err = _ended(run)
    assert run.returncode == 3, (pids, err, out[-2000:])
    assert "collector failed" in err and "Traceback" not in err, err
    assert wait_for(lambda: host.scratch_left() == [], 10)


@pytest.mark.parametrize("login", [(), ("tester", "--sudo")], ids=["root", "sudo"])
def test_interrupted_at_home_the_host_removes_its_scratch_directory(
    hosts: dict[str, Host], tmp_path: Path, login: tuple[str, ...]
) -> None:
    host = hosts["clean"]
    run = _soak(host, tmp_path, *login)
    assert wait_for(lambda: bool(_collectors(host)), 60), "no collector started"
    assert host.scratch_left()
    run.send_signal(signal.SIGINT)
    _, err = _ended(run)
    assert run.returncode != 0 and "Traceback" not in err, err
    assert wait_for(lambda: host.scratch_left() == [] and not _collectors(host), 20)


def test_units_over_ssh_list_the_hosts_units(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["faulty"]
    over_ssh, offline = tmp_path / "ssh.json", tmp_path / "tree.json"
    proc = host.cli("units", host.spec(), "-f", f"json:{over_ssh}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert run_cli("units", str(host.root), "-f", f"json:{offline}").returncode == 0

    def states(path: Path) -> dict[str, object]:
        return {u["name"]: u["state"] for u in json.loads(path.read_text())["units"]}

    live, image = states(over_ssh), states(offline)
    assert json.loads(over_ssh.read_text())["root"] == host.spec()
    assert live["ecs.service"] == "enabled"
    # the running host's units are the image's, plus what its boot enabled at runtime (under /run)
    differ = {n for n in live.keys() | image.keys() if live.get(n) != image.get(n)}
    assert differ and all(str(live.get(n)).endswith("-runtime") for n in differ), differ


def test_a_soak_over_ssh_has_the_per_cpu_and_memcg_signals(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["clean"]
    out = tmp_path / "soak.json"
    proc = host.cli("soak", host.spec(), "-d", "6s", "-i", "1s", "-f", f"json:{out}")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    soak = json.loads(out.read_text())["facts"]["soak"]
    assert len(soak["samples"]) >= 4 and soak["layout"]  # memory cgroups, sampled on the host
    assert soak["cpu"] and soak["memory_stat_walk"]  # the per-CPU reads and the memory.stat walk
    assert not soak["cut_short"]


def test_many_hosts_give_one_report_with_a_row_each(hosts: dict[str, Host], tmp_path: Path) -> None:
    faulty, clean = hosts["faulty"], hosts["clean"]
    unreachable = "ssh://root@127.0.0.1:2200"  # nothing listens there: connection refused
    listing = tmp_path / "hosts.txt"
    listing.write_text(f"# lab\n{faulty.spec()}\n\n{clean.spec()}\n{unreachable}\n")
    both = tmp_path / "known_hosts"
    both.write_text(faulty.known_hosts.read_text() + clean.known_hosts.read_text())
    ignore = f"{BOOT_ARTIFACTS},{ACCESS}"
    out = tmp_path / "hosts.json"
    proc = faulty.cli(
        "audit",
        "--hosts",
        str(listing),
        "--parallel",
        "2",
        "--ignore",
        ignore,
        "-f",
        f"json:{out}",
        known_hosts=both,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # a failing host is not hidden by an unreachable one
    report = json.loads(out.read_text())
    rows = {r["host"]: r for r in report["facts"]["hosts"]}
    assert [r["host"] for r in report["facts"]["hosts"]] == [faulty.spec(), clean.spec(), unreachable]
    assert (rows[faulty.spec()]["coverage"], rows[faulty.spec()]["verdict"]) == ("checked", "fail")
    assert (rows[clean.spec()]["coverage"], rows[clean.spec()]["verdict"]) == ("checked", "pass")
    assert rows[unreachable]["coverage"] == "no-report" and "refused" in rows[unreachable]["reason"]
    assert f"{faulty.spec()}: ecs.service" in {f["subject"] for f in report["findings"]}
    listing.write_text(f"{unreachable}\n")
    proc = clean.cli("audit", "--hosts", str(listing), known_hosts=both)
    assert proc.returncode == 3, proc.stdout[-2000:]  # no host fails, one was not seen
    assert faulty.scratch_left() == [] and clean.scratch_left() == []


def test_a_soak_of_many_hosts_judges_each_ones_audit_and_soak(hosts: dict[str, Host], tmp_path: Path) -> None:
    clean = hosts["clean"]
    listing, out = tmp_path / "hosts.txt", tmp_path / "soak.json"
    listing.write_text(f"{clean.spec()}\n")
    proc = clean.cli("soak", "--hosts", str(listing), "-d", "4s", "-i", "1s", "-f", f"json:{out}")
    report = json.loads(out.read_text())
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert [r["coverage"] for r in report["facts"]["hosts"]] == ["checked"]
    assert {"image", "host", "soak"} <= set(report["scopes"]), report["scopes"]
