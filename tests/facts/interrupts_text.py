"""A /proc/interrupts of an ENA-shaped host (three CPUs, two queue vectors and a management one)."""

from __future__ import annotations

ENA = """\
           CPU0       CPU1       CPU2
  24:          0          0          0   PCI-MSI 81920-edge      ena-mgmnt@pci:0000:00:05.0
  25:        100       5000          0   PCI-MSI 81921-edge      ens5-Tx-Rx-0
  26:          7          0       9000   PCI-MSI 81922-edge      ens5-Tx-Rx-1
  27:          1          2          3   PCI-MSI 65536-edge      nvme0q0
 NMI:          0          0          0   Non-maskable interrupts
"""
