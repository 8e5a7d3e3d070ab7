"""The serial console reader: bounded whatever the guest prints, and what it looks for."""

from __future__ import annotations

import io

from imagelint.vm.console import HEAD, KERNEL_KEPT, LINE_MAX, TAIL, Console


def fed(*chunks: bytes) -> Console:
    console = Console(io.BytesIO(b""))
    for chunk in chunks:
        console.feed(chunk)
    return console


def test_a_console_that_never_stops_is_kept_to_its_head_and_tail_and_counted() -> None:
    chunk = b"x" * 4096 + b"\n"
    console = fed(*[chunk] * 10_000)  # ~40 MB printed
    assert console.total == len(chunk) * 10_000
    assert len(console.head) == HEAD
    assert console.tail_size <= TAIL + len(chunk)
    assert console.summary()["kept_bytes"] <= HEAD + TAIL


def test_the_kernel_banner_and_a_panic_are_found_across_chunk_boundaries() -> None:
    console = fed(
        b"[    0.000000] Linux ver", b"sion 6.1.0-50-cloud-amd64 (debian-kernel@lists.debian.org)\r\n"
    )
    assert console.kernel == "6.1.0-50-cloud-amd64" and console.banner.is_set()
    console.feed(b"[  1.2] Kernel panic - not syncing: VFS: Unable to mount root fs\r\n")
    assert console.panic is not None and console.panic.startswith("Kernel panic - not syncing: VFS")


def test_a_line_without_end_is_cut_and_a_hostile_banner_stays_a_version() -> None:
    console = fed(b"A" * (LINE_MAX * 50), b"\n", b"Linux version 6.1\x1b[31m;rm -rf /\n")
    assert len(console._line) == 0
    assert console.kernel == "6.1"
    assert "\x1b" in console.last()  # kept as it came: whoever shows it escapes it for its channel


def test_the_last_lines_are_what_the_guest_printed_last() -> None:
    console = fed(*[f"line {n}\n".encode() for n in range(100_000)])
    assert console.last().splitlines()[-1] == "line 99999"


def test_every_kernel_line_is_kept_for_the_signal_rules_to_its_budget_and_the_rest_counted() -> None:
    lockup = b"[  120.000001] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [kworker/0:1:12]"
    chatter = b"[  OK  ] Started leaky.service.\r\n" * 1000  # userspace's lines: not the kernel's
    console = fed(chatter, lockup[:30], lockup[30:] + b"\r\n", chatter)
    log = console.log(1_000_000)
    assert log.lines == (lockup + b"\r",) and log.dropped == 0 and log.powered_on_usec == 1_000_000

    line = b"[    1.000000] " + b"x" * 1000 + b"\n"
    printed = KERNEL_KEPT // len(line) + 50
    flood = fed(*[line] * printed)  # a kernel that never stops printing
    log = flood.log(0)
    assert flood.kernel_bytes <= KERNEL_KEPT and log.dropped >= 40
    assert len(log.lines) + log.dropped == printed
    assert flood.summary()["kernel_lines_dropped"] == flood.log(0).dropped


def test_the_last_words_without_a_newline_are_read_when_the_console_ends() -> None:
    console = Console(io.BytesIO(b"[    9.000000] Kernel panic - not syncing: Fatal exception"))
    console.run()
    assert console.panic is not None and len(console.log(0).lines) == 1
