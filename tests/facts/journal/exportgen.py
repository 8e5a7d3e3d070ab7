"""Build journal *export format* streams and turn them into real journal files.

The binary journals in the tests are written by the real ``systemd-journal-remote`` from export
format produced here; the expected answers always come from the real ``journalctl``. Nothing here
knows the binary format.

``scenario()`` lays out a realistic host history: several boots, a unit that crash-loops every 10 s
through the whole boot (exit → failure → scheduled restart → start), one that trips its start limit
(both the systemd 252 text-only form and the ``start-limit-hit`` result), kubelet-like noise, kernel
messages (ENA resets, NETDEV WATCHDOG, soft lockups), large compressible fields, binary values,
control characters, newlines and repeated fields.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import need

JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
RESTART_ID = "5eb03494b6584870a536b337290809b3"
FAILED_ID = "d9b373ed55a64feb8242e02dbe79a49c"
EXITED_ID = "98e322203f7a4ed290d09fe03c09fe15"
STARTED_ID = "39f53479d3a045ac8e11786248231fbf"
MACHINE_ID = "5c1f1f3c2c9d4ad3b8f3e4a7d9a0b111"

Field = tuple[str, str | bytes]


@dataclass(frozen=True)
class Sender:
    """Who logs a service manager's records: the trusted fields journald adds (``_PID``, ``_UID``,
    the cgroup...) and the field naming the unit (``UNIT`` for the system manager, ``USER_UNIT`` for a
    user's). Export format carries underscore fields as given, so a test can write any sender."""

    trusted: tuple[Field, ...]
    unit_field: str = "UNIT"


PID1 = Sender(
    (
        ("_TRANSPORT", "journal"),
        ("_PID", "1"),
        ("_UID", "0"),
        ("_GID", "0"),
        ("_COMM", "systemd"),
        ("_EXE", "/usr/lib/systemd/systemd"),
        ("_CMDLINE", "/sbin/init"),
        ("_CAP_EFFECTIVE", "1ffffffffff"),
        ("_SYSTEMD_CGROUP", "/init.scope"),
        ("_SYSTEMD_UNIT", "init.scope"),
        ("_SYSTEMD_SLICE", "-.slice"),
    )
)


def user_manager(pid: int, uid: int) -> Sender:
    """A user's ``systemd --user`` (in ``user@UID.service/init.scope``), which logs ``USER_UNIT=``."""
    return Sender(
        (
            ("_TRANSPORT", "journal"),
            ("_PID", str(pid)),
            ("_UID", str(uid)),
            ("_GID", str(uid)),
            ("_COMM", "systemd"),
            ("_EXE", "/usr/lib/systemd/systemd"),
            ("_CMDLINE", "/lib/systemd/systemd --user"),
            ("_SYSTEMD_CGROUP", f"/user.slice/user-{uid}.slice/user@{uid}.service/init.scope"),
            ("_SYSTEMD_UNIT", f"user@{uid}.service"),
            ("_SYSTEMD_USER_UNIT", "init.scope"),
            ("_SYSTEMD_SLICE", f"user-{uid}.slice"),
            ("_SYSTEMD_OWNER_UID", str(uid)),
        ),
        unit_field="USER_UNIT",
    )


def forger(pid: int, uid: int, *, unit_field: str = "UNIT") -> Sender:
    """An unprivileged user's ``logger --journald`` or ``systemd-cat`` in a login session, writing a
    manager's fields (``MESSAGE_ID``, ``UNIT``...) into its own entries: journald still adds the truth."""
    return Sender(
        (
            ("_TRANSPORT", "journal"),
            ("_PID", str(pid)),
            ("_UID", str(uid)),
            ("_GID", str(uid)),
            ("_COMM", "logger"),
            ("_EXE", "/usr/bin/logger"),
            ("_CMDLINE", "logger --journald"),
            ("_SYSTEMD_CGROUP", f"/user.slice/user-{uid}.slice/session-3.scope"),
            ("_SYSTEMD_UNIT", "session-3.scope"),
            ("_SYSTEMD_SLICE", f"user-{uid}.slice"),
            ("_SYSTEMD_OWNER_UID", str(uid)),
            ("_SYSTEMD_SESSION", "3"),
        ),
        unit_field=unit_field,
    )


def need_journal_remote() -> None:
    """Skip the calling test where systemd-journal-remote, the writer of every journal here, is absent."""
    need(
        os.access(JOURNAL_REMOTE, os.X_OK),
        f"{JOURNAL_REMOTE} is not installed (package systemd-journal-remote)",
    )


def export_entry(fields: list[Field]) -> bytes:
    """One entry in journal export format (binary-safe form for bytes and multi-line values)."""
    out = bytearray()
    for name, value in fields:
        raw = value.encode() if isinstance(value, str) else value
        if isinstance(value, bytes) or b"\n" in raw:
            out += name.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
        else:
            out += name.encode() + b"=" + raw + b"\n"
    out += b"\n"
    return bytes(out)


def write_journal(
    export: bytes | Iterator[bytes],
    out_dir: Path,
    *,
    legacy: bool = False,
    compress: bool = True,
    name: str = "system.journal",
    max_file_size: int | None = None,
) -> Path:
    """Feed export format to systemd-journal-remote; return the directory holding the file(s).

    ``legacy`` asks for the pre-246 layout (Jenkins hash, 64-bit offsets) via the environment
    variables systemd 252 honours. Files land in ``out_dir/MACHINE_ID/``.

    ``max_file_size`` (bytes, about) makes the writer rotate to a new file at that size, as journald
    does. systemd 252's journal-remote takes no size setting: it derives the largest file from the
    size of the file system it writes to (a tenth of it, in eight files), so it writes to a tmpfs of
    80 times that size, mounted in a private mount namespace (needs root), and the files are copied
    out when it is done.
    """
    need_journal_remote()
    target = out_dir / MACHINE_ID
    target.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if legacy:
        env["SYSTEMD_JOURNAL_KEYED_HASH"] = "0"
        env["SYSTEMD_JOURNAL_COMPACT"] = "0"
    cmd = [
        JOURNAL_REMOTE,
        f"--output={target / name}",
        "--split-mode=none",
        f"--compress={'yes' if compress else 'no'}",
        "-",
    ]
    if max_file_size is not None:
        staging = out_dir / ".staging"
        staging.mkdir(exist_ok=True)
        cmd[1] = f"--output={staging / name}"
        script = (
            f"mount -t tmpfs -o size={max_file_size * 80} imagelint-journal {staging} && "
            f'"$@" && cp --sparse=always {staging}/*.journal {target}/'
        )
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *cmd]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None
    chunks = [export] if isinstance(export, bytes) else export
    for chunk in chunks:
        proc.stdin.write(chunk)
    proc.stdin.close()
    err = proc.stderr.read() if proc.stderr else b""
    if proc.wait() != 0:
        raise RuntimeError(f"systemd-journal-remote failed: {err.decode(errors='replace')[-2000:]}")
    if max_file_size is not None:
        (out_dir / ".staging").rmdir()
    return out_dir


