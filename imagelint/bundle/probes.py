"""The live and soak facts of a bundle, from what the collector recorded (``imagelint/live``,
``imagelint/soak``), parsed at home with the same parsers as a local run.

- ``live/start.txt`` / ``live/end.txt``: the batched ``systemctl show`` (the form
  :mod:`imagelint.probes.systemd` runs), with ``.status`` files (``wall``, ``booted``, ``rc``,
  ``stderr``); the last one is the live state of ``audit --live``, both are the soak's restart
  counters;
- ``soak/layout`` (which hierarchies hold memory), ``soak/sample.NNNNN`` (``uptime``, ``wall``,
  then ``@@ /proc/cgroups``, ``@@ memdirs N`` (v1), ``@@ cgroup.stat`` and ``@@ subtree NAME``
  (v2) sections), ``soak/probe.start`` / ``probe.end`` (the memory.stat walk); the per-CPU reads,
  the walks during the soak and the NIC interrupts are :mod:`imagelint.bundle.symptoms`.
"""

from __future__ import annotations

import re
from pathlib import Path

from imagelint.bundle.numbers import count, seconds
from imagelint.errors import ImageReadError
from imagelint.facts import cgroups as cg
from imagelint.facts.soak import SoakResult
from imagelint.facts.systemd.live import LiveState, parse_live
from imagelint.facts.systemd.show import RestartSnapshot, parse_show_blocks, parse_systemctl_show

MAX_RECORD = 64 * 1024 * 1024
MAX_MOUNTED = 256  # entries of /sys/fs/cgroup (a v1 host: about 15)
CGROUP_ROOT = "/sys/fs/cgroup"
_HIERARCHY = re.compile(r"[A-Za-z0-9._,-]{1,64}")


def _read(path: Path) -> str:
    where = f"imagelint/{path.parent.name}/{path.name}"
    try:
        if path.stat().st_size > MAX_RECORD:
            raise ImageReadError(where, "over 64 MiB; not read")
        return path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:  # a record the collector always writes is missing, or a directory
        raise ImageReadError(where, f"cannot be read: {exc.strerror or exc}") from None


def _status(meta: Path, name: str) -> dict[str, str] | None:
    path = meta / "live" / f"{name}.status"
    if not path.is_file():
        return None
    values: dict[str, str] = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key, value)
    return values


def _show(meta: Path, name: str) -> tuple[float, str | None, str | None, bool] | None:
    """(wall, output or None, why not, booted) of one recorded ``systemctl show``."""
    status = _status(meta, name)
    if status is None:
        return None
    wall = seconds(status.get("wall"), f"imagelint/live/{name}.status", "wall")
    # only a recorded "booted 0" says no manager ran (not applicable); a record that does not say is
    # read as one that ran (a failed call is then missing data: inconclusive)
    booted = status.get("booted") != "0"
    if status.get("rc") != "0":
        reason = f"systemctl show failed (exit {status.get('rc')}): {status.get('stderr', '')}".rstrip(": ")
        if not booted:
            reason = f"this host was not booted with systemd (no /run/systemd/system); {reason}"
        return wall, None, reason, booted
    return wall, _read(meta / "live" / f"{name}.txt"), None, booted


def live_state(meta: Path) -> LiveState | None:
    """The manager's unit states when the files were collected: at the end of the soak when there was
    one (the journal in the bundle is read after it, so both tell of the same moment), else at the
    start; None when the bundle has none."""
    name = "end" if _status(meta, "end") is not None else "start"
    shown = _show(meta, name)
    if shown is None:
        return None
    wall, text, reason, booted = shown
    if text is None:
        return LiveState(wall, False, booted, reason)
    for props in parse_show_blocks(text):  # parse_live reads a bad number as unknown: here it is refused
        for key in ("NRestarts", "ExecMainStatus"):
            if props.get(key):
                count(props[key], f"imagelint/live/{name}.txt", f"{props['Id'][:80]!r}: {key}")
    return LiveState(wall, True, True, None, parse_live(text))


