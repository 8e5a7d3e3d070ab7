"""``audit --hosts FILE`` and ``soak --hosts FILE``: many running hosts over ssh, one report.

FILE holds one ``ssh://[USER@]HOST[:PORT]`` a line (blank lines and ``#`` comments skipped); every
line is checked before any host is reached, a bad one is refused with ``FILE:LINE`` (exit 2). At most
``--parallel`` hosts run their collector at once (:func:`imagelint.collector.ssh.transport.collect`,
the transport the ``ssh`` opener uses); their bundles, at most that many on disk at a time, are
judged one after another here through the opener registry (:func:`imagelint.session.bundle_reports`),
as ``fleet`` judges its instances' bundles. Each host's bundle is saved in a directory of its own,
after its announced size is checked against the free space (:mod:`imagelint.collector.room`); whatever
goes wrong for one host, here or there (unreachable, a bundle that does not fit or does not decode, a
disk that fills up anyway, a write error), is that host's row, and the others are judged. The report
holds every host's findings (subjects prefixed with the host), ``facts.hosts`` with a row per host
(``coverage``: checked or no-report, its verdict and counts, the reason) and one verdict from
:func:`imagelint.report.verdict.decide`: a host without a usable bundle is an error, so the run is
inconclusive unless another host fails.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from imagelint.collector.plan import instance_plan
from imagelint.collector.ssh.spec import HostSpec, parse
from imagelint.collector.ssh.transport import MARGIN, collect
from imagelint.commands import host_failure
from imagelint.commands.host_failure import judged_then_removed, saved_apart
from imagelint.errors import UsageError
from imagelint.report import Report, Verdict
from imagelint.report.merge import empty_report, merge, with_rows
from imagelint.session import PreparedRun, RunOptions, bundle_reports, prepare, publish

MAX_HOSTS = 10_000
MAX_FILE = 1024 * 1024  # bytes of hosts file read at most


def read_hosts(path: Path) -> list[HostSpec]:
    """The hosts ``path`` lists, in order, each once; a UsageError naming ``path:line`` otherwise."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as exc:
        raise UsageError(f"--hosts {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE:
        raise UsageError(f"--hosts {path}: over {MAX_FILE:,} bytes")
    hosts: dict[str, HostSpec] = {}
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            host = parse(line)
        except UsageError as exc:
            raise UsageError(exc.message, where=f"{path}:{number}") from None
        hosts.setdefault(str(host), host)
        if len(hosts) > MAX_HOSTS:
            raise UsageError(f"more than {MAX_HOSTS:,} hosts", where=f"{path}:{number}")
    if not hosts:
        raise UsageError(f"--hosts {path}: no ssh:// host in it")
    return list(hosts.values())


def run_hosts(
    path: Path,
    options: RunOptions,
    *,
    sudo: bool,
    parallel: int,
    soak_seconds: float = 0.0,
    soak_interval: float = 5.0,
) -> Verdict:
    hosts = read_hosts(path)
    run = prepare(options)
    plan = instance_plan(*run.rules, soak_seconds=soak_seconds, soak_interval=soak_interval).text()
    timeout = soak_seconds + MARGIN
    parts: list[tuple[str, Report]] = []
    rows: list[dict[str, object]] = []

    def save(host: HostSpec) -> Path:
        return saved_apart(
            "imagelint-hosts-", lambda own: collect(host, plan, own, sudo=sudo, timeout=timeout)
        )

    with ThreadPoolExecutor(parallel) as pool:
        for start in range(0, len(hosts), parallel):
            batch = [(host, pool.submit(save, host)) for host in hosts[start : start + parallel]]
            for host, bundle in batch:
                one, row = _judge(run, host, bundle)
                parts.append((str(host), one))
                rows.append(row)
    return publish(_combine(path, parts, rows), options)


def _judge(run: PreparedRun, host: HostSpec, bundle: Future[Path]) -> tuple[Report, dict[str, object]]:
    """The host's report (its subjects prefixed with the host) and its row."""
    label, target = str(host), {"kind": "host", "path": str(host)}
    row: dict[str, object] = {"host": label, "coverage": "checked", "reason": None}
    try:
        one = judged_then_removed(bundle, lambda p: merge(bundle_reports(run, p), target, instance_id=label))
    except Exception as exc:  # anything for this host alone (a signal is a BaseException: not caught)
        why = host_failure.reason(exc)
        one = empty_report(target, why)
        row.update(coverage="no-report", reason=why)
    counts = one.counts()
    row.update(verdict=one.verdict.value, failing=counts["failing"], findings=counts["findings"])
    row["errors"] = counts["errors"]
    return one, row


def _combine(path: Path, parts: list[tuple[str, Report]], rows: list[dict[str, object]]) -> Report:
    target = {"kind": "hosts", "path": str(path)}
    return with_rows(merge(parts, target), rows, facts_key="hosts", name_key="host")