class Host:
    """Emits the entries of one machine, boot after boot, with realistic fields and clocks."""

    def __init__(self, seed: int, sender: Sender = PID1) -> None:
        self.rng = random.Random(seed)
        self.sender = sender  # who logs the service manager's records (``pid1``)
        self.hostname = "ip-10-0-3-17"
        self.boot_id = ""
        self.boot_realtime = 0
        self.mono = 0
        self.invocation: dict[str, str] = {}

    def new_boot(self, realtime_usec: int) -> str:
        self.boot_id = self.rng.getrandbits(128).to_bytes(16, "big").hex()
        self.boot_realtime = realtime_usec
        self.mono = self.rng.randrange(2_000_000, 9_000_000)
        return self.boot_id

    def at(self, mono_usec: int) -> None:
        self.mono = max(self.mono + 1, mono_usec)

    def _base(self) -> list[Field]:
        return [
            ("__REALTIME_TIMESTAMP", str(self.boot_realtime + self.mono)),
            ("__MONOTONIC_TIMESTAMP", str(self.mono)),
            ("_BOOT_ID", self.boot_id),
            ("_MACHINE_ID", MACHINE_ID),
            ("_HOSTNAME", self.hostname),
        ]

    def pid1(self, unit: str, message: str, extra: list[Field] = (), *, code_func: str = "unit_log") -> bytes:
        """A service manager's record about ``unit``: PID 1's, unless ``self.sender`` is another."""
        inv = self.invocation.setdefault(unit, self.rng.getrandbits(128).to_bytes(16, "big").hex())
        fields = [
            *self._base(),
            ("PRIORITY", "6"),
            ("SYSLOG_FACILITY", "3"),
            ("SYSLOG_IDENTIFIER", "systemd"),
            *self.sender.trusted,
            ("CODE_FILE", "src/core/unit.c"),
            ("CODE_FUNC", code_func),
            ("CODE_LINE", "5871"),
            (self.sender.unit_field, unit),
            ("INVOCATION_ID", inv),
            ("MESSAGE", f"{unit}: {message}"),
            *extra,
        ]
        return export_entry(fields)

    def service(self, unit: str, comm: str, message: str, pid: int, priority: str = "6") -> bytes:
        fields = [
            *self._base(),
            ("PRIORITY", priority),
            ("SYSLOG_FACILITY", "3"),
            ("SYSLOG_IDENTIFIER", comm),
            ("_TRANSPORT", "stdout"),
            ("_PID", str(pid)),
            ("_UID", "0"),
            ("_GID", "0"),
            ("_COMM", comm),
            ("_EXE", f"/usr/bin/{comm}"),
            ("_CMDLINE", f"/usr/bin/{comm} --config=/etc/{comm}/config.yaml"),
            ("_CAP_EFFECTIVE", "1ffffffffff"),
            ("_SELINUX_CONTEXT", "unconfined\n"),
            ("_SYSTEMD_CGROUP", f"/system.slice/{unit}"),
            ("_SYSTEMD_UNIT", unit),
            ("_SYSTEMD_SLICE", "system.slice"),
            ("_SYSTEMD_INVOCATION_ID", self.invocation.setdefault(unit, "0" * 32)),
            ("_STREAM_ID", "7d2c1e0f3a4b4c5d8e9f0a1b2c3d4e5f"),
            ("MESSAGE", message),
        ]
        return export_entry(fields)

    def kernel(self, message: str, priority: str = "4") -> bytes:
        fields = [
            *self._base(),
            ("PRIORITY", priority),
            ("SYSLOG_FACILITY", "0"),
            ("SYSLOG_IDENTIFIER", "kernel"),
            ("_TRANSPORT", "kernel"),
            ("_SOURCE_MONOTONIC_TIMESTAMP", str(self.mono - 3)),
            ("MESSAGE", message),
        ]
        return export_entry(fields)

    # -- composite events --------------------------------------------------------------------

    def crash_cycle(self, unit: str, comm: str, n_restarts: int, status: int = 1) -> Iterator[bytes]:
        """One turn of a crash loop as systemd 252 logs it: exit, failure, restart, stop, start."""
        pid = self.rng.randrange(1000, 60000)
        self.invocation[unit] = self.rng.getrandbits(128).to_bytes(16, "big").hex()
        yield self.service(unit, comm, 'level=info msg="Loading configuration"', pid)
        self.at(self.mono + 40_000)
        yield self.service(
            unit, comm, 'level=error msg="Unable to register: no cluster configured"', pid, priority="3"
        )
        self.at(self.mono + 5_000)
        yield self.pid1(
            unit,
            f"Main process exited, code=exited, status={status}/FAILURE",
            [
                ("MESSAGE_ID", EXITED_ID),
                ("EXIT_CODE", "exited"),
                ("EXIT_STATUS", str(status)),
                ("COMMAND", "ExecStart"),
            ],
            code_func="service_sigchld_event",
        )
        yield self.pid1(
            unit,
            "Failed with result 'exit-code'.",
            [("MESSAGE_ID", FAILED_ID), ("UNIT_RESULT", "exit-code")],
            code_func="service_enter_dead",
        )
        self.at(self.mono + 10_000_000)  # RestartSec=10
        yield self.pid1(
            unit,
            f"Scheduled restart job, restart counter is at {n_restarts}.",
            [("MESSAGE_ID", RESTART_ID), ("N_RESTARTS", str(n_restarts))],
            code_func="service_enter_restart",
        )
        yield self.pid1(unit, f"Stopped {unit}.", [("MESSAGE_ID", "9d1aaa27d60140bd96365438aad20286")])
        yield self.pid1(
            unit,
            f"Started {unit}.",
            [("MESSAGE_ID", STARTED_ID), ("JOB_TYPE", "start"), ("JOB_RESULT", "done")],
        )

    def start_limit(self, unit: str, comm: str, *, text_only: bool) -> Iterator[bytes]:
        """Five fast restarts, then the start limit: 252's text line (+ exit-code) or start-limit-hit."""
        for n in range(1, 6):
            yield from self.crash_cycle(unit, comm, n)
            self.at(self.mono + 100_000)
        yield self.pid1(unit, "Start request repeated too quickly.", code_func="unit_test_start_limit")
        result = "exit-code" if text_only else "start-limit-hit"
        yield self.pid1(
            unit,
            f"Failed with result '{result}'.",
            [("MESSAGE_ID", FAILED_ID), ("UNIT_RESULT", result)],
            code_func="service_enter_dead",
        )
        yield self.pid1(
            unit,
            f"Failed to start {unit}.",
            [("MESSAGE_ID", "be02cf6855d2428ba40df7e9d022f03d"), ("JOB_RESULT", "failed")],
        )


