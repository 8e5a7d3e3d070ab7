"""Is a wait for the SSM agent doomed? The instance's state and its serial console say so early.

`imagelint ami` waits up to ``--ssm-timeout`` (default 10 minutes) for the instance's agent to
register. Two things end that wait sooner, each with the reason in the error:

- the instance left ``running`` (it powered off, was stopped or terminated: a kernel that does not
  boot, the dead-man switch, someone else): it will never register;
- the serial console (``GetConsoleOutput``) shows the boot finished (cloud-init's "finished at"
  line, systemd's "Reached target … Multi-User System", or a getty's ``login:`` prompt) or the kernel
  panicked, and still no agent registered ``grace`` seconds later. An SSM agent typically
  registers within a minute of the boot finishing; an image without one (stock Debian, Ubuntu
  minimal) or a subnet without a route to the SSM endpoints never does, so the wait ends minutes
  early, with the console in the error.

The console is the image's output, hostile input: only its last ``CONSOLE_TAIL`` characters are
searched, with patterns that run in linear time, and what is shown is escaped
(:func:`imagelint.aws.ec2.console_output`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import field
from typing import Any

from imagelint.aws import ec2 as ec2_ops
from imagelint.aws.errors import AwsError
from imagelint.records import dataclass

CONSOLE_TAIL = 65536  # characters of the console searched for the markers
# the markers allow for systemd's colour escapes between "Reached target" and the description
BOOT_FINISHED = re.compile(
    r"Cloud-init v\. [^\n]{0,80} finished at"
    r"|Reached target [^\n]{0,80}Multi-User System"
    r"|^[\w.-]{1,64} login: ",
    re.M,
)
PANIC = re.compile(r"Kernel panic - not syncing[^\n]{0,200}")


def console_verdict(console: str) -> str | None:
    """The string "finished" for a finished boot, the panic line for a kernel panic, else None."""
    tail = console[-CONSOLE_TAIL:]
    panic = PANIC.search(tail)
    if panic:
        return panic.group(0)
    return "finished" if BOOT_FINISHED.search(tail) else None


@dataclass
class BootWatch:
    """Called on every SSM poll; looks at EC2 only every ``every`` seconds. :meth:`doomed` is the
    reason the agent will not register, or None while it still may."""

    ec2: Any
    instance_id: str
    grace: float = 180.0
    every: float = 30.0
    clock: Callable[[], float] = time.monotonic
    _next: float = field(default=0.0, init=False)
    _finished_at: float | None = field(default=None, init=False)

    def doomed(self) -> str | None:
        now = self.clock()
        if now < self._next:
            return None
        self._next = now + self.every
        try:
            instance = ec2_ops.describe_instance(self.ec2, self.instance_id, delay=1.0)
        except AwsError:
            return None  # no view of it now; the deadline still stands
        state = instance.get("State", {}).get("Name", "")
        if state in ec2_ops.NOT_RUNNING:
            reason = instance.get("StateReason") or {}
            why = reason.get("Message") or reason.get("Code")
            return f"the instance is {state}" + (f" ({why})" if why else "")
        console = console_verdict(ec2_ops.console_text(self.ec2, self.instance_id))
        if console is None:
            return None
        if console != "finished":
            from imagelint.report.escape import for_log

            return f"the kernel panicked ({for_log(console)})"
        if self._finished_at is None:
            self._finished_at = now
        if now - self._finished_at >= self.grace:
            return (
                f"the boot finished (serial console) {now - self._finished_at:.0f}s ago and no SSM agent "
                "registered: the image lacks the SSM agent (stock Debian and Ubuntu minimal images do), "
                "or the subnet has no route to the SSM endpoints"
            )
        return None
