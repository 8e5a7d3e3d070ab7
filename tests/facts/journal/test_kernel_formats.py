"""Every kernel wording the journal rules know, in real journals: each fires its signal, benign ones none.

The texts are the drivers' and the kernel's own format strings filled in (ENA: every ``ena_linux_*``
release of amzn-drivers and the mainline patches; core: kernel/watchdog.c, kernel/rcu/tree_stall.h
and tree_exp.h, kernel/hung_task.c, mm/oom_kill.c at 4.14, 5.10, 6.1 and mainline). They are
written by the real ``systemd-journal-remote`` as kernel-transport entries (``_TRANSPORT=kernel``,
``SYSLOG_IDENTIFIER=kernel``, no ``_PID``/``_UID``) and read back through the journal's index.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from imagelint.facts.journal import SIGNALS, analyze_ena_resets, count_signal, open_directory
from imagelint.facts.journal.ena import RESET_ROLES, classify
from imagelint.facts.journal.patterns import KERNEL
from imagelint.facts.journal.signals import entry_matches
from tests.facts.journal.conftest import have_tools
from tests.facts.journal.ena_formats import HEALTHY, RESET_CLASS
from tests.facts.journal.exportgen import Host, write_journal
from tests.support import os_root, run_cli

NET = "ena 0000:00:05.0 eth0: "  # netdev_*(): PCI address and interface
DEV = "ena 0000:00:05.0: "  # dev_*(): PCI address only

# signal -> (release, the line as the kernel logs it)
CORPUS: dict[str, list[tuple[str, str]]] = {
    "ena-tx-timeout": [
        ("1.0.0-2.4.1", NET + "Found a Tx that wasn't completed on time, qid 2, index 423."),
        (
            "2.5.0-2.7.1",
            NET + "Found a Tx that wasn't completed on time, qid 2, index 423. 6288000 usecs have passed "
            "since last napi execution. Missing Tx timeout value 5000 msecs",
        ),
        (
            "2.7.2-2.8.9",
            NET + "TX hasn't completed, qid 1, index 17. 6104000 usecs from last napi execution, "
            "napi scheduled: 1",
        ),
        (
            "2.9.0-2.16.1",
            NET + "TX hasn't completed, qid 1, index 17. 6104 msecs since last interrupt, 6104 msecs "
            "since last napi execution, napi scheduled: 1",
        ),
        (
            "2.17.0 debug",
            NET + "TX hasn't completed, qid: 1, index: 17, 6104 msecs since interrupt, 6104 msecs since "
            "napi, napi scheduled: 1",
        ),
        (
            "2.17.0 [1/2]",
            NET + "[1/2] 3 new missed TX completions, qid: 2, 6100 msecs since interrupt, 6100 msecs "
            "since napi, napi scheduled: 1",
        ),
        (
            "2.17.0 [2/2]",
            NET + "[2/2] qid: 2, highest TX completion pending time (msec): 6100, napi sched changes: 0, "
            "napi CPU: 5",
        ),
        (
            "1.0.0-1.1.3",
            NET + "The number of lost tx completion is above the threshold (129 > 128). Reset the device",
        ),
        (
            "1.2.0-2.7.1",
            NET + "The number of lost tx completions is above the threshold (129 > 128). Reset the device",
        ),
        (
            "2.7.2-2.8.9",
            NET + "Lost TX completions are above the threshold (129 > 128). Completion transmission "
            "timeout: 5000.",
        ),
        (
            "2.9.0-2.15.0",
            NET + "Lost TX completions are above the threshold (129 > 128). Completion transmission "
            "timeout: 5000 (msec). 6100 msecs since last interrupt, 6100 msecs since last napi execution.",
        ),
        (
            "2.16.0-2.16.1",
            NET + "Lost TX completions are above the threshold (129 > 128). Completion transmission "
            "timeout: 5000 (msec). 6100 msecs since last interrupt, 6100 msecs since last napi "
            "execution. qid 2.",
        ),
        (
            "2.17.0 [1/2]",
            NET + "[1/2] Lost TX completions are above threshold (129 > 128), completion timeout: 5000 "
            "(msec), 6100 msecs since interrupt, 6100 msecs since napi, qid: 2",
        ),
        ("2.17.0 [2/2]", NET + "[2/2] qid: 5, napi CPU: 2"),
        ("1.2.0-2.4.1", NET + "Tx queue is stuck"),
    ],
    "ena-tx-paused": [
        ("1.0.0-2.7.1", NET + "Transmit time out"),
        (
            "2.7.2-2.11.1",
            NET + "TX q 3 is paused for too long (threshold 5000000). Time since last napi 5924000 usec. "
            "napi scheduled: 1",
        ),
        (
            "2.12.0-2.16.1",
            NET + "TX q 3 is paused for too long (threshold 5000000). Time since last napi 5924000 usec. "
            "napi scheduled: 1. msecs since last interrupt: 5924",
        ),
        (
            "2.17.0",
            NET + "TX q 3 is paused for too long (threshold 5000000). usecs since napi 5924000. napi "
            "scheduled: 1. napi CPU: 7. msecs since interrupt: 5924",
        ),
        ("2.7.2-2.17.0", NET + "TX timeout on invalid queue 40"),
        ("2.7.2-2.17.0", NET + "timeout was called, but no offending queue was found"),
    ],
    "ena-reset": [("1.0.0-2.17.0", NET + "Trigger reset is on")],
    "netdev-watchdog": [("4.14-mainline", "NETDEV WATCHDOG: eth0 (ena): transmit queue 2 timed out 5620 ms")],
    "soft-lockup": [
        ("4.14", "NMI watchdog: BUG: soft lockup - CPU#3 stuck for 23s! [kworker/3:1:8812]"),
        ("4.16+", "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [kubelet:2604]"),
    ],
    "rcu-stall": [
        ("4.14", "INFO: rcu_sched self-detected stall on CPU"),
        ("4.14", "INFO: rcu_sched detected stalls on CPUs/tasks:"),
        ("4.14", "INFO: rcu_sched detected expedited stalls on CPUs/tasks: { 3-... } 21002 jiffies s: 845"),
        ("4.14", "INFO: rcu_tasks detected stalls on tasks:"),
        ("5.0+", "rcu: INFO: rcu_sched self-detected stall on CPU"),
        ("5.0+", "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"),
        (
            "5.0+",
            "rcu: INFO: rcu_sched detected expedited stalls on CPUs/tasks: { 3-... } 21002 jiffies s: 845 "
            "root: 0x8/.",
        ),
    ],
    "hung-task": [
        ("4.14-mainline", "INFO: task kworker/u8:2:123 blocked for more than 120 seconds."),
        ("4.14-mainline", "INFO: task jbd2/nvme0n1p1-:412 blocked for more than 122 seconds."),
        ("comm with a space", "INFO: task Chrome IO:2211 blocked for more than 241 seconds."),
    ],
    "oom-kill": [
        ("4.14", "Out of memory: Kill process 4242 (python3) score 912 or sacrifice child"),
        ("4.14", "Memory cgroup out of memory: Kill process 4242 (python3) score 1000 or sacrifice child"),
        (
            "4.14",
            "Out of memory (oom_kill_allocating_task): Kill process 4242 (python3) score 0 "
            "or sacrifice child",
        ),
        (
            "5.1+",
            "Out of memory: Killed process 4242 (python3) total-vm:8123456kB, anon-rss:7900000kB, "
            "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:15800kB oom_score_adj:0",
        ),
        (
            "5.1+",
            "Memory cgroup out of memory: Killed process 4242 (python3) total-vm:1000kB, anon-rss:900kB, "
            "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:60kB oom_score_adj:985",
        ),
    ],
}

# Reset-path lines that are neither timeouts, pauses nor triggers: they belong to IL311's episodes only.
ENA_EPISODE_ONLY = [
    NET + "napi handler hasn't been called for a long time but is scheduled",
    NET + "Keep alive watchdog timeout.",
    NET + "Keep alive watchdog timeout, 6012 msecs since last keep alive.",
    NET + "ENA admin queue is not in running state!",
    NET + "Potential MSIX issue on Rx side Queue = 1. Reset the device",
    NET + "Potential MSIX issue on Tx side Queue = 1. Reset the device",
    NET + "Potential MSIX issue on Tx side Queue = 1.",
    NET + "The device has detected an unhealthy state, reset is requested",
    NET + "Resetting the device",
    DEV + "Device reset completed successfully",
    DEV + "Device reset completed successfully, Driver info: Elastic Network Adapter (ENA) v2.8.0g",
    DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.13.1g",
    NET + "Reset attempt failed. Can not reset the device",
    DEV + "Device reset completed, status: -5, Driver info: Elastic Network Adapter (ENA) v2.13.1g",
]

BENIGN = [
    "ena: Elastic Network Adapter (ENA) v2.13.0g",
    "ena: Elastic Network Adapter (ENA) v2.1.0K",
    "ena 0000:00:05.0: Elastic Network Adapter (ENA) found at mem febf8000, mac addr 02:4b:8f:6a:1c:3d",
    "ena 0000:00:05.0: LLQ is not supported Fallback to host mode policy.",
    "ena 0000:00:05.0: ENA device version: 0.10",
    "ena 0000:00:05.0: ENA controller version: 0.0.1 implementation version 1",
    "ena 0000:00:05.0 eth0: Trying to enable MSI-X, vectors 9",
    "ena 0000:00:05.0 ens5: renamed from eth0",
    "rcu: Hierarchical RCU implementation.",
    "Hierarchical RCU implementation.",
    "rcu: \tRCU restricting CPUs from NR_CPUS=8192 to nr_cpu_ids=4.",
    "rcu: RCU calculated value of scheduler-enlistment delay is 100 jiffies.",
    "rcu: Adjusting geometry for rcu_fanout_leaf=16, nr_cpu_ids=4",
    "NMI watchdog: disabled (cpu0): hardware events not enabled",
    "NMI watchdog: Perf NMI watchdog permanently disabled",
    "NMI watchdog: Enabled. Permanently consumes one hw-PMU counter.",
    "watchdog: Disabling watchdog on nohz_full cores by default",
    "oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    # the second line of a 4.14 kill (the same kill as its "Kill process" line) and the context lines
    "Killed process 4242 (python3) total-vm:8123456kB, anon-rss:7900000kB, file-rss:0kB, shmem-rss:0kB",
    "python3 invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
    "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task=python3,"
    "pid=4242,uid=0",
    # lines of the same hang or stall as a counted line, which must not count it again
    '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
    "INFO: task kworker/4:1:16648 is blocked on a mutex likely owned by task systemd-shutdow:1.",
    "rcu_tasks_wait_gp: rcu_tasks grace period number 85 (since boot) is 131273 jiffies old.",
    "Linux version 6.1.0-28-cloud-amd64",
]


def _journal(root: Path, lines: list[str], *, step_usec: int) -> Path:
    """The lines as kernel messages of one boot, ``step_usec`` apart, in a real journal under ``root``."""
    host = Host(21)
    host.new_boot(1_736_000_000_000_000)
    export = bytearray()
    for line in lines:
        host.at(host.mono + step_usec)
        export += host.kernel(line)
    return write_journal(bytes(export), root)


@pytest.fixture(scope="module")
def corpus_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every variant and every benign line, each two minutes after the previous (its own episode)."""
    have_tools()
    lines = [text for variants in CORPUS.values() for _, text in variants] + ENA_EPISODE_ONLY + BENIGN
    return _journal(tmp_path_factory.mktemp("corpus"), lines, step_usec=120_000_000)


