"""Everything systemd-version-specific that the analyses match on, in one table.

Structured records come first: a MESSAGE_ID is stable across systemd versions and is looked up
through the journal's index. Text patterns exist only for events that have no structured record
in some systemd generation; each says which generations need it and which indexed match narrows
the entries it is tried on (PID 1's own entries, by journald's trusted ``_PID`` and ``_UID``), so no
pattern ever forces a full scan. Structured records are accepted from service managers only, by the
same trusted fields (see ``restarts``): anyone can log a MESSAGE_ID.

Kernel and symptom signals (ENA resets, watchdogs, lockups, OOM kills) are data for the generic
signal matcher in ``signals``.

Journal messages are data from the image, so every pattern here (and a rule's own ``pattern``) is a
``textmatch.Pattern``: linear-time RE2 where it can run the pattern, else Python's ``re`` under a time
budget. Built-in patterns compile on first use, so importing this table costs nothing, and are
written so that RE2 runs them on any text: ``\\s*\\Z`` rather than ``\\s*$`` (the same answers), and
``(?:^|[^0-9A-Za-z_])ena[^0-9A-Za-z_\\n]`` rather than ``\\bena\\b`` (RE2's ``\\b`` is ASCII-only, so
non-ASCII text would go to the worker).

Kernel lines are ASCII (printk format strings), so the word boundaries and word characters of the
kernel patterns are ASCII's (``_NON_WORD``), never ``\\w`` or ``\\W``: a Unicode class costs RE2
milliseconds to compile per use (``[\\w ]{1,16}`` alone took 17 ms; the ENA table 165 ms of an
audit whose journal had ENA lines), an ASCII one microseconds. A non-ASCII letter next to a
kernel word therefore counts as a boundary, which no kernel prints.
"""

from __future__ import annotations

from dataclasses import field
from typing import NamedTuple

from imagelint.records import dataclass
from imagelint.textmatch import Pattern

# --- MESSAGE_IDs (systemd's catalog; verified in systemd 252's systemd.catalog) ---------------
RESTART_SCHEDULED = "5eb03494b6584870a536b337290809b3"  # UNIT, N_RESTARTS (since 236)
UNIT_FAILED = "d9b373ed55a64feb8242e02dbe79a49c"  # UNIT, UNIT_RESULT
UNIT_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"  # UNIT, EXIT_CODE, EXIT_STATUS, COMMAND

# kernel words: ASCII (see the module docstring)
_WORD = "0-9A-Za-z_"
_NON_WORD = f"[^{_WORD}]"

UNIT_FIELDS = ("UNIT", "USER_UNIT")  # the system manager logs UNIT=, a user manager USER_UNIT=
START_LIMIT_RESULT = "start-limit-hit"


@dataclass(frozen=True)
class TextPattern:
    """A PID-1 message recognised by its text, for generations that log no structured record."""

    key: str  # what it means, e.g. "start-limit-hit"
    regex: Pattern
    generations: str  # which systemd versions need it
    # narrows the candidates to PID 1's entries: journald's trusted field, which no client can set.
    # PID 1's other trusted field, _UID=0, is checked on each candidate (``restarts``), not here: as
    # an index term it reads the entry list of _UID=0, nearly every entry of the journal (100 ms of
    # a 1M-entry one) to drop next to nothing
    index: dict[str, str] = field(default_factory=lambda: {"_PID": "1"})


# "Start request repeated too quickly." is a plain log_unit_warning() with no MESSAGE_ID in every
# version so far; on 252 a unit that trips the limit while auto-restarting is then recorded as
# UNIT_RESULT=exit-code, so this text is the only trace. Newer versions follow it with
# UNIT_RESULT=start-limit-hit; the analysis counts such a pair once.
START_LIMIT_TEXT = TextPattern(
    key="start-limit-hit",
    regex=Pattern(r"(?:^|: )Start request repeated too quickly\.?\s*\Z", where="journal MESSAGE"),
    generations="all (the only record of the start limit on systemd <= 252 during auto-restart)",
)