KUBELET_MESSAGES = [
    'I{t} {pid} kubelet.go:2457] "SyncLoop (PLEG): event for pod" pod="kube-system/aws-node-{n}" event={{"ID":"{h}"}}',  # noqa: E501
    'I{t} {pid} prober.go:107] "Probe failed" probeType="Readiness" pod="default/web-{n}" containerName="web"',  # noqa: E501
    'E{t} {pid} pod_workers.go:951] "Error syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"app\\""',  # noqa: E501
    'I{t} {pid} cpu_manager.go:396] "RemoveStaleState: removing container" podUID="{h}" containerName="app"',
    'W{t} {pid} container.go:586] Failed to update stats for container "/kubepods/burstable/pod{h}": no such file',  # noqa: E501
]

ENA_MESSAGES = [
    "ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 2, index 423. "
    "6288000 usecs have passed since last napi execution. Napi scheduled: 1",
    "ena 0000:00:05.0 eth0: Trigger reset is on",
    "ena 0000:00:05.0 eth0: TX q 3 is paused for too long (threshold 5000000). "
    "Time since last napi 5924000 usec. napi scheduled: 1",
    "NETDEV WATCHDOG: eth0 (ena): transmit queue 2 timed out 5620 ms",
    "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [kworker/3:1:8812]",
]