def restart_snapshot(meta: Path, name: str) -> RestartSnapshot | None:
    shown = _show(meta, name)
    if shown is None:
        return None
    wall, text, reason, booted = shown
    if text is None:
        return RestartSnapshot(wall, False, reason, booted=booted)
    return RestartSnapshot(wall, True, None, parse_systemctl_show(text, where=f"imagelint/live/{name}.txt"))


def _sections(text: str) -> tuple[dict[str, tuple[str, int]], list[tuple[str, str, int]]]:
    """The ``key value`` lines before the first section (key -> (value, line number)), and each
    ``@@ NAME`` section as (NAME, body, line number of its ``@@`` line)."""
    head: dict[str, tuple[str, int]] = {}
    sections: list[tuple[str, list[str], int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("@@ "):
            sections.append((line[3:], [], number))
        elif sections:
            sections[-1][1].append(line)
        else:
            key, _, value = line.partition(" ")
            head[key] = (value, number)
    return head, [(name, "\n".join(lines), number) for name, lines, number in sections]


def layout(meta: Path) -> cg.CgroupLayout:
    """The host's cgroup layout, decided by :func:`imagelint.facts.cgroups.decide_layout` (as on a
    live host) from what the collector found under ``/sys/fs/cgroup`` and the first sample's
    ``/proc/cgroups``."""
    facts: dict[str, list[str]] = {}
    for line in _read(meta / "soak" / "layout").splitlines():
        key, _, value = line.partition(" ")
        facts.setdefault(key, []).append(value)
    samples = sorted((meta / "soak").glob("sample.*"))
    if not samples:
        raise ImageReadError("imagelint/soak", "no cgroup samples")
    _, sections = _sections(_read(samples[0]))
    proc = {name: body for name, body, _ in sections}.get("/proc/cgroups")
    if proc is None:
        raise ImageReadError(f"imagelint/soak/{samples[0].name}", "no /proc/cgroups section")
    rows = cg.parse_proc_cgroups(proc, where=f"imagelint/soak/{samples[0].name}: /proc/cgroups")
    mounted = facts.get("mounted", [])
    if len(mounted) > MAX_MOUNTED:
        raise ImageReadError("imagelint/soak/layout", f"more than {MAX_MOUNTED} hierarchies mounted")
    for name in mounted:
        # the collector lists the entries of /sys/fs/cgroup (``cpu,cpuacct``, ``systemd``...): any
        # other name is forged, and may be one a directory cannot have (NUL, '/', 300 bytes)
        if not _HIERARCHY.fullmatch(name) or name in (".", ".."):
            raise ImageReadError("imagelint/soak/layout", f"mounted {name[:80]!r} is not a directory name")
    root = Path(CGROUP_ROOT)
    v2 = (facts.get("v2") or ["-"])[0]
    v2_path = Path(v2) if v2 in (CGROUP_ROOT, f"{CGROUP_ROOT}/unified") else None
    controllers = tuple((facts.get("controllers") or [""])[0].split()) if v2_path is not None else ()
    v1 = (facts.get("v1memory") or ["-"])[0]
    v1_memory_path = Path(v1) if v1 != "-" and v2_path != root else None
    # the directories under /sys/fs/cgroup the collector saw, with the memory mount and the unified root
    dirs = {
        *mounted,
        *(["memory"] if v1 != "-" else []),
        *(["unified"] if v2_path == root / "unified" else []),
    }
    return cg.decide_layout(rows, root, v2_path, controllers, v1_memory_path, dirs.__contains__)


def samples(meta: Path, found: cg.CgroupLayout) -> list[cg.Sample]:
    out: list[cg.Sample] = []
    for path in sorted((meta / "soak").glob("sample.*")):
        where = f"imagelint/soak/{path.name}"
        head, sections = _sections(_read(path))
        v2_root: cg.CgroupStat | None = None
        subtrees: list[cg.SubtreeCount] = []
        proc: tuple[str, str] | None = None
        dirs: int | None = None
        for name, body, number in sections:
            if name == "/proc/cgroups":
                proc = (body, f"{where}: /proc/cgroups")
            elif name.startswith("memdirs "):
                dirs = count(name[8:], f"{where}:{number}", "memdirs")
            elif name == "cgroup.stat":
                v2_root = cg.parse_cgroup_stat(body, where=f"{where}: cgroup.stat")
            elif name.startswith("subtree "):
                subtrees.append(cg.v2_subtree(name[8:], cg.parse_cgroup_stat(body, where=f"{where}: {name}")))
        mono, wall = (_head_seconds(head, key, where) for key in ("uptime", "wall"))
        out.append(
            cg.sample_from_counts(
                mono, wall, found, v2_root, tuple(subtrees), proc_cgroups=proc, v1_dirs=dirs
            )
        )
    return out


def _head_seconds(head: dict[str, tuple[str, int]], key: str, where: str) -> float:
    value, number = head.get(key, (None, 0))
    return seconds(value, f"{where}:{number}" if number else where, key)


_TIMES = re.compile(r"(\S+?)m(\S+?)s")


def shell_times(text: str, where: str) -> list[float]:
    """The shell's user and system time, then its children's, from the output of ``times``."""
    return [count(m, where, "times") * 60 + seconds(s, where, "times") for m, s in _TIMES.findall(text)][:4]


def _children_cpu(text: str, where: str) -> float:
    """User + system time of the shell's children (the 2nd line of ``times``)."""
    return sum(shell_times(text, where)[2:4])


def probe(meta: Path, name: str, found: cg.CgroupLayout) -> cg.ProbeResult | None:
    path = meta / "soak" / f"probe.{name}"
    if not path.is_file():
        return None
    values = dict(line.partition(" ")[::2] for line in _read(path).splitlines())
    where = f"imagelint/soak/probe.{name}"
    cpu = _children_cpu(values.get("times-after", ""), where) - _children_cpu(
        values.get("times-before", ""), where
    )
    cgroups, errors = (count(values.get(key), where, key) for key in ("cgroups", "errors"))
    return cg.ProbeResult(
        found.memory,
        max(0, cgroups - errors),
        count(values.get("ns"), where, "ns") / 1e9,
        max(0.0, cpu),
        count(values.get("bytes"), where, "bytes"),
        errors,
    )


def _returned(meta: Path, name: str) -> float | None:
    """When the recorded ``systemctl show`` NAME had returned (None: not recorded)."""
    status = _status(meta, name)
    if status is None or "returned" not in status:
        return None
    return seconds(status["returned"], f"imagelint/live/{name}.status", "returned")


def soak_result(meta: Path, found: cg.CgroupLayout, duration: float, interval: float) -> SoakResult:
    """The soak the collector recorded. Its window, in which the journal's restarts are counted, spans
    the restart snapshots too, as a local soak's does: from before the first counter read to after the
    last. The snapshots are taken outside the samples, and on a loaded host the end one follows the
    last sample by seconds (a memory.stat walk, the NIC records): a window of the samples alone missed
    the restarts the counters saw in those seconds."""
    taken = samples(meta, found)
    start, end = restart_snapshot(meta, "start"), restart_snapshot(meta, "end")
    starts = [taken[0].wall] + ([start.wall] if start else [])
    returned = _returned(meta, "end")
    ends = [taken[-1].wall] + ([end.wall] if end else []) + ([returned] if returned is not None else [])
    return SoakResult(
        duration, interval, taken, cut_short(taken, duration, interval), min(starts), max(ends), start, end
    )


def cut_short(taken: list[cg.Sample], duration: float, interval: float) -> bool:
    """Whether the recorded samples stop before the soak's end. The collector samples on a grid and,
    on a loaded host, skips the slots a slow sample overran rather than bursting (as the local soak
    does), so fewer samples than slots is no sign of a soak cut short: its last sample is taken once
    the slot at ``duration`` is due. The first sample is taken a moment after the grid's origin, so
    the span between them may fall short of ``duration`` by less than one interval."""
    return not taken or taken[-1].monotonic - taken[0].monotonic < duration - interval