# Before systemd 236 a scheduled restart had no MESSAGE_ID and no N_RESTARTS.
LEGACY_RESTART_TEXT = TextPattern(
    key="restart-scheduled",
    regex=Pattern(
        r"(?:^|: )Service (?:hold-off time over|has no hold-off time), scheduling restart\.?\s*\Z",
        where="journal MESSAGE",
    ),
    generations="systemd < 236 (no MESSAGE_ID 5eb0… yet)",
)

TEXT_PATTERNS = (START_LIMIT_TEXT, LEGACY_RESTART_TEXT)


class SignalSpec(NamedTuple):
    """A kernel or service symptom: indexed field matches plus an optional MESSAGE regex."""

    name: str
    matches: dict[str, str | tuple[str, ...]]
    message: str | None = None
    description: str = ""

    def compiled(self) -> Pattern | None:
        """The MESSAGE pattern, bounded (see ``imagelint.textmatch``); None when there is none."""
        if not self.message:
            return None
        return Pattern(self.message, where=f"journal MESSAGE (signal {self.name})")


KERNEL: dict[str, str | tuple[str, ...]] = {"_TRANSPORT": "kernel"}

# --- ENA reset path (drivers/net/ethernet/amazon/ena; out of tree: github.com/amzn/amzn-drivers) --
# Every wording each release printed on the way to a device reset, read from the ena_netdev.c of every
# ena_linux_* tag of amzn-drivers (1.0.0, June 2016, to 2.17.0, April 2026; "ena_linux_2.2.12", tagged in
# June 2024, is 2.12.2 mistagged and left out of the ranges) and the mainline patches
# that carried them (the mainline driver lags the out-of-tree one; an AL2 4.14 or AL2023 6.1 kernel
# may ship either). netdev_*() lines read "ena 0000:00:05.0 eth0: ...", dev_*() lines (the reset
# completion) "ena 0000:00:05.0: ...": the PCI address is the device both carry.

# what a line says about a reset (``role`` below)
TX_TIMEOUT = "tx-timeout"  # transmits not completed in time (the NIC's completions were not polled)
TX_PAUSED = "tx-paused"  # the kernel's netdev watchdog: a Tx queue stopped too long (ena_tx_timeout)
NAPI_STARVED = "napi-starved"  # the driver suspects the NAPI poll does not run (CPU starvation)
DEVICE_HEALTH = "device-health"  # keep-alive, admin queue, MSI-X or device-requested resets
BAD_DESCRIPTOR = "bad-descriptor"  # a completion the driver cannot use: unknown req_id, corrupt descriptor
RESET_DECIDED = "reset-decided"  # the driver decided to reset (the reset task runs next)
RESET_STARTED = "reset-started"  # the reset task runs: exactly once per reset in every release
RESET_DONE = "reset-done"  # the device is back
RESET_FAILED = "reset-failed"  # the reset did not bring it back

# Where a cause line is printed on the code path that decides the reset (``decides`` below): the driver
# sets the reset reason and ENA_FLAG_TRIGGER_RESET (set_bit, or ena_reset_device() from 2.7.2) right
# after printing it, unconditionally, so a reset follows. Read per amzn-drivers tag, ena_linux_1.1.2 (the
# first tag) to 2.17.0, in ena_netdev.c: the keep-alive and admin-queue checks of the timer service,
# the MSI-X checks (Tx from 2.16.0 through the same "Resetting the device" exit as the lost-completion
# check), the lost-completion threshold, the netdev watchdog's ena_tx_timeout (1.1.2-2.7.1 prints
# "Transmit time out" only once its test_and_set_bit took the flag; 2.7.2-2.17.0 prints the paused
# queue and the NAPI suspicion, then resets unless a reset is already under way, whose episode the
# line then joins) and the device's own request. On a starving host, or a journal cut short (rate
# limits, a crash, an image captured mid-incident), such a line may be all that survives of a reset.
# Not marked: the per-descriptor missed-completion lines (a reset only past the threshold), and the
# bad-descriptor lines (ena_com's copies return an error whose handling, and "Page is NULL" in
# 1.1.2-2.5.0, which returns without setting the flag, differ by release).


