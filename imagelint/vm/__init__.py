"""A disk image booted in a throwaway local QEMU machine, reached over SSH (``imagelint vm check``).

Beside ``aws`` in the layers: it boots and reaches a machine, and runs no rules of its own. The
machine (:mod:`.machine`) boots the image's own boot path on a temporary qcow2 overlay (the image is
never written, :mod:`.disk`; a bare filesystem image, which has no boot path, by its own kernel:
:mod:`.kernel`), gives the guest a throwaway key through a NoCloud seed and a systemd
SMBIOS credential (:mod:`.access`), captures its serial console from power-on, bounded
(:mod:`.console`), and leaves nothing behind: its process group stopped, its scratch directory removed.
"""

from __future__ import annotations

from imagelint.errors import ExitCode, ImageLintError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from imagelint.facts.journal.console import ConsoleLog


class VmError(ImageLintError):
    """The machine could not be booted or reached: inconclusive, with the console's tail when there is one."""

    exit_code = ExitCode.INCONCLUSIVE

    def __init__(self, message: str, *, where: str | None = None, console: str = "") -> None:
        super().__init__(message, where=where)
        self.console = console
        self.accel = ""  # the accelerator the machine ran under, once one was chosen
        self.log: ConsoleLog | None = None  # the console's kernel lines, once the machine is stopped
        self.firmware = ""  # the firmware the machine booted, and why
