"""systemd of the running host, asked live: one batched ``systemctl show`` over every loaded service.

Restart counters, read at the start and end of a soak for attribution::

    systemctl show --no-pager --all --property=Id,NRestarts,ActiveState,SubState -- '*.service'

and the live unit state of ``imagelint audit --live`` (the collector's shell makes the same call
into a bundle, which :mod:`imagelint.bundle.probes` reads back)::

    systemctl show --no-pager --all \\
        --property=Id,ActiveState,SubState,Result,NRestarts,ExecMainStatus,UnitFileState -- '*.service'

A glob pattern is expanded by the manager over the units it has loaded; ``--all`` keeps inactive
units in the set (without it, only those ``list-units`` shows by default, so a unit that restarted
during the soak and then stopped would drop out of the end snapshot). ``systemctl show`` with no
unit argument at all describes the manager instead. Checked against systemd 252 booted in a
container: 67 units with ``--all`` (as many as ``list-units --all``), 13 without. The output goes to
the parsers of :mod:`imagelint.facts.systemd.show` and :mod:`imagelint.facts.systemd.live`.

``prefix`` runs systemctl through another command (``nsenter -t PID -m -p ...``) to ask a
manager in other namespaces, as the tests do with a container booted by systemd-nspawn.
Where no systemd runs as PID 1 (``/run/systemd/system`` absent, as ``sd_booted()`` decides) the
live state is *not booted*. An unusable systemctl is reported in what is returned, never raised.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence

from imagelint.facts.systemd.live import LiveState, parse_live
from imagelint.facts.systemd.show import RestartSnapshot, parse_systemctl_show

RESTART_PROPERTIES = ("Id", "NRestarts", "ActiveState", "SubState")
LIVE_PROPERTIES = ("Id", "ActiveState", "SubState", "Result", "NRestarts", "ExecMainStatus", "UnitFileState")
DEFAULT_TIMEOUT = 15.0


def run_systemctl_show(
    properties: Sequence[str],
    *,
    systemctl: str = "systemctl",
    extra_args: Sequence[str] = (),
    prefix: Sequence[str] = (),
    pattern: str = "*.service",
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[str | None, str | None]:
    """Run the one batched ``systemctl show --all`` for ``properties``: (stdout, None) or (None, why not).

    ``extra_args`` go before ``show`` (``--user``, ``-M machine``...); ``prefix`` runs systemctl
    through another command (``nsenter -t PID -a`` to reach a manager in another namespace).
    """
    exe = systemctl if prefix else shutil.which(systemctl)
    if exe is None:
        return None, f"{systemctl} not found"
    argv = [*prefix, exe, *extra_args, "show", "--no-pager", "--all", "--property=" + ",".join(properties)]
    argv += ["--", pattern]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"systemctl show did not answer within {timeout:g} s"
    except OSError as exc:
        return None, f"cannot run systemctl: {exc.strerror or exc}"
    if proc.returncode != 0:
        first = next((ln.strip() for ln in proc.stderr.splitlines() if ln.strip()), "")
        return None, f"systemctl show failed (exit {proc.returncode}): {first}".rstrip(": ")
    return proc.stdout, None


def collect_restart_counters(
    *,
    systemctl: str = "systemctl",
    extra_args: Sequence[str] = (),
    prefix: Sequence[str] = (),
    pattern: str = "*.service",
    timeout: float = DEFAULT_TIMEOUT,
) -> RestartSnapshot:
    """Run the one batched ``systemctl show`` and parse it; an unusable systemctl is reported, not raised.

    Arguments as for :func:`run_systemctl_show`.
    """
    wall = time.time()
    out, reason = run_systemctl_show(
        RESTART_PROPERTIES,
        systemctl=systemctl,
        extra_args=extra_args,
        prefix=prefix,
        pattern=pattern,
        timeout=timeout,
    )
    if out is None:
        return RestartSnapshot(wall, False, reason, booted=_booted(prefix))
    return RestartSnapshot(wall, True, None, parse_systemctl_show(out))


def collect_live_state(
    *,
    prefix: Sequence[str] = (),
    systemctl: str = "systemctl",
    timeout: float = DEFAULT_TIMEOUT,
) -> LiveState:
    """Ask the running manager once; never raises (an unusable systemctl is reported in the state)."""
    wall = time.time()
    booted = _booted(prefix)
    out, reason = run_systemctl_show(LIVE_PROPERTIES, systemctl=systemctl, prefix=prefix, timeout=timeout)
    if out is None:
        if not booted:
            reason = f"this host was not booted with systemd (no /run/systemd/system); {reason}"
        return LiveState(wall, False, booted, reason)
    return LiveState(wall, True, True, None, parse_live(out))


def _booted(prefix: Sequence[str]) -> bool:
    """Whether a systemd manager runs where systemctl asks (``sd_booted()``; through a prefix, the
    manager of the other namespaces is taken to run)."""
    return bool(prefix) or os.path.isdir("/run/systemd/system")
