"""The ENA driver's reset-class format strings since 2024, as printed, and healthy driver lines.

Source: github.com/amzn/amzn-drivers, ``kernel/linux/ena/{ena_netdev.c,ena_xdp.c,ena_sysfs.c}`` and
``kernel/linux/common/ena_com/{ena_com.c,ena_eth_com.c,ena_eth_com.h}`` at every ``ena_linux_*`` tag
from 2.11.0 (the release current on 2024-01-01) to 2.17.0 (``TAGS`` gives each tag's commit). A format
is reset-class when the driver prints it on a path that always ends in ``ena_reset_device()`` (or sets
``ENA_FLAG_TRIGGER_RESET``), or from the reset task and its restore. Each format string is quoted
verbatim (``\\n`` kept as written) with plausible printf arguments; ``line()`` prints it as the kernel
logs it: ``netdev_*()``/``netif_*()`` after "ena <PCI address> <ifname>: ", ``dev_*()`` after
"ena <PCI address>: ".

Left out, with the reason: ``Failed to prepare tx bufs`` (no reset on -ENOMEM); ``Command was
aborted``, ``Wait for completion (polling) timeout``, ``comp_ctx is NULL...``, ``The ena device
didn't send a completion for the admin cmd %d status %d`` and ``... didn't receive a MSI-X interrupt
(cmd %d), autopolling mode is %s`` (ena_com.c: they stop the admin queue, and the reset that follows
logs ``ENA admin queue is not in running state!``, which is matched; they are also printed inside a
reset's own restore and at probe); ``Reset indication didn't turn on/off``, ``Device isn't ready,
can't reset device``, ``Can not reset device`` (the reset command itself, which probe issues too; in
a reset they are followed by ``Device reset failed`` or a negative status, which are matched).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TAGS = {  # ena_linux_* tag -> commit in amzn/amzn-drivers
    "2.11.0": "1f1efd4897d0",
    "2.12.0": "565c5ade138f",
    "2.12.3": "e71f16153d38",
    "2.13.0": "a6ee03f2a3bd",
    "2.13.1": "cec2a704cbdf",
    "2.14.0": "d972a52bcebf",
    "2.15.0": "296d60c4ed18",
    "2.16.0": "745ad6b502db",
    "2.17.0": "1e6c8e9f64d9",
}
PCI = "0000:00:05.0"


@dataclass(frozen=True)
class Format:
    """One printk format of the driver, where it was read, and the wording it must classify as."""

    fmt: str  # verbatim from the source
    args: tuple[object, ...]
    source: str  # "file@tag" (the first tag read with this text; ``releases`` gives the range)
    releases: str
    wording: str  # patterns.ENA_RESET_PATH name
    dev: bool = False  # dev_*() (no interface name)

    def line(self) -> str:
        """The message as the kernel logs it: C conversions as Python's, the newline dropped."""
        c_format = re.sub(r"%pM", "%s", self.fmt.removesuffix("\\n"))  # a MAC address, given as text
        text = re.sub(r"%(?:h|l|ll)?([duxs])", r"%\1", c_format) % self.args
        return f"ena {PCI}: {text}" if self.dev else f"ena {PCI} eth0: {text}"


