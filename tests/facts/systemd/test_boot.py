"""Boot reachability: crafted trees for each way a unit is pulled in, and the real image booted.

The oracle for the real image is systemd itself: the debootstrapped image is booted with
``systemd-nspawn --boot``; a oneshot unit ordered after multi-user.target dumps, for every unit,
whether the manager ran a start job for it (its conditions were checked, or it became active),
then powers the container off. Our boot set must match, with two documented kinds of difference:

* units activated by a socket, timer, path or automount are in our set (they are started when
  their trigger fires, which the brief asks us to count) but not yet started at the end of boot;
* units the manager started that no file in the image defines (``-.slice``, ``/proc`` and ``/sys``
  mounts set up by the container, credential mounts) or that only runtime generators create and
  pull in (``console-getty.service`` from getty-generator in containers, ``systemd-remount-fs.service``
  and what it pulls from fstab-generator): generators do not run offline.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from imagelint.facts.systemd import UnitIndex
from imagelint.targets.rootfs import RootfsTarget
from tests.facts.systemd.crafted import ETC, VENDOR, link, skeleton, systemctl, unit, write
from tests.facts.systemd.oracle import systemctl_available
from tests.support import copy_rootfs, is_root, need

GENERATOR_PULLED = frozenset({"console-getty.service", "systemd-remount-fs.service", "local-fs-pre.target"})
TRIGGER_TYPES = ("socket", "timer", "path", "automount")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    need(systemctl_available(), "systemctl is not installed")
    root = skeleton(tmp_path / "root")
    v = VENDOR
    write(
        root,
        f"{v}/ecs.service",
        unit("ecs", "WantedBy=multi-user.target", "Restart=on-failure\nRestartSec=10\n"),
    )
    write(root, f"{v}/off.service", unit("off", "WantedBy=multi-user.target"))
    write(root, f"{v}/masked.service", unit("masked", "WantedBy=multi-user.target"))
    write(
        root, f"{v}/api.socket", "[Socket]\nListenStream=/run/api.sock\n[Install]\nWantedBy=sockets.target\n"
    )
    write(root, f"{v}/api.service", unit("api"))
    write(
        root,
        f"{v}/nightly.timer",
        "[Timer]\nOnCalendar=daily\nUnit=job.service\n[Install]\nWantedBy=timers.target\n",
    )
    write(root, f"{v}/job.service", unit("job"))
    write(root, f"{v}/timers.target", "[Unit]\nDescription=timers\n")
    write(root, f"{v}/basic.target.d/timers.conf", "[Unit]\nWants=timers.target\n")
    write(root, f"{v}/watch.path", "[Path]\nPathExists=/etc/flag\n[Install]\nWantedBy=multi-user.target\n")
    write(root, f"{v}/watch.service", unit("watch"))
    write(root, f"{v}/needs.service", unit("needs", "RequiredBy=multi-user.target"))
    write(
        root,
        f"{v}/holder.service",
        unit("holder", "WantedBy=multi-user.target", "[Unit]\nUpholds=upheld.service\n"),
    )
    write(root, f"{v}/upheld.service", unit("upheld"))
    write(
        root,
        f"{v}/binder.service",
        unit("binder", "WantedBy=multi-user.target", "[Unit]\nBindsTo=%p-peer.service\n"),
    )
    write(root, f"{v}/binder-peer.service", unit("binder-peer"))
    write(
        root,
        f"{v}/reset.service",
        unit("reset", "WantedBy=multi-user.target", "[Unit]\nWants=dropped.service\n"),
    )
    write(root, f"{v}/reset.service.d/reset.conf", "[Unit]\nWants=\n")
    write(root, f"{v}/dropped.service", unit("dropped"))
    write(root, f"{v}/worker@.service", unit("worker %i", "WantedBy=multi-user.target\nDefaultInstance=main"))
    write(
        root,
        f"{v}/accept.socket",
        "[Socket]\nListenStream=99\nAccept=yes\n[Install]\nWantedBy=sockets.target\n",
    )
    write(root, f"{v}/accept@.service", unit("accept"))
    write(root, f"{v}/accept.service", unit("not the one accept sockets start"))
    systemctl(root, "enable", "ecs.service", "masked.service", "api.socket", "nightly.timer", "watch.path")
    systemctl(root, "enable", "needs.service", "holder.service", "binder.service", "reset.service")
    systemctl(root, "enable", "worker@.service", "accept.socket")
    systemctl(root, "mask", "masked.service")
    systemctl(root, "set-default", "multi-user.target")
    link(root, f"{ETC}/multi-user.target.wants/dangling.service", "/usr/lib/systemd/system/dangling.service")
    return root


def test_chains(tree: Path) -> None:
    index = UnitIndex.build(RootfsTarget(tree))
    assert index.default_target == "multi-user.target"
    chain = {u.name: u.boot_chain for u in index}
    assert chain["ecs.service"] == ["default.target", "multi-user.target", "ecs.service"]
    assert chain["needs.service"] == ["default.target", "multi-user.target", "needs.service"]
    assert chain["api.service"] == [
        "default.target",
        "multi-user.target",
        "basic.target",
        "sockets.target",
        "api.socket",
        "api.service",
    ]
    assert chain["job.service"][-3:] == ["timers.target", "nightly.timer", "job.service"]
    assert chain["watch.service"][-2:] == ["watch.path", "watch.service"]
    assert chain["upheld.service"][-2:] == ["holder.service", "upheld.service"]
    assert chain["binder-peer.service"][-2:] == ["binder.service", "binder-peer.service"]
    assert chain["worker@main.service"] == ["default.target", "multi-user.target", "worker@main.service"]
    assert chain["default.target"] == ["default.target", "multi-user.target"]
    for quiet in ("off.service", "masked.service", "dropped.service", "accept.service", "graphical.target"):
        assert chain[quiet] is None, quiet
    assert not index["masked.service"].boot_reachable and index["masked.service"].masked
    assert any(p.path.endswith("multi-user.target.wants/dangling.service") for p in index.problems)


def test_chain_is_json_ready(tree: Path) -> None:
    import json

    index = UnitIndex.build(RootfsTarget(tree))
    data = json.loads(json.dumps(index.to_dict()))
    ecs = next(u for u in data["units"] if u["name"] == "ecs.service")
    assert ecs["boot_chain"] == ["default.target", "multi-user.target", "ecs.service"]
    assert ecs["state"] == "enabled" and ecs["preset"] == "enabled"
    assert ecs["fragment"] == "/usr/lib/systemd/system/ecs.service"


def _boot_and_dump(root: Path) -> dict[str, dict[str, str]]:
    write(
        root,
        f"{ETC}/zz-imagelint-dump.service",
        "[Unit]\nAfter=multi-user.target graphical.target\n[Service]\nType=oneshot\n"
        "ExecStart=/bin/sh -c 'sleep 2; systemctl show --all -p Id,ActiveState,ConditionTimestampMonotonic "
        '"*" > /root/imagelint-boot-dump.txt; systemctl poweroff\'\n[Install]\nWantedBy=multi-user.target\n',
    )
    systemctl(root, "enable", "zz-imagelint-dump.service")
    subprocess.run(
        [
            "systemd-nspawn",
            "-D",
            str(root),
            "--boot",
            "--register=no",
            "--keep-unit",
            "--private-network",
            "--console=read-only",
        ],
        capture_output=True,
        timeout=180,
        check=False,
    )
    dump = root / "root/imagelint-boot-dump.txt"
    assert dump.exists(), "the booted image did not write its unit dump"
    records: dict[str, dict[str, str]] = {}
    for block in dump.read_text().strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        records[fields["Id"]] = fields
    (root / "etc/systemd/system/multi-user.target.wants/zz-imagelint-dump.service").unlink()
    (root / "etc/systemd/system/zz-imagelint-dump.service").unlink()
    dump.unlink()
    return records


@pytest.mark.slow
@pytest.mark.root
def test_real_boot_matches(debian_rootfs: Path, tmp_path: Path) -> None:
    need(is_root(), "booting the image with systemd-nspawn needs root")
    need(shutil.which("systemd-nspawn") is not None, "systemd-nspawn (systemd-container) is not installed")
    root = copy_rootfs(debian_rootfs, tmp_path / "image")
    records = _boot_and_dump(root)
    started = {
        name
        for name, r in records.items()
        if r.get("ConditionTimestampMonotonic", "0") != "0"
        or r.get("ActiveState") in ("active", "activating", "failed")
    }
    index = UnitIndex.build(RootfsTarget(root))
    ours = {u.unit_id for u in index.boot_units()}
    assert {"ssh.service", "cron.service", "getty@tty1.service", "systemd-journald.service"} <= ours

    for name in sorted(ours - started):
        chain = index[name].boot_chain
        assert chain is not None and chain[-2].rsplit(".", 1)[-1] in TRIGGER_TYPES, (name, chain)
    unexplained = sorted(
        name for name in started - ours if name not in GENERATOR_PULLED and index.load(name) is not None
    )
    assert unexplained == []
    print(f"booted: {len(started)} units started; ours {len(ours)}; trigger-activated {len(ours - started)}")