def test_each_variant_fires_exactly_its_signal_and_benign_lines_none(corpus_journal: Path) -> None:
    specs = [(spec, spec.compiled()) for spec in SIGNALS.values()]
    fired: dict[str, set[str]] = {name: set() for name in SIGNALS}
    with open_directory(corpus_journal) as journal:
        entries = list(journal.match(KERNEL, fields={"MESSAGE", "_TRANSPORT"}))
        counts = {name: count_signal(journal, spec).total for name, spec in SIGNALS.items()}
    assert len(entries) == sum(map(len, CORPUS.values())) + len(ENA_EPISODE_ONLY) + len(BENIGN)
    for entry in entries:
        for spec, regex in specs:
            if entry_matches(spec, regex, entry):
                fired[spec.name].add(str(entry["MESSAGE"]))
    assert fired == {
        name: {text for _, text in CORPUS.get(name, [])} for name in SIGNALS
    }  # recall 100%, 0 false
    assert counts == {name: len(CORPUS.get(name, [])) for name in SIGNALS}  # the same through the index


def test_every_ena_reset_path_line_is_classified_and_benign_driver_lines_are_not(
    corpus_journal: Path,
) -> None:
    ena_lines = [
        text for name in ("ena-tx-timeout", "ena-tx-paused", "ena-reset") for _, text in CORPUS[name]
    ]
    assert all(classify(text) is not None for text in ena_lines + ENA_EPISODE_ONLY)
    assert [text for text in BENIGN if classify(text) is not None] == []
    with open_directory(corpus_journal) as journal:
        report = analyze_ena_resets(journal)
    # two minutes apart, every reset-path line is an episode of its own, all on one device
    assert sum(e.lines for e in report.episodes) == len(report.episodes) == len(ena_lines + ENA_EPISODE_ONLY)
    assert {e.device for e in report.episodes} == {"0000:00:05.0"}