NETDEV = "ena_netdev.c"
F = Format
RESET_CLASS: list[Format] = [
    # missed Tx completions (check_missing_comp_in_tx_queue)
    F(
        "TX hasn't completed, qid %d, index %d. %u msecs since last interrupt, %u msecs since last napi "
        "execution, napi scheduled: %d\\n",
        (1, 17, 6104, 6104, 1),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.16.1",
        "tx-not-completed-v2",
    ),
    F(
        "TX hasn't completed, qid: %d, index: %d, %u msecs since interrupt, %u msecs since napi, napi "
        "scheduled: %d\\n",
        (1, 17, 6104, 6104, 1),
        f"{NETDEV}@2.17.0",
        "2.17.0 (netif_dbg)",
        "tx-not-completed-v2",
    ),
    F(
        "[1/2] %d new missed TX completions, qid: %d, %u msecs since interrupt, %u msecs since napi, napi "
        "scheduled: %d\\n",
        (3, 2, 6100, 6100, 1),
        f"{NETDEV}@2.17.0",
        "2.17.0",
        "tx-missed-v3",
    ),
    F(
        "[2/2] qid: %d, highest TX completion pending time (msec): %u, napi sched changes: %d, napi CPU: "
        "%d\\n",
        (2, 6100, 0, 5),
        f"{NETDEV}@2.17.0",
        "2.17.0",
        "tx-missed-detail-v3",
    ),
    F(
        "Lost TX completions are above the threshold (%d > %d). Completion transmission timeout: %u (msec)."
        " %u msecs since last interrupt, %u msecs since last napi execution.\\n",
        (129, 128, 5000, 6100, 6100),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.15.0",
        "lost-tx-completions-v2",
    ),
    F(
        "Lost TX completions are above the threshold (%d > %d). Completion transmission timeout: %u (msec)."
        " %u msecs since last interrupt, %u msecs since last napi execution. qid %d.\\n",
        (129, 128, 5000, 6100, 6100, 2),
        f"{NETDEV}@2.16.0",
        "2.16.0-2.16.1",
        "lost-tx-completions-v2",
    ),
    F(
        "[1/2] Lost TX completions are above threshold (%d > %d), completion timeout: %u (msec), %u msecs "
        "since interrupt, %u msecs since napi, qid: %d\\n",
        (129, 128, 5000, 6100, 6100, 2),
        f"{NETDEV}@2.17.0",
        "2.17.0",
        "lost-tx-completions-v2",
    ),
    F("[2/2] qid: %d, napi CPU: %d\\n", (5, 2), f"{NETDEV}@2.17.0", "2.17.0", "lost-tx-completions-cpu-v3"),
    F(
        "Potential MSIX issue on Tx side Queue = %d. Reset the device\\n",
        (1,),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.15.0",
        "msix-issue",
    ),
    F(
        "Potential MSIX issue on Tx side Queue = %d.\\n",
        (1,),
        f"{NETDEV}@2.16.0",
        "2.16.0-2.17.0",
        "msix-issue",
    ),
    F("No completion descriptors found in CQ %d", (1,), f"{NETDEV}@2.11.0", "2.11.0-2.17.0", "tx-cq-check"),
    F("Completion descriptors found in CQ %d", (1,), f"{NETDEV}@2.11.0", "2.11.0-2.15.0", "tx-cq-check"),
    F("Faulty descriptor found in CQ %d", (1,), f"{NETDEV}@2.13.0", "2.13.0-2.15.0", "tx-cq-check"),
    F("Resetting the device\\n", (), f"{NETDEV}@2.11.0", "2.11.0-2.17.0", "resetting"),
    # the kernel's netdev watchdog (ena_tx_timeout, ena_find_and_timeout_queue)
    F(
        "TX q %d is paused for too long (threshold %u). Time since last napi %u usec. napi scheduled: %d\\n",
        (3, 5000000, 5924000, 1),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.11.1",
        "tx-queue-paused",
    ),
    F(
        "TX q %d is paused for too long (threshold %u). Time since last napi %u usec. napi scheduled: %d. "
        "msecs since last interrupt: %u\\n",
        (3, 5000000, 5924000, 1, 5924),
        f"{NETDEV}@2.12.0",
        "2.12.0-2.16.1",
        "tx-queue-paused",
    ),
    F(
        "TX q %d is paused for too long (threshold %u). usecs since napi %u. napi scheduled: %d. napi CPU: "
        "%d. msecs since interrupt: %u\\n",
        (3, 5000000, 5924000, 1, 7, 5924),
        f"{NETDEV}@2.17.0",
        "2.17.0",
        "tx-queue-paused",
    ),
    F(
        "napi handler hasn't been called for a long time but is scheduled\\n",
        (),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "napi-not-called",
    ),
    F(
        "TX timeout on invalid queue %u\\n",
        (40,),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "tx-timeout-invalid-queue",
    ),
    F(
        "timeout was called, but no offending queue was found\\n",
        (),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "tx-timeout-invalid-queue",
    ),
    # the timer service's health checks and the device's requests
    F("Keep alive watchdog timeout.\\n", (), f"{NETDEV}@2.11.0", "2.11.0-2.11.1", "keep-alive-timeout"),
    F(
        "Keep alive watchdog timeout, %u msecs since last keep alive.\\n",
        (6012,),
        f"{NETDEV}@2.12.0",
        "2.12.0-2.17.0",
        "keep-alive-timeout",
    ),
    F(
        "ENA admin queue is not in running state!\\n",
        (),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "admin-queue-down",
    ),
    F(
        "Potential MSIX issue on Rx side Queue = %d. Reset the device\\n",
        (1,),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "msix-issue",
    ),
    F(
        "The device has detected an unhealthy state, reset is requested\\n",
        (),
        f"{NETDEV}@2.12.0",
        "2.12.0-2.17.0",
        "device-unhealthy",
    ),
    F(
        "Received requet to refresh capabilities\\n",
        (),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "refresh-capabilities",
    ),
    F(
        "FW isn't responsive, skipping reset routine\\n",
        (),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.17.0",
        "fw-unresponsive",
    ),
    # completions the driver cannot use (Tx and Rx clean-up, ena_com's descriptor checks)
    F("Invalid req_id %u in qid %u\\n", (1024, 3), f"{NETDEV}@2.11.0", "2.11.0-2.12.3", "invalid-req-id"),
    F(
        "Invalid req_id %u in qid %u, queue type: %s\\n",
        (1024, 3, "regular"),
        f"{NETDEV}@2.13.0",
        "2.13.0-2.17.0",
        "invalid-req-id",
    ),
    F("Invalid req id %d\\n", (1024,), "ena_eth_com.h@2.11.0", "2.11.0-2.17.0", "invalid-req-id"),
    F(
        "tx_info doesn't have valid %s. qid %u req_id %u",
        ("skb", 3, 17),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.12.3",
        "req-id-no-packet",
    ),
    F(
        "tx_info doesn't have valid %s. qid %u req_id %u",
        ("xdp frame", 3, 17),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.12.3",
        "req-id-no-packet",
    ),
    F(
        "req id %u doesn't correspond to a packet. qid %u queue type: %s",
        (17, 3, "ZC queue"),
        f"{NETDEV}@2.13.0",
        "2.13.0-2.17.0",
        "req-id-no-packet",
    ),
    F("Page is NULL. qid %u req_id %u\\n", (2, 311), f"{NETDEV}@2.11.0", "2.11.0-2.13.3", "rx-page-null"),
    F(
        "SKB: Page is NULL. qid %u req_id %u\\n",
        (2, 311),
        f"{NETDEV}@2.14.0",
        "2.14.0-2.17.0",
        "rx-page-null",
    ),
    F(
        "XDP: Page is NULL. qid %u req_id %u\\n",
        (2, 311),
        "ena_xdp.c@2.14.0",
        "2.14.0-2.17.0",
        "rx-page-null",
    ),
    F(
        "Corrupted TX descriptor on q_id: %d, req_id: %u\\n",
        (3, 17),
        "ena_eth_com.h@2.11.0",
        "2.11.0-2.17.0",
        "tx-descriptor-corrupted",
    ),
    F(
        "Corrupted RX descriptor #%d on q_id: %d, req_id: %u\\n",
        (0, 2, 311),
        "ena_eth_com.c@2.11.0",
        "2.11.0-2.12.3",
        "rx-descriptor-bad",
    ),
    F(
        "Corrupted RX descriptor #%u on q_id: %u, req_id: %u\\n",
        (0, 2, 311),
        "ena_eth_com.c@2.13.0",
        "2.13.0-2.17.0",
        "rx-descriptor-bad",
    ),
    F(
        "First bit is on in descriptor #%d on q_id: %d, req_id: %u\\n",
        (1, 2, 311),
        "ena_eth_com.c@2.11.0",
        "2.11.0-2.12.3",
        "rx-descriptor-bad",
    ),
    F(
        "First bit is on in descriptor #%u on q_id: %u, req_id: %u\\n",
        (1, 2, 311),
        "ena_eth_com.c@2.13.0",
        "2.13.0-2.17.0",
        "rx-descriptor-bad",
    ),
    F(
        "Bad req_id in descriptor #%u on q_id: %u, req_id: %u\\n",
        (0, 2, 4096),
        "ena_eth_com.c@2.17.0",
        "2.17.0",
        "rx-descriptor-bad",
    ),
    F(
        "Too many RX cdescs (%d) > MAX(%d)\\n",
        (20, 19),
        "ena_eth_com.c@2.11.0",
        "2.11.0-2.12.3",
        "rx-too-many-descs",
    ),
    F(
        "Too many RX cdescs (%u) > MAX(%u)\\n",
        (20, 19),
        "ena_eth_com.c@2.13.0",
        "2.13.0-2.17.0",
        "rx-too-many-descs",
    ),
    # the reset task (ena_fw_reset_device), its restore, and the resets of a reconfiguration
    F("Trigger reset is on\\n", (), f"{NETDEV}@2.11.0", "2.11.0-2.17.0", "trigger-reset"),
    F("Device reset failed\\n", (), f"{NETDEV}@2.11.0", "2.11.0-2.17.0", "reset-failed"),
    F(
        "Device reset completed successfully, Driver info: %s\\n",
        ("Elastic Network Adapter (ENA) v2.11.0g",),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.13.0",
        "reset-completed",
        dev=True,
    ),
    F(
        "Device reset completed, status: %d, Driver info: %s\\n",
        (0, "Elastic Network Adapter (ENA) v2.13.1g"),
        f"{NETDEV}@2.13.1",
        "2.13.1-2.17.0",
        "reset-completed",
        dev=True,
    ),
    F(
        "Device reset completed, status: %d, Driver info: %s\\n",
        (-5, "Elastic Network Adapter (ENA) v2.17.0g"),
        f"{NETDEV}@2.13.1",
        "2.13.1-2.17.0 (a failed reset)",
        "reset-failed",
        dev=True,
    ),
    F(
        "Reset attempt failed. Can not reset the device\\n",
        (),
        f"{NETDEV}@2.11.0",
        "2.11.0-2.16.1 (restore)",
        "reset-failed",
        dev=True,
    ),
    F(
        "Reset attempt failed. Can not reset the device\\n",
        (),
        f"{NETDEV}@2.17.0",
        "2.17.0 (close, queue change)",
        "reset-failed",
    ),
    F(
        "Reset attempt failed. Can not reset the device\\n",
        (),
        "ena_sysfs.c@2.17.0",
        "2.17.0",
        "reset-failed",
    ),
    F("Restore attempt failed.\\n", (), f"{NETDEV}@2.17.0", "2.17.0", "reset-failed", dev=True),
]