class EnaMessage(NamedTuple):
    """One wording of the ENA driver on its reset path, with the releases that print it.

    ``qid`` and ``cpu`` find the queue and the NAPI handler's CPU in the text, where the wording gives
    them: a match's last run of digits is the number.
    """

    name: str
    role: str
    text: str  # the wording's regex, after the driver's "ena <PCI address> <ifname>: " prefix
    regex: Pattern  # the whole line: _ENA_PREFIX + text
    releases: str  # amzn-drivers ena_linux_* tags (mainline kernel versions where known)
    qid: Pattern | None = None
    cpu: Pattern | None = None
    decides: bool = False  # printed where the driver decides the reset (see above): a reset follows


def _ena(
    name: str,
    role: str,
    text: str,
    releases: str,
    qid: str | None = None,
    cpu: str | None = None,
    *,
    decides: bool = False,
) -> EnaMessage:
    where = f"journal MESSAGE (ENA {name})"
    return EnaMessage(
        name,
        role,
        text,
        Pattern(_ENA_PREFIX + text, where=where),
        releases,
        Pattern(qid, where=where) if qid else None,
        Pattern(cpu, where=where) if cpu else None,
        decides,
    )


# "ena 0000:00:05.0 eth0: " / "ena 0000:00:05.0: " (RE2 has no \b: see the module docstring)
_ENA_PREFIX = rf"(?:^|{_NON_WORD})ena[^{_WORD}\n].*"
ENA_DEVICE = Pattern(
    rf"(?:^|{_NON_WORD})ena [0-9A-Fa-f]{{4,}}:[0-9A-Fa-f]{{2}}:[0-9A-Fa-f]{{2}}\.[0-7]", where="ENA device"
)
_QID = r"qid:? \d+"
_NAPI_CPU = r"napi CPU: \d+"

