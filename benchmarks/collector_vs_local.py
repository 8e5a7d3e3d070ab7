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

The compression of the bundle (gzip, after the manifest is written) is not in the collector's figure.
``--collector FILE`` runs another ``collect.sh`` (e.g. an earlier one, ``git show
main:imagelint/collector/collect.sh``) with this imagelint around it, for a before/after comparison.

    .venv/bin/python benchmarks/collector_vs_local.py [--runs 3] [--collector FILE]
"""

from __future__ import annotations

import argparse
import json
import os
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


def _run(argv: list[str], env: dict[str, str], ok: tuple[int, ...]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv[:3])} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return elapsed


def _median(argv: list[str], env: dict[str, str], runs: int, ok: tuple[int, ...] = (0, 1)) -> float:
    return statistics.median(_run(argv, env, ok) for _ in range(runs))


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
        return parse_manifest(member, lambda *_: None, most=10**7).cost()


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
        with booted(root, name="bench", network=("--private-network",), volatile=False, ready=_ready, timeout=180) as p:
            host = Host(root, p, p[2], 22, key, scratch / "h")
            env = {**os.environ, "IMAGELINT_SSH_COMMAND": host.command(), "NO_COLOR": "1", **other}
            tree = f"/proc/{p[2]}/root"
            load = os.getloadavg()[0]
            print(f"host: the ssh test image booted with nspawn; load average {load:.1f} on {os.cpu_count()} CPUs")
            report = scratch / "ssh.json"
            over_ssh = _median([EXE, "audit", host.spec(), "-f", f"json:{report}"], env, args.runs)
            local = _median([EXE, "audit", tree], env, args.runs)
            ratio = over_ssh / local
            verdict = "meets" if ratio <= GOAL else "MISSES"
            print(f"audit {host.spec()}: {over_ssh:.2f} s; audit {tree}: {local:.2f} s")
            print(f"  ratio {ratio:.2f} ({verdict} goal <= {GOAL:g})")
            _print_cost(json.loads(report.read_text())["facts"]["bundle"].get("cost"))
            units_ssh = _median([EXE, "units", host.spec()], env, args.runs, ok=(0,))
            units_local = _median([EXE, "units", tree], env, args.runs, ok=(0,))
            ratio = units_ssh / units_local
            verdict = "meets" if ratio <= GOAL else "MISSES"
            print(f"units {host.spec()}: {units_ssh:.2f} s; units {tree}: {units_local:.2f} s")
            print(f"  ratio {ratio:.2f} ({verdict} goal <= {GOAL:g})")
            if not args.collector:  # the transport of this process runs this package's collector
                _print_cost(_bundle_cost(host, units_plan().text(), scratch))


if __name__ == "__main__":
    main()
