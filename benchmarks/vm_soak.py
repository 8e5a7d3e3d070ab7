"""One `imagelint vm check` of a bootable test image: time to the first sample, the soak's cost in the guest.

Boots ``~/.cache/imagelint-tests/vm-VARIANT.qcow2`` (scripts/build-test-vm-image.sh; built when absent)
with the real CLI and prints, from the report's ``facts``: the accelerator, power-on to SSH, power-on to
the collector's start (its first act is the soak's first sample), the soak's cost in the guest (the
collector's own CPU, user + system with its children, from the shell's ``times``, per second of soak and
as a share of one vCPU; under TCG the guest's CPU is emulated, so this is many times the native cost that
benchmarks/collector_cost.py measures), the whole collection's wall time, the verdict and the findings per
part. The clean variant's soak and host parts must have no finding (its image part has the test image's
own hygiene findings: host keys, caches); the crashloop variant's soak must name leaky.service.

    sudo .venv/bin/python benchmarks/vm_soak.py [--variant clean] [--soak 60s] [--boot-timeout 12m]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("clean", "crashloop"), default="clean")
    parser.add_argument("--soak", default="60s")
    parser.add_argument("--boot-timeout", default="12m")
    parser.add_argument("--accel", default="auto")
    args = parser.parse_args()
    built = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-test-vm-image.sh"), "--variant", args.variant],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    image = built.stdout.strip().splitlines()[-1]
    exe = Path(sys.executable).parent / "imagelint"
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "report.json"
        started = time.monotonic()
        proc = subprocess.run(
            [str(exe), "vm", "check", image, "--soak", args.soak, "--boot-timeout", args.boot_timeout,
             "--accel", args.accel, "-f", f"json:{out}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        wall = time.monotonic() - started
        if not out.exists():
            print(proc.stderr[-3000:], file=sys.stderr)
            return 2
        report = json.loads(out.read_text())
    vm = report["facts"].get("vm", {})
    soak = report["facts"].get("soak", {}).get("soak", {})
    print(f"image              {image} ({args.variant})")
    print(f"machine            {vm.get('accelerator')} ({vm.get('accelerator_note') or 'no note'}), "
          f"{vm.get('vcpus')} vCPU, {vm.get('memory_mib')} MiB, kernel {vm.get('guest_kernel')}, "
          f"cgroup {vm.get('cgroup_layout')}")  # fmt: skip
    print(f"power-on → SSH     {vm.get('boot_to_ssh_s')} s")
    print(f"power-on → sample  {vm.get('power_on_to_collector_s')} s (the collector's start: its first act)")
    cpu, elapsed = soak.get("sampler_cpu_seconds"), soak.get("elapsed") or 0
    if cpu is not None and elapsed:
        share = 100 * cpu / elapsed
        print(f"soak cost in guest {cpu:.2f} s CPU over {elapsed:.0f} s ({share:.2f}% of one vCPU)")
    print(f"collection         {vm.get('collect_s')} s (soak, files, systemctl show, bundle)")
    print(f"whole run          {wall:.0f} s, verdict {report['verdict']} (exit {proc.returncode})")
    parts: dict[str, list[str]] = {}
    for finding in report["findings"]:
        parts.setdefault(finding["evidence"].get("scope", "?"), []).append(
            f"{finding['rule_id']} {finding['message']}"
        )
    for part in ("image", "host", "soak"):
        print(f"{part + ' findings':18} {len(parts.get(part, []))}")
        for line in parts.get(part, [])[:4]:
            print(f"  {line[:160]}")
    if args.variant == "clean":
        return 0 if not parts.get("soak") and not parts.get("host") and proc.returncode in (0, 1) else 1
    return 0 if any("leaky.service" in line for line in parts.get("soak", [])) else 1


if __name__ == "__main__":
    sys.exit(main())