# Healthy driver lines (probe, set-up, ifdown, notifications) of 2.11.0-2.17.0: none is reset-class.
HEALTHY: list[Format] = [
    F(
        "%s found at mem %lx, mac addr %pM\\n",
        ("Elastic Network Adapter (ENA)", 0xFEBF8000, "02:4b:8f:6a:1c:3d"),
        f"{NETDEV}@2.17.0",
        "2.11.0-2.17.0",
        "",
        dev=True,
    ),
    F("ENA device version: %d.%d\\n", (0, 10), "ena_com.c@2.17.0", "2.11.0-2.17.0", "", dev=True),
    F(
        "ENA controller version: %d.%d.%d implementation version %d\\n",
        (0, 0, 1, 1),
        "ena_com.c@2.17.0",
        "2.11.0-2.17.0",
        "",
        dev=True,
    ),
    F(
        "LLQ is not supported Fallback to host mode policy.\\n",
        (),
        f"{NETDEV}@2.17.0",
        "2.11.0-2.17.0",
        "",
        dev=True,
    ),
    F("ENA Large LLQ is %s\\n", ("disabled",), f"{NETDEV}@2.17.0", "2.11.0-2.17.0", "", dev=True),
    F(
        "Forcing large headers and decreasing maximum TX queue size to %d\\n",
        (512,),
        f"{NETDEV}@2.17.0",
        "2.11.0-2.17.0",
        "",
        dev=True,
    ),
    F(
        "Enable only %d MSI-X (out of %d), reduce the number of queues\\n",
        (5, 9),
        f"{NETDEV}@2.17.0",
        "2.11.0-2.17.0",
        "",
    ),
    F(
        "Freed %u uncompleted tx skbs, qid %d, longest msecs since submission %u\\n",
        (3, 0, 12),
        f"{NETDEV}@2.15.0",
        "2.15.0-2.16.1",
        "",
    ),
    F(
        "Freed %u uncompleted tx pkts, qid %d, longest msecs since submission %u\\n",
        (3, 0, 12),
        f"{NETDEV}@2.17.0",
        "2.17.0",
        "",
    ),
    F("Trigger refill for ring %d\\n", (2,), f"{NETDEV}@2.17.0", "2.11.0-2.17.0", ""),
    F(
        "Refilled rx qid %d with only %d buffers (from %d)\\n",
        (1, 200, 1023),
        f"{NETDEV}@2.17.0",
        "2.11.0-2.17.0",
        "",
    ),
    F(
        "Sub-optimal configuration notification code: %d. Refer to AWS ENA documentation for additional "
        "details and mitigation options.\\n",
        (1,),
        f"{NETDEV}@2.17.0",
        "2.11.0-2.17.0",
        "",
    ),
    F(
        "XDP program is set, changing the max_mtu from %d to %d",
        (9216, 3498),
        "ena_xdp.c@2.17.0",
        "2.11.0-2.17.0",
        "",
    ),
    F("Rx queue %d locked\\n", (3,), f"{NETDEV}@2.17.0", "2.11.0-2.17.0", ""),
]
