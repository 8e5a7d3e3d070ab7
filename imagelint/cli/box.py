"""Every command runs in a child process under OS limits; the parent only waits and reports.

Third-party parsers of untrusted data allocate from on-disk counts and can spin or crash before
imagelint's own caps apply. The child sets the rlimits of :mod:`imagelint.limits` and runs the
command; the parent holds no state, so whatever happens to the child, the parent is left to say so
in one line with exit 3 (inconclusive):

- the child exits: its exit code is the run's;
- ``SIGXCPU`` or ``SIGKILL`` after it: the CPU-time limit was reached;
- ``SIGTERM``, ``SIGINT``, ``SIGHUP`` or ``SIGQUIT`` (a CI cancel, ``timeout``): terminated;
- any other signal (``SIGSEGV`` in a C parser, ``SIGBUS``, ``SIGABRT``, the kernel's OOM killer):
  the reader died, named with the signal.

Signals sent to the parent (``kill PID``: CI cancelling a job, a supervisor stopping ``watch``) are
passed on to the child, which cleans up as before, even when imagelint was started with them blocked
(the child unblocks them; an ignored one stays ignored). A terminal's ^C already reaches both (they share a
process group), so one that came from the kernel is not passed on twice.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Callable

from imagelint import limits, stderr
from imagelint.errors import ExitCode

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_SI_USER = 0  # si_code of a signal sent with kill(2); a terminal's ^C has SI_KERNEL


def run_boxed(command: Callable[[], int], run_limits: limits.Limits) -> int:
    """Run ``command`` (returning an exit code) in a child under ``run_limits``; return its exit code."""
    limits.SUBJECT.share()
    watched = {*FORWARDED, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        # the signals passed on are unblocked whatever mask imagelint was started with: a caller's
        # blocked SIGINT left the child deaf to what the parent passes on, and a soak ran its course
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask - set(FORWARDED))
        code = int(ExitCode.INCONCLUSIVE)
        try:
            limits.apply(run_limits)
            code = command()
        finally:
            # os._exit, not SystemExit: nothing above this frame may go on running in the child
            atexit._run_exitfuncs()
            _flush()
            os._exit(code)
    try:
        status = _wait(pid, watched)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    return _exit_code(status, run_limits)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _wait(pid: int, watched: set[signal.Signals]) -> int:
    """Pass signals on to the child until it ends; its wait status."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        info = signal.sigwaitinfo(watched)
        if info.si_signo != signal.SIGCHLD and (info.si_signo != signal.SIGINT or info.si_code == _SI_USER):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, info.si_signo)


def _exit_code(status: int, run_limits: limits.Limits) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    number = os.WTERMSIG(status)
    subject = limits.current_subject()
    where = f"{subject}: " if subject else ""
    if number == signal.SIGXCPU or (number == signal.SIGKILL and _cpu_spent(run_limits.cpu_seconds)):
        stderr.error(limits.met(run_limits.describe_cpu()))
        return int(ExitCode.INCONCLUSIVE)
    if number == signal.SIGKILL:
        reason = "the reader was killed (SIGKILL: out of memory, or stopped from outside); inconclusive"
    elif number in FORWARDED:  # CI cancelling the job, `timeout`, a supervisor: not a fault of ours
        reason = f"terminated ({signal.Signals(number).name}, from outside); inconclusive"
    else:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        reason = f"the reader died with {name}; inconclusive (please report this)"
    stderr.error(where + reason)
    return int(ExitCode.INCONCLUSIVE)


def _cpu_spent(limit: int) -> bool:
    """True when the reaped child used its whole CPU limit (so the hard limit's SIGKILL was the limit's)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return bool(limit) and usage.ru_utime + usage.ru_stime >= limit
