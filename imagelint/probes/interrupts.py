"""NIC queue interrupts of the running host: ``/proc/interrupts`` read, each NIC's device found in sysfs.

:func:`read_interrupts` reads ``/proc/interrupts`` (capped) and hands it to
:func:`imagelint.facts.interrupts.parse_interrupts`. :func:`nic_devices` reads what sysfs says of
each physical interface's device (its name and MSI IRQs: ``/sys/class/net/IF/device/msi_irqs``, or
the parent device's for virtio); :func:`nic_irqs` matches them with
:func:`imagelint.facts.interrupts.match_nic_irqs`, as a bundle's recorded devices are matched.
"""

from __future__ import annotations

import os
from pathlib import Path

from imagelint.facts.interrupts import IrqRow, NicDevice, match_nic_irqs, parse_interrupts

MAX_BYTES = 4 << 20


def read_interrupts(path: str = "/proc/interrupts") -> dict[str, IrqRow] | None:
    """None when the file cannot be read (no /proc, a container that hides it)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES)
    except OSError:
        return None
    return parse_interrupts(data.decode("ascii", errors="replace"))


def nic_devices(net: str = "/sys/class/net") -> dict[str, NicDevice]:
    """Interface → its device (physical interfaces only: those with a ``device`` in sysfs)."""
    out: dict[str, NicDevice] = {}
    try:
        names = sorted(os.listdir(net))
    except OSError:
        return out
    for iface in names:
        device = Path(net, iface, "device")
        if not device.exists():
            continue
        irqs: set[str] = set()
        for msi in (device / "msi_irqs", device / ".." / "msi_irqs"):
            try:
                irqs.update(n for n in os.listdir(msi) if n.isdigit())
            except OSError:
                continue
        out[iface] = NicDevice(os.path.basename(os.path.realpath(device)), frozenset(irqs))
    return out


def nic_irqs(rows: dict[str, IrqRow], net: str = "/sys/class/net") -> dict[str, list[str]]:
    """Interface → its IRQ numbers, on this host (:func:`nic_devices`, :func:`match_nic_irqs`)."""
    return match_nic_irqs(rows, nic_devices(net))