def kubelet_line(host: Host, i: int) -> bytes:
    rng = host.rng
    template = KUBELET_MESSAGES[i % len(KUBELET_MESSAGES)]
    msg = template.format(
        t=f"1202 11:{i // 60 % 60:02d}:{i % 60:02d}.{rng.randrange(1_000_000):06d}",
        pid=4242,
        n=rng.randrange(100),
        h=f"{rng.getrandbits(64):016x}",
    )
    return host.service("kubelet.service", "kubelet", msg, 4242)


def scenario(seed: int = 1, *, boots: int = 3, loop_minutes: int = 10, noise_per_cycle: int = 6) -> bytes:
    """A multi-boot history with crash loops, start limits, kernel signals, odd values and noise."""
    host = Host(seed)
    out = bytearray()
    realtime = 1_733_000_000_000_000
    for b in range(boots):
        host.new_boot(realtime)
        out += host.kernel("Linux version 6.1.0-28-cloud-amd64", priority="5")
        out += host.pid1("systemd-journald.service", "Started systemd-journald.service.")
        # odd values: binary, control characters, newlines, repeated fields, big compressible data
        out += export_entry(
            [
                *host._base(),
                ("_TRANSPORT", "journal"),
                ("MESSAGE", "odd values"),
                ("BINARY", bytes([0xFF, 0xFE, 0x00, 0x41]) + bytes(range(0, 256, 7))),
                ("CONTROL", "bell\x07and\x1bescape"),
                ("MULTILINE", "first\nsecond\tthird"),
                ("TAG", "alpha"),
                ("TAG", "beta"),
                ("TAG", "alpha"),
                ("UTF8", "grüße ✓"),
                ("BIG_TEXT", ("lorem ipsum dolor sit amet " * 40)[:900]),
                ("HUGE_TEXT", "".join(f"line {k}: value={k * 7919 % 1000}\n" for k in range(400))),
                ("EMPTY", ""),
            ]
        )
        cycles = loop_minutes * 60 // 10
        for n in range(1, cycles + 1):
            out += b"".join(host.crash_cycle("ecs.service", "amazon-ecs-agent", n))
            for i in range(noise_per_cycle):
                host.at(host.mono + 200_000)
                out += kubelet_line(host, n * noise_per_cycle + i)
            if n % 17 == 0:
                out += host.kernel(ENA_MESSAGES[n % len(ENA_MESSAGES)])
            if b == 1 and n == cycles // 2:
                out += b"".join(host.start_limit("fluent-bit.service", "fluent-bit", text_only=True))
            if b == 2 and n == cycles // 3:
                out += b"".join(host.start_limit("node-exporter.service", "node_exporter", text_only=False))
        realtime = host.boot_realtime + host.mono + 3_600_000_000
    return bytes(out)