ENA_RESET_PATH: tuple[EnaMessage, ...] = (
    _ena(
        "tx-not-completed-v1",
        TX_TIMEOUT,
        r"Found a Tx that wasn't completed on time, qid \d+, index \d+",
        "1.0.0-2.7.1 (mainline 4.9-6.8; from 2.5.0 / 5.14 followed by '%u usecs have passed since last"
        " napi execution. Missing Tx timeout value %u msecs')",
        qid=_QID,
    ),
    _ena(
        "tx-not-completed-v2",
        TX_TIMEOUT,
        r"TX hasn't completed, qid:? \d+, index:? \d+",
        "2.7.2-2.8.9 ('%u usecs from last napi execution', mainline 6.9+), 2.9.0-2.16.1 ('%u msecs"
        " since last interrupt, ...'), 2.17.0 ('qid: %d, index: %d, ...'; netif_dbg, so rarely seen)",
        qid=_QID,
    ),
    _ena(
        "tx-missed-v3",
        TX_TIMEOUT,
        r"\[1/2\] \d+ new missed TX completions, qid: \d+",
        "2.17.0",
        qid=_QID,
    ),
    _ena(
        "tx-missed-detail-v3",
        TX_TIMEOUT,
        r"\[2/2\] qid: \d+, highest TX completion pending time",
        "2.17.0 (gives the NAPI CPU)",
        qid=_QID,
        cpu=_NAPI_CPU,
    ),
    # decides 1.1.2-2.7.1: set_bit(ENA_FLAG_TRIGGER_RESET) right after ('Reset the device')
    _ena(
        "lost-tx-completions-v1",
        TX_TIMEOUT,
        r"The number of lost tx completions? is above the threshold \(\d+ > \d+\)",
        "1.0.0-1.1.3 ('completion'), 1.2.0-2.7.1 ('completions'; mainline 4.9-6.8); ends 'Reset the device'",
        decides=True,
    ),
    # decides 2.7.2-2.17.0: rc = -EIO, then 'Resetting the device' and ena_reset_device()
    _ena(
        "lost-tx-completions-v2",
        TX_TIMEOUT,
        r"Lost TX completions are above (?:the )?threshold \(\d+ > \d+\)",
        "2.7.2-2.8.9 (mainline 6.9+), 2.9.0-2.15.0 (with msecs since interrupt and napi), 2.16.0-2.16.1"
        " ('. qid %d.'), 2.17.0 ('[1/2] ... above threshold ..., qid: %d')",
        qid=_QID,
        decides=True,
    ),
    # decides 2.17.0: the second line of the same decision
    _ena(
        "lost-tx-completions-cpu-v3",
        TX_TIMEOUT,
        r"\[2/2\] qid: \d+, napi CPU: \d+\s*\Z",
        "2.17.0: the driver passes the CPU and the queue in swapped order, so 'qid' shows the NAPI CPU"
        " and 'napi CPU' the queue",
        qid=_NAPI_CPU,
        cpu=r"qid: \d+",
        decides=True,
    ),
    _ena(
        "tx-queue-stuck",
        TX_TIMEOUT,
        r"Tx queue is stuck",
        "1.2.0-2.4.1",
    ),
    # decides 2.7.2-2.17.0: ena_tx_timeout() resets after it
    _ena(
        "tx-queue-paused",
        TX_PAUSED,
        r"TX q \d+ is paused for too long",
        "2.7.2-2.11.1 (mainline 6.9+), 2.12.0-2.16.1 (+ msecs since last interrupt), 2.17.0 (+ 'napi"
        " CPU: %d')",
        qid=r"TX q \d+",
        cpu=_NAPI_CPU,
        decides=True,
    ),
    # decides 1.1.2-2.7.1: printed only once ena_tx_timeout()'s test_and_set_bit took the flag
    _ena(
        "transmit-time-out",
        TX_PAUSED,
        r"Transmit time out\s*\Z",
        "1.0.0-2.7.1 (mainline 4.9-6.8), after the kernel's NETDEV WATCHDOG line",
        decides=True,
    ),
    # decides 2.7.2-2.17.0: goto schedule_reset / ena_reset_device_record_qid()
    _ena(
        "tx-timeout-invalid-queue",
        TX_PAUSED,
        r"TX timeout on invalid queue \d+|timeout was called, but no offending queue was found",
        "2.7.2-2.17.0 (mainline 6.9+)",
        decides=True,
    ),
    # ena_netdev.c, ena_xdp.c and ena_com's ena_eth_com.[ch] (2.11.0-2.17.0, read per tag): each of
    # these errors leads straight to ena_reset_device() (INV_TX_REQ_ID, INV_RX_REQ_ID,
    # TX/RX_DESCRIPTOR_MALFORMED, TOO_MANY_RX_DESCS)
    _ena(
        "invalid-req-id",
        BAD_DESCRIPTOR,
        r"Invalid req[_ ]id:? -?\d+",
        "1.1.2-2.5.0 ('Invalid req_id: %hu'), 2.6.0-2.12.3 ('Invalid req_id %u in qid %u'), 2.13.0-2.17.0"
        " (', queue type: %s'); ena_eth_com.h 'Invalid req id %d' 1.2.0-2.17.0",
        qid=r"in qid \d+",
    ),
    _ena(
        "req-id-no-packet",
        BAD_DESCRIPTOR,
        rf"tx_info doesn't have valid [{_WORD} ]{{1,16}}\. qid \d+"
        r"|req id \d+ doesn't correspond to a packet\. qid \d+",
        "2.6.0-2.12.3 ('tx_info doesn't have valid %s. qid %u req_id %u'), 2.13.0-2.17.0",
        qid=r"qid \d+",
    ),
    _ena(
        "rx-page-null",
        BAD_DESCRIPTOR,
        r"Page is NULL",
        "1.1.2-2.5.0 ('Page is NULL'), 2.6.0-2.13.3 ('. qid %u req_id %u'), 2.14.0-2.17.0 ('SKB: ', 'XDP: ')",
        qid=r"qid \d+",
    ),
    _ena(
        "tx-descriptor-corrupted",
        BAD_DESCRIPTOR,
        r"Corrupted TX descriptor on q_id: \d+",
        "2.10.0-2.17.0",
        qid=r"q_id: \d+",
    ),
    _ena(
        "rx-descriptor-bad",
        BAD_DESCRIPTOR,
        r"(?:Corrupted RX descriptor|First bit is on in descriptor|Bad req_id in descriptor)"
        r" #\d+ on q_id: \d+",
        "'Corrupted ...' 2.10.0-2.17.0, 'First bit ...' 2.8.3-2.17.0, 'Bad req_id ...' 2.17.0",
        qid=r"q_id: \d+",
    ),
    _ena(
        "rx-too-many-descs",
        BAD_DESCRIPTOR,
        r"Too many RX cdescs \(\d+\) > MAX\(\d+\)",
        "1.1.2-2.17.0",
    ),
    # decides 2.7.2-2.17.0: ena_tx_timeout() resets after it (reason SUSPECTED_POLL_STARVATION)
    _ena(
        "napi-not-called",
        NAPI_STARVED,
        r"napi handler hasn't been called for a long time but is scheduled",
        "2.7.2-2.17.0 (mainline 6.9+)",
        decides=True,
    ),
    # decides 1.1.2-2.17.0, both wordings: set_bit, from 2.7.2 ena_reset_device()
    _ena(
        "keep-alive-timeout",
        DEVICE_HEALTH,
        r"Keep alive watchdog timeout",
        "1.0.0-2.11.1 ('.'), 2.12.0-2.17.0 (', %u msecs since last keep alive.')",
        decides=True,
    ),
    # decides 1.1.2-2.17.0: set_bit, from 2.7.2 ena_reset_device()
    _ena(
        "admin-queue-down",
        DEVICE_HEALTH,
        r"ENA admin queue is not in running state",
        "1.0.0-2.17.0",
        decides=True,
    ),
    # decides 1.5.0-2.17.0: Rx and Tx reset right after; Tx from 2.16.0 via 'Resetting the device'
    _ena(
        "msix-issue",
        DEVICE_HEALTH,
        r"Potential MSIX issue on (?:Rx|Tx) side Queue = \d+",
        "1.5.0-2.17.0 (Rx, '. Reset the device'); Tx: 1.5.0-2.15.0 ('. Reset the device'),"
        " 2.16.0-2.17.0 ('.')",
        qid=r"Queue = \d+",
        decides=True,
    ),
    # decides 2.12.0-2.17.0: the AENQ handler calls ena_reset_device()
    _ena(
        "device-unhealthy",
        DEVICE_HEALTH,
        r"The device has detected an unhealthy state, reset is requested",
        "2.12.0-2.17.0",
        decides=True,
    ),
    _ena("resetting", RESET_DECIDED, r"Resetting the device\s*\Z", "2.7.2-2.17.0 (mainline 6.9+)"),
    _ena(
        "tx-cq-check",
        RESET_DECIDED,
        r"(?:No completion descriptors|Completion descriptors|Faulty descriptor) found in CQ \d+",
        "after 'Resetting the device', why (missing completion, lost interrupt, faulty descriptor):"
        " 'No completion ...' 2.9.0-2.17.0, 'Completion ...' 2.9.0-2.15.0, 'Faulty ...' 2.13.0-2.15.0",
        qid=r"CQ \d+",
    ),
    _ena(
        "fw-unresponsive",
        RESET_DECIDED,
        r"FW isn't responsive, skipping reset routine",
        "2.6.0-2.17.0: a reset is due but the device does not answer; retried every second",
    ),
    _ena(
        "refresh-capabilities",
        RESET_DECIDED,
        r"Received requet to refresh capabilities",  # sic
        "2.6.0-2.17.0: the device asks for a reset to refresh the driver's view of its capabilities",
    ),
    _ena("trigger-reset", RESET_STARTED, r"Trigger reset is on", "1.0.0-2.17.0 (mainline 4.9+)"),
    _ena(
        "reset-failed",
        RESET_FAILED,
        r"Device reset completed, status: -\d+|Reset attempt failed\. Can not reset the device"
        r"|Device reset failed|Restore attempt failed\.",
        "1.0.0-2.17.0; 'Device reset completed, status: -errno' from 2.13.1; 'Restore attempt failed.'"
        " 2.17.0 (also on a failed resume)",
    ),
    _ena(
        "reset-completed",
        RESET_DONE,
        r"Device reset completed",
        "1.0.0-1.6.0 (' successfully'), 2.0.2-2.13.0 (' successfully, Driver info: %s'),"
        " 2.13.1-2.17.0 (', status: 0, Driver info: %s')",
    ),
)