def _wording(text: str) -> str:
    message = classify(text)
    assert message is not None, text
    return message.name


def test_a_line_that_decides_a_reset_is_a_reset_alone_and_no_other_cause_is(corpus_journal: Path) -> None:
    """Issue 49: every wording of every release, alone (two minutes apart), is a reset exactly when the
    driver decides the reset where it prints it (``EnaMessage.decides``) or it is a reset line."""
    with open_directory(corpus_journal) as journal:
        report = analyze_ena_resets(journal)
    wrong = []
    for episode in report.episodes:
        message = classify(episode.samples[0])
        assert message is not None
        expected = message.decides or message.role in RESET_ROLES
        if episode.reset != expected or (
            episode.reset and episode.completed != (message.role == "reset-done")
        ):
            wrong.append((episode.samples[0], episode.roles))
    assert wrong == []
    decided = {_wording(e.samples[0]) for e in report.resets() if not e.completed}
    assert {
        "keep-alive-timeout",
        "msix-issue",
        "napi-not-called",
        "tx-queue-paused",
        "admin-queue-down",
        "device-unhealthy",
        "lost-tx-completions-v1",
        "lost-tx-completions-v2",
        "transmit-time-out",
        "resetting",
    } <= decided
    quiet = {_wording(e.samples[0]) for e in report.episodes if not e.reset}
    assert {"tx-not-completed-v1", "tx-not-completed-v2", "tx-missed-v3", "tx-missed-detail-v3"} <= quiet