def large_history(
    total_entries: int, *, seed: int = 7, boots: int = 4, restart_cycles: int = 3000, chunk: int = 5000
) -> Iterator[bytes]:
    """About ``total_entries`` entries: ``restart_cycles`` crash-loop turns spread over the boots
    among kubelet-like noise and occasional kernel lines, yielded in export-format chunks."""
    host = Host(seed)
    per_cycle = 7
    noise_total = max(0, total_entries - restart_cycles * per_cycle - boots)
    noise_per_cycle = noise_total // max(1, restart_cycles)
    realtime = 1_733_000_000_000_000
    cycles_per_boot = restart_cycles // boots
    buf: list[bytes] = []
    written = 0
    for b in range(boots):
        host.new_boot(realtime)
        buf.append(host.kernel("Linux version 6.1.0-28-cloud-amd64", priority="5"))
        n_cycles = cycles_per_boot if b < boots - 1 else restart_cycles - cycles_per_boot * (boots - 1)
        for n in range(1, n_cycles + 1):
            buf.extend(host.crash_cycle("ecs.service", "amazon-ecs-agent", n))
            gap = 10_000_000 // (noise_per_cycle + 1)
            for i in range(noise_per_cycle):
                host.at(host.mono + gap)
                buf.append(kubelet_line(host, written + i))
            written += noise_per_cycle + per_cycle
            if n % 97 == 0:
                buf.append(host.kernel(ENA_MESSAGES[n % len(ENA_MESSAGES)]))
            if len(buf) >= chunk:
                yield b"".join(buf)
                buf = []
        realtime = host.boot_realtime + host.mono + 3_600_000_000
    while written < total_entries - boots:
        host.at(host.mono + 1000)
        buf.append(kubelet_line(host, written))
        written += 1
    yield b"".join(buf)
