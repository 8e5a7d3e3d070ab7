"""What auditing a host over SSH costs against auditing its tree in place (issue 49: at most 3x).

The ``ssh`` test image (Debian bookworm with sshd) is booted with systemd-nspawn in a network
namespace of its own, with the sample image's faults planted, as ``tests/openers/test_ssh.py`` does;
the real ``ssh`` client reaches it on that namespace's loopback. Printed, each the median of
``--runs`` runs:

- ``audit ssh://root@HOST``: wall time of the whole command (connect, collect on the host, send the
  bundle, read it at home);
- ``audit /proc/PID/root``: the same host's tree audited in place, the nearest thing to the issue's
  ``imagelint audit /`` run on the host itself (the container has no Python): the same files through
  the container's own mounts, ``/run`` included, read by one imagelint process on this machine;
- their ratio, and the collector's CPU time on the host (user + system of ``collect.sh`` and every
  process it waited for, from the shell's ``times``, as the bundle's manifest records it and the
  report shows under ``facts.bundle.cost``), phase by phase: ``show`` (``systemctl show``), ``paths``
  (globs, walks, link targets), ``references`` (paths named in unit files), ``classify`` (``stat`` of
  every path), ``tar``;
- the same for ``units ssh://`` against ``units /proc/PID/root``.

Wall time on a machine shared with other work stretches with its load, so CPU time is printed too:
imagelint's own (this machine) and, over ssh, plus the collector's on the host; the CPU ratio is the
steadier figure. The compression of the bundle (gzip, after the manifest is written) and ssh's own
work are in neither figure.
``--collector FILE`` runs another ``collect.sh`` (e.g. an earlier one, ``git show
main:imagelint/collector/collect.sh``) with this imagelint around it, for a before/after comparison.

    .venv/bin/python benchmarks/collector_vs_local.py [--runs 3] [--collector FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from imagelint.bundle.manifest import parse_manifest
from imagelint.collector.plan import units_plan
from imagelint.collector.ssh.spec import parse
from imagelint.collector.ssh.transport import collect
from tests.conftest import _test_image
from tests.nspawn import booted
from tests.openers.test_ssh import Host, _host_tree, _ready

GOAL = 3.0
EXE = str(Path(sys.executable).with_name("imagelint"))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str], ok: tuple[int, ...]) -> tuple[float, float]:
    """Wall and CPU seconds (imagelint's, on this machine) of one run."""
    started, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv[:3])} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return elapsed, _children_cpu() - cpu


def _median(
    argv: list[str], env: dict[str, str], runs: int, ok: tuple[int, ...] = (0, 1)
) -> tuple[float, float]:
    got = [_run(argv, env, ok) for _ in range(runs)]
    return statistics.median(w for w, _ in got), statistics.median(c for _, c in got)


def _compare(what: str, ssh: tuple[float, float], local: tuple[float, float], host_cpu: float | None) -> None:
    ratio = ssh[0] / local[0]
    print(
        f"{what}: over ssh {ssh[0]:.2f} s, in place {local[0]:.2f} s wall: "
        f"ratio {ratio:.2f} ({_verdict(ratio)})"
    )
    if host_cpu is None:
        print(f"  CPU here: over ssh {ssh[1]:.2f} s, in place {local[1]:.2f} s (the host's not recorded)")
        return
    ratio = (ssh[1] + host_cpu) / local[1]
    print(
        f"  CPU: over ssh {ssh[1]:.2f} s here + {host_cpu:.2f} s on the host, in place {local[1]:.2f} s: "
        f"ratio {ratio:.2f} ({_verdict(ratio)})"
    )


def _verdict(ratio: float) -> str:
    return f"{'meets' if ratio <= GOAL else 'MISSES'} goal <= {GOAL:g}"


def _host_cpu(cost: dict[str, object] | None) -> float | None:
    return float(cost["cpu_seconds"]) if cost else None  # type: ignore[arg-type]


def _print_cost(cost: dict[str, object] | None) -> None:
    if not cost:
        print("  the collector recorded no phases")
        return
    print(f"  collector CPU on the host: {cost['cpu_seconds']:.2f} s (user + system, children included)")
    for row in cost["phases"]:  # type: ignore[attr-defined]
        print(f"    {row['phase']:<11} wall {row['seconds']:>6.2f} s   CPU {row['cpu_seconds']:>5.2f} s")


def _bundle_cost(host: Host, plan_text: str, scratch: Path) -> dict[str, object] | None:
    """One collection with ``plan_text`` through the transport itself: the manifest's cost."""
    os.environ["IMAGELINT_SSH_COMMAND"] = host.command()
    work = Path(tempfile.mkdtemp(dir=scratch))
    bundle = collect(parse(host.spec()), plan_text, work, sudo=False, timeout=900)
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("imagelint/manifest.txt")
        assert member is not None
        manifest = parse_manifest(member, lambda *_: None, most=10**7)
        return manifest.cost() if hasattr(manifest, "cost") else None  # an imagelint before the cost


def _with_collector(script: Path, scratch: Path) -> dict[str, str]:
    """The environment that runs imagelint with ``script`` as its collector (a copy of the package)."""
    import imagelint

    copy = scratch / "pkg"
    shutil.copytree(Path(imagelint.__file__).parent, copy / "imagelint")
    shutil.copyfile(script, copy / "imagelint/collector/collect.sh")
    return {"PYTHONPATH": str(copy)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--collector", type=Path, help="another collect.sh to run")
    args = parser.parse_args()
    image = _test_image("ssh", "bookworm-ssh")
    with tempfile.TemporaryDirectory(prefix="imagelint-ssh-bench-") as tmp:
        scratch = Path(tmp)
        other = _with_collector(args.collector, scratch) if args.collector else {}
        key = scratch / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        root = _host_tree(image, scratch / "host", key, faulty=True)
        with booted(
            root, name="bench", network=("--private-network",), volatile=False, ready=_ready, timeout=180
        ) as p:
            host = Host(root, p, p[2], 22, key, scratch / "h")
            env = {**os.environ, "IMAGELINT_SSH_COMMAND": host.command(), "NO_COLOR": "1", **other}
            tree = f"/proc/{p[2]}/root"
            load = os.getloadavg()[0]
            print(
                f"host: the ssh test image booted with nspawn; load average {load:.1f} "
                f"on {os.cpu_count()} CPUs"
            )
            report = scratch / "ssh.json"
            print(f"over ssh: {host.spec()}; in place: {tree}")
            over_ssh = _median([EXE, "audit", host.spec(), "-f", f"json:{report}"], env, args.runs)
            local = _median([EXE, "audit", tree], env, args.runs)
            cost = json.loads(report.read_text())["facts"]["bundle"].get("cost")
            _compare("audit", over_ssh, local, _host_cpu(cost))
            _print_cost(cost)
            units_ssh = _median([EXE, "units", host.spec()], env, args.runs, ok=(0,))
            units_local = _median([EXE, "units", tree], env, args.runs, ok=(0,))
            # the transport of this process runs this package's collector, not --collector's
            cost = None if args.collector else _bundle_cost(host, units_plan().text(), scratch)
            _compare("units", units_ssh, units_local, _host_cpu(cost))
            _print_cost(cost)


if __name__ == "__main__":
    main()