@pytest.mark.parametrize(
    "line",
    [
        NET + "Keep alive watchdog timeout.",  # 1.1.2-2.11.1
        NET + "Keep alive watchdog timeout, 6012 msecs since last keep alive.",  # 2.12.0-2.17.0
        NET + "Potential MSIX issue on Tx side Queue = 1. Reset the device",  # 1.5.0-2.15.0
        NET + "Potential MSIX issue on Tx side Queue = 1.",  # 2.16.0-2.17.0
        NET + "napi handler hasn't been called for a long time but is scheduled",  # 2.7.2-2.17.0
        NET + "Resetting the device",  # what was already counted
    ],
)
def test_il311_counts_a_lone_reset_decision_as_a_reset_not_completed(tmp_path: Path, line: str) -> None:
    """Issue 49: a journal cut short after the decision still shows the reset."""
    have_tools()
    root = tmp_path / "image"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=debian\n")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/lib/systemd").mkdir(parents=True)
    (root / "usr/lib/systemd/systemd").write_text("")
    _journal(root / "var/log/journal", [*BENIGN, line], step_usec=1_000_000)
    proc = run_cli("audit", str(root), "--select", "IL311", "-f", "json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    (finding,) = [f for f in json.loads(proc.stdout)["findings"] if f["rule_id"] == "IL311"]
    assert (finding["evidence"]["resets"], finding["evidence"]["completed"]) == (1, 0)


@pytest.fixture(scope="module")
def formats_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each reset-class format since 2024, then each healthy driver line, two minutes apart."""
    have_tools()
    lines = [f.line() for f in RESET_CLASS + HEALTHY]
    return _journal(tmp_path_factory.mktemp("formats"), lines, step_usec=120_000_000)


def test_each_reset_class_format_since_2024_is_its_wording_and_healthy_lines_none(
    formats_journal: Path,
) -> None:
    """amzn-drivers 2.11.0-2.17.0 (``ena_formats``): every format an episode of its own wording, in order;
    the healthy driver lines no episode and no signal."""
    healthy = {f.line() for f in HEALTHY}
    specs = [(spec, spec.compiled()) for spec in SIGNALS.values()]
    with open_directory(formats_journal) as journal:
        report = analyze_ena_resets(journal)
        entries = [
            e for e in journal.match(KERNEL, fields={"MESSAGE", "_TRANSPORT"}) if e["MESSAGE"] in healthy
        ]
    assert [(e.wordings, e.lines) for e in report.episodes] == [([f.wording], 1) for f in RESET_CLASS]
    assert len(entries) == len(HEALTHY)
    assert [(s.name, e["MESSAGE"]) for e in entries for s, regex in specs if entry_matches(s, regex, e)] == []


EPISODE_217 = [  # driver 2.17.0: queue 2 starved on CPU 5, one reset
    NET + "[1/2] 3 new missed TX completions, qid: 2, 6100 msecs since interrupt, 6100 msecs since napi, "
    "napi scheduled: 1",
    NET + "[2/2] qid: 2, highest TX completion pending time (msec): 6100, napi sched changes: 0, napi CPU: 5",
    NET + "[1/2] Lost TX completions are above threshold (129 > 128), completion timeout: 5000 (msec), "
    "11000 msecs since interrupt, 11000 msecs since napi, qid: 2",
    NET + "[2/2] qid: 5, napi CPU: 2",  # the driver swaps its arguments: CPU 5, queue 2
    NET + "Resetting the device",
    NET + "Trigger reset is on",
    DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.17.0g",
]
EPISODE_14 = [  # driver 1.4.0 / mainline 4.14: many descriptors of queue 0, one reset
    *(NET + f"Found a Tx that wasn't completed on time, qid 0, index {i}." for i in range(4)),
    NET + "The number of lost tx completions is above the threshold (129 > 128). Reset the device",
    NET + "Trigger reset is on",
    DEV + "Device reset completed successfully",
]
EPISODE_WATCHDOG = [  # the kernel's netdev watchdog on 2.12.0: queue 3, NAPI starved
    "NETDEV WATCHDOG: eth0 (ena): transmit queue 3 timed out 5620 ms",
    NET + "TX q 3 is paused for too long (threshold 5000000). Time since last napi 5924000 usec. napi "
    "scheduled: 1. msecs since last interrupt: 5924",
    NET + "napi handler hasn't been called for a long time but is scheduled",
    NET + "Trigger reset is on",
    DEV + "Device reset completed successfully, Driver info: Elastic Network Adapter (ENA) v2.12.0g",
]
EPISODE_FAILED = [  # driver 2.13.1+: the device stopped answering and did not come back
    NET + "Keep alive watchdog timeout, 6012 msecs since last keep alive.",
    NET + "Trigger reset is on",
    DEV + "Device reset completed, status: -5, Driver info: Elastic Network Adapter (ENA) v2.13.1g",
]

EPISODE_RESTORE_FAILED = [  # driver 2.17.0: the restore fails, then the reset task reports its status
    NET + "ENA admin queue is not in running state!",
    NET + "Trigger reset is on",
    DEV + "Restore attempt failed.",
    DEV + "Device reset completed, status: -62, Driver info: Elastic Network Adapter (ENA) v2.17.0g",
]
EPISODE_RESET_ATTEMPT_FAILED = [  # driver 2.13.1-2.16.1: the same two failure lines in the older wording
    NET + "Keep alive watchdog timeout, 6012 msecs since last keep alive.",
    NET + "Trigger reset is on",
    DEV + "Reset attempt failed. Can not reset the device",
    DEV + "Device reset completed, status: -5, Driver info: Elastic Network Adapter (ENA) v2.16.1g",
]
EPISODE_BAD_REQ_ID = [  # driver 2.13.0+: the device completed a Tx descriptor the driver never posted
    NET + "Invalid req_id 1024 in qid 3, queue type: regular",
    NET + "Trigger reset is on",
    DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.13.1g",
]
EPISODE_MSIX_216 = [  # driver 2.16.0: queue 1 never got its first interrupt; the CQ check says why
    NET + "Potential MSIX issue on Tx side Queue = 1.",
    NET + "Resetting the device",
    NET + "No completion descriptors found in CQ 1",
    NET + "Trigger reset is on",
    DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.16.0g",
]
EPISODE_KEEP_ALIVE_OLD = [  # driver 1.1.2-2.11.1: the device stopped sending keep-alives
    NET + "Keep alive watchdog timeout.",
    NET + "Trigger reset is on",
    DEV + "Device reset completed successfully, Driver info: Elastic Network Adapter (ENA) v2.8.0g",
]
EPISODE_MSIX_TX_215 = [  # driver 1.5.0-2.15.0: the MSI-X check resets right after its line
    NET + "Potential MSIX issue on Tx side Queue = 1. Reset the device",
    NET + "Trigger reset is on",
    DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.15.0g",
]
EPISODE_NAPI_ONLY = [  # 2.7.2+: the watchdog's paused-queue line lost (rate limit), the NAPI one kept
    NET + "napi handler hasn't been called for a long time but is scheduled",
    NET + "Trigger reset is on",
    DEV + "Device reset completed, status: 0, Driver info: Elastic Network Adapter (ENA) v2.14.0g",
]


@pytest.mark.parametrize(
    ("lines", "queues", "cpus", "roles"),
    [
        (EPISODE_217, {2}, {5}, ["tx-timeout", "reset-decided", "reset-started", "reset-done"]),
        (EPISODE_14, {0}, set(), ["tx-timeout", "reset-decided", "reset-started", "reset-done"]),
        (
            EPISODE_WATCHDOG,
            {3},
            set(),
            ["tx-paused", "reset-decided", "napi-starved", "reset-started", "reset-done"],
        ),
        (EPISODE_FAILED, set(), set(), ["device-health", "reset-decided", "reset-started", "reset-failed"]),
        (
            EPISODE_RESTORE_FAILED,
            set(),
            set(),
            ["device-health", "reset-decided", "reset-started", "reset-failed"],
        ),
        (
            EPISODE_RESET_ATTEMPT_FAILED,
            set(),
            set(),
            ["device-health", "reset-decided", "reset-started", "reset-failed"],
        ),
        (
            EPISODE_KEEP_ALIVE_OLD,
            set(),
            set(),
            ["device-health", "reset-decided", "reset-started", "reset-done"],
        ),
        (EPISODE_MSIX_TX_215, {1}, set(), ["device-health", "reset-decided", "reset-started", "reset-done"]),
        (EPISODE_NAPI_ONLY, set(), set(), ["napi-starved", "reset-decided", "reset-started", "reset-done"]),
        (EPISODE_BAD_REQ_ID, {3}, set(), ["bad-descriptor", "reset-started", "reset-done"]),
        (EPISODE_MSIX_216, {1}, set(), ["device-health", "reset-decided", "reset-started", "reset-done"]),
    ],
)
def test_one_reset_episode_is_one_reset(
    tmp_path: Path, lines: list[str], queues: set[int], cpus: set[int], roles: list[str]
) -> None:
    have_tools()
    directory = _journal(tmp_path, lines, step_usec=1_000_000)
    with open_directory(directory) as journal:
        report = analyze_ena_resets(journal)
    (episode,) = report.episodes
    assert episode.reset and episode.completed == ("reset-done" in roles)
    assert (episode.queues, episode.napi_cpus, episode.roles) == (queues, cpus, roles)
    assert episode.lines == sum(line.startswith("ena ") for line in lines)  # every driver line


def test_resets_in_a_row_and_a_silence_are_told_apart(tmp_path: Path) -> None:
    """Two resets a second apart are two (their own reset lines part them); symptoms that led to no
    reset end with a minute's silence and are no reset."""
    have_tools()
    host = Host(22)
    host.new_boot(1_737_000_000_000_000)
    export = bytearray()
    for line in [*EPISODE_14, *EPISODE_14, EPISODE_14[0]]:
        host.at(host.mono + 1_000_000)
        export += host.kernel(line)
    host.at(host.mono + 61_000_000)  # a minute later: a new episode, which never reset
    export += host.kernel(EPISODE_14[1])
    with open_directory(write_journal(bytes(export), tmp_path)) as journal:
        report = analyze_ena_resets(journal)
    assert [(e.reset, e.lines) for e in report.episodes] == [(True, 7), (True, 7), (False, 1), (False, 1)]
    assert len(report.resets()) == 2


def test_il311_reports_one_reset_with_queue_and_napi_cpu(tmp_path: Path) -> None:
    have_tools()
    root = os_root(tmp_path / "image")
    _journal(root / "var/log/journal", [*BENIGN, *EPISODE_217], step_usec=1_000_000)
    proc = run_cli("audit", str(root), "--select", "IL311", "-f", "json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    (finding,) = [f for f in json.loads(proc.stdout)["findings"] if f["rule_id"] == "IL311"]
    evidence = finding["evidence"]
    assert (evidence["device"], evidence["resets"], evidence["completed"]) == ("0000:00:05.0", 1, 1)
    assert (evidence["queues"], evidence["napi_cpus"], evidence["causes"]) == ("2", "5", "tx-timeout")
    assert "queues 2; NAPI CPUs 5" in finding["message"]
    assert Counter(f["rule_id"] for f in json.loads(proc.stdout)["findings"]) == {"IL311": 1}


def test_kernel_words_are_ascii_words() -> None:
    """The kernel patterns' word boundaries are ASCII's (``patterns``: kernel lines are printk
    formats): a letter outside ASCII next to "ena" is a boundary, an ASCII one is not."""
    line = "0000:00:05.0 eth0: Trigger reset is on"
    assert classify(f"ena {line}") is not None
    assert classify(f"\u00e9ena {line}") is not None  # "é" is no ASCII word character
    assert classify(f"ena\u00e9{line}") is not None  # before or after "ena"
    assert classify(f"xena {line}") is None
    assert classify(f"ena_{line}") is None