def _ena_union(*roles: str) -> str:
    """One regex for the ENA wordings of these roles (what the generic signal counter runs)."""
    return _ENA_PREFIX + "(?:" + "|".join(m.text for m in ENA_RESET_PATH if m.role in roles) + ")"


# any line of the reset path: one search per kernel message before the wordings are told apart
ENA_ANY = Pattern(_ena_union(*{m.role for m in ENA_RESET_PATH}), where="journal MESSAGE (ENA reset path)")

SIGNALS: dict[str, SignalSpec] = {
    s.name: s
    for s in (
        SignalSpec(
            "ena-tx-timeout",
            KERNEL,
            _ena_union(TX_TIMEOUT),
            "ENA: transmits not completed in time (NAPI starved or device stuck), in every driver wording",
        ),
        SignalSpec(
            "ena-reset",
            KERNEL,
            _ena_union(RESET_STARTED),
            "ENA: the driver is resetting the device (once per reset in every release)",
        ),
        SignalSpec(
            "ena-tx-paused",
            KERNEL,
            _ena_union(TX_PAUSED),
            "ENA: a transmit queue stayed paused past the kernel's watchdog threshold",
        ),
        SignalSpec(
            "netdev-watchdog",
            KERNEL,
            r"NETDEV WATCHDOG: \S+ \(.*\): transmit queue \d+ timed out",
            "a network transmit queue timed out",
        ),
        # kernel/watchdog.c: pr_emerg("BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]") in every
        # version; its pr_fmt was "NMI watchdog: " up to 4.15 (so on AL2's 4.14) and "watchdog: " since.
        SignalSpec(
            "soft-lockup",
            KERNEL,
            rf"(?:^|{_NON_WORD})BUG: soft lockup - CPU#\d+ stuck for \d+s",
            "a CPU ran kernel code without scheduling for too long",
        ),
        # "INFO: %s self-detected stall on CPU", "INFO: %s detected stalls on CPUs/tasks:" and
        # "INFO: %s detected expedited stalls on CPUs/tasks: {" (%s: rcu_sched, rcu_preempt, rcu_bh):
        # kernel/rcu/tree.c and tree_exp.h in 4.14 with no prefix; tree_stall.h and tree_exp.h with
        # pr_fmt "rcu: " from 5.0 (so on 5.10, 6.1 and mainline). RCU Tasks: "INFO: rcu_tasks detected
        # stalls on tasks:" (kernel/rcu/update.c, later tasks.h).
        SignalSpec(
            "rcu-stall",
            KERNEL,
            rf"(?:^|{_NON_WORD})INFO: rcu_[{_WORD}]+ "
            r"(?:self-detected stall on CPU|detected (?:expedited )?stalls on (?:CPUs|tasks))",
            "RCU grace period stalled",
        ),
        # kernel/hung_task.c: "INFO: task %s:%d blocked for more than %ld seconds." from 3.x to mainline
        # (the comm, at most 15 bytes, may hold spaces and colons)
        SignalSpec(
            "hung-task",
            KERNEL,
            rf"(?:^|{_NON_WORD})INFO: task .{{1,64}}:\d+ blocked for more than \d+ seconds",
            "a task stuck in uninterruptible sleep",
        ),
        # mm/oom_kill.c, one line per kill. Up to 5.0 (4.14): "%s: Kill process %d (%s) score %u or
        # sacrifice child", then an unprefixed "Killed process %d (%s) total-vm:..." for the same kill
        # (not counted again); from 5.1 (5.10, 6.1, mainline): "%s: Killed process %d (%s)
        # total-vm:...". %s: "Out of memory", "Memory cgroup out of memory" or, on 4.14, "Out of memory
        # (oom_kill_allocating_task)". "oom_reaper: reaped process" follows a kill and is not one.
        SignalSpec(
            "oom-kill",
            KERNEL,
            rf"(?:^|{_NON_WORD})"
            r"(?:Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?): "
            r"Kill(?:ed)? process \d+ \(",
            "the OOM killer killed a process",
        ),
    )
}
