"""A serial console's kernel lines read as a journal: the journal's own signal specs and analyses judge them.

The corpus is the one the journal's kernel rules are proven on (every wording of every signal, real
format strings, and the benign lines of the same drivers), printed as the kernel prints it on a serial
console: each line after its printk time, between systemd's coloured status lines and getty's.
"""

from __future__ import annotations

import pytest

from imagelint.facts.journal import SIGNALS, FileStatus, analyze_ena_resets, count_signal
from imagelint.facts.journal.console import ConsoleLog, clean, kernel_line, open_console
from imagelint.facts.journal.patterns import KERNEL
from tests.facts.journal.test_kernel_formats import BENIGN, CORPUS, ENA_EPISODE_ONLY, EPISODE_WATCHDOG

POWER_ON = 1_765_000_000_000_000  # usec since the epoch


def printed(lines: list[str], *, step: float = 120.0, start: float = 3.0) -> tuple[bytes, ...]:
    """``lines`` as the kernel prints them on the console, ``step`` seconds apart, with userspace's
    own lines (systemd's status in colour, a login prompt) between them."""
    out: list[bytes] = [b"SeaBIOS (version 1.16.2-debian-1.16.2-1)\r", b"Booting from Hard Disk...\r"]
    for i, line in enumerate(lines):
        seconds = start + i * step
        out.append(f"[{seconds:12.6f}] {line}\r".encode())
        out.append(b"[\x1b[0;32m  OK  \x1b[0m] Started \x1b[0;1;39mleaky.service\x1b[0m.\r")
    out.append(b"debian login: ")
    return tuple(out)


def test_every_wording_on_the_console_fires_exactly_its_signal_and_benign_lines_none() -> None:
    lines = [text for variants in CORPUS.values() for _, text in variants] + ENA_EPISODE_ONLY + BENIGN
    journal = open_console(ConsoleLog(printed(lines), powered_on_usec=POWER_ON))
    assert len(list(journal.match(KERNEL))) == len(lines)  # the kernel's lines, and only those
    counts = {name: count_signal(journal, spec).total for name, spec in SIGNALS.items()}
    assert counts == {name: len(CORPUS.get(name, [])) for name in SIGNALS}
    assert journal.scan.complete and journal.scan.entries_examined == len(lines)


def test_an_ena_reset_on_the_console_is_one_episode_at_the_time_the_kernel_printed_it() -> None:
    journal = open_console(
        ConsoleLog(printed(EPISODE_WATCHDOG, step=1.0, start=500.25), powered_on_usec=POWER_ON)
    )
    (episode,) = analyze_ena_resets(journal).episodes
    assert episode.reset and episode.completed and episode.queues == {3}
    assert episode.boot_id == "console" and episode.device == "0000:00:05.0"
    assert episode.first_usec == POWER_ON + 501_250_000  # the driver line after the watchdog's


def test_hostile_text_is_cleaned_before_it_is_read_and_kept_as_text() -> None:
    line = (
        b"\x1b]0;title\x07[   42.000001] \x1b[31mBUG: soft lockup - CPU#1 stuck for 23s! "
        b"[::error::x\xff\xfe:77]\r"
    )
    assert clean(line).startswith(b"[   42.000001] BUG: soft lockup")
    usec, message = kernel_line(line) or (0, "")
    assert usec == 42_000_001
    assert message == "BUG: soft lockup - CPU#1 stuck for 23s! [::error::x\ufffd\ufffd:77]"
    report = count_signal(open_console(ConsoleLog((line,))), SIGNALS["soft-lockup"])
    assert report.total == 1 and report.boots[0].samples == [message]


@pytest.mark.parametrize(
    "line",
    [
        b"BUG: soft lockup - CPU#1 stuck for 23s! [kworker/1:1:77]",  # no printk time: whose line?
        b"[  OK  ] BUG: soft lockup - CPU#1 stuck for 23s!",
        b"[ 1.5] BUG: soft lockup - CPU#1 stuck for 23s!",
        b"x[   42.000001] BUG: soft lockup - CPU#1 stuck for 23s!",
    ],
)
def test_a_line_without_the_printk_time_is_not_a_kernel_line(line: bytes) -> None:
    assert kernel_line(line) is None
    assert count_signal(open_console(ConsoleLog((line,))), SIGNALS["soft-lockup"]).total == 0


def test_a_line_is_cut_and_a_printk_time_going_back_is_a_new_boot() -> None:
    long = b"[    1.000000] " + b"A" * 100_000
    lines = (
        long,
        b"[  900.000000] INFO: task kworker/0:1:12 blocked for more than 120 seconds.",
        b"[    0.000000] Linux version 6.1.0",
    )
    journal = open_console(ConsoleLog(lines))
    messages = [(e["_BOOT_ID"], len(str(e["MESSAGE"]))) for e in journal.entries()]
    assert messages[0] == ("console", 4096 - len(b"[    1.000000] "))
    assert [boot for boot, _ in messages] == ["console", "console", "console-2"]
    assert count_signal(journal, SIGNALS["hung-task"]).boots[0].boot_id == "console"


def test_lines_the_reader_dropped_make_the_console_read_in_part() -> None:
    journal = open_console(ConsoleLog((b"[    1.000000] ok",), dropped=12))
    assert count_signal(journal, SIGNALS["oom-kill"]).total == 0
    (file,) = journal.scan.unreadable
    assert file.status is FileStatus.PARTIAL and "12 console lines" in (file.reason or "")
    assert "1 kernel lines on the console" in journal.scan.note()
