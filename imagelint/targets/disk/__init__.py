"""Disk image targets: a raw disk, qcow2, vmdk, vhd or vhdx read in place, with no mount, loop device or root.

* :func:`open_disk_file` (the CLI's entry): a disk image file, its container format found by content.
* :func:`open_disk_target`: any seekable read-only stream of a *raw* disk (the EBS snapshot reader
  hands one over), with an optional ``stats()`` method whose counters land in the report.
* :func:`open_disks`: the several disks of one machine (an AMI's snapshots), fstab mounts matched
  on any of them, and a mount boot makes that the audit cannot see ending the run (:mod:`.machine`).

Only the file named is opened: a device node, FIFO or socket is refused, and so is a container that
needs another file (a VMDK or VHDX parent, a qcow2 backing or data file, a differencing VHD, a VMDK
descriptor's extents). Header counts are checked against the file or volume before dissect builds a
table from them (:mod:`.containers`, :mod:`.tables`, :mod:`.extmap`); what does not fit is corruption.

The root filesystem is found whatever the table (GPT, MBR, none, LVM), other filesystems are mounted
in the root's ``/etc/fstab`` order, and paths resolve through the shared resolver like any target.
The on-disk formats are read by the dissect libraries (AGPL-3.0), an optional extra:
the disk extra (``imagelint.errors.extra_hint``). Nothing here imports them until a disk image is opened.
"""

from __future__ import annotations

from imagelint.targets.disk.machine import Disk, open_disks
from imagelint.targets.disk.open import is_disk_image, open_disk_file, open_disk_target

__all__ = ["Disk", "is_disk_image", "open_disk_file", "open_disk_target", "open_disks"]
