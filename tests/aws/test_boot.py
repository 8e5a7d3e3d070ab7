"""A wait for SSM that cannot succeed ends early, with the reason (imagelint.aws.boot), and the
dead-man switch in the user data powers a real booted image off at its deadline.

The consoles are real: moto's sample (an old Xen boot log), and the serial console of the Debian
instance image booted with systemd-nspawn (systemd's status lines and the getty's prompt)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from imagelint.aws import ec2 as ec2_ops
from imagelint.aws.boot import BootWatch, console_verdict
from imagelint.probes.systemd import collect_live_state
from tests.aws.moto_env import MotoEnv
from tests.conftest import _test_image
from tests.nspawn import booted

NOTHING = {"instances": [], "volumes": [], "groups": []}


def _instance(env: MotoEnv) -> str:
    reply = env.client("ec2").run_instances(ImageId=env.image_id, MinCount=1, MaxCount=1)
    return str(reply["Instances"][0]["InstanceId"])


def test_a_boot_log_without_a_finished_boot_says_nothing() -> None:
    from moto.ec2.responses.general import SAMPLE_CONSOLE_OUTPUT

    assert console_verdict(SAMPLE_CONSOLE_OUTPUT) is None
    assert console_verdict("") is None


def test_cloud_init_finished_and_a_panic_are_read() -> None:
    finished = (
        "Cloud-init v. 22.4.2 finished at Thu, 03 Dec 2026 10:00:00 +0000. "
        "Datasource DataSourceEc2Local.  Up 25.01 seconds\n"
    )
    assert console_verdict("[   1.0] booting\n" + finished) == "finished"
    panic = "[    2.5] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n"
    assert console_verdict("Cloud-init v. 1 finished at x\n" + panic) == panic.strip()[10:]


def test_hostile_console_is_searched_in_its_tail_only() -> None:
    # a marker far from the end is not seen, and a huge console is cut before any pattern runs
    assert console_verdict("vm login: \n" + "x" * 70_000) is None
    assert console_verdict("Reached target " * 200_000) is None


def test_an_instance_that_left_running_is_doomed_at_once(moto_env: MotoEnv) -> None:
    ec2 = moto_env.client("ec2")
    instance_id = _instance(moto_env)
    watch = BootWatch(ec2, instance_id, every=0)
    assert watch.doomed() is None  # running, and moto's console shows no finished boot
    ec2.stop_instances(InstanceIds=[instance_id])
    reason = watch.doomed()
    assert reason is not None and reason.startswith("the instance is stopp"), reason


def test_a_finished_boot_is_doomed_only_after_the_grace(moto_env: MotoEnv) -> None:
    moto_env.console = lambda: "Debian GNU/Linux 12 vm ttyS0\n\nvm login: "
    now = [0.0]
    watch = BootWatch(moto_env.client("ec2"), _instance(moto_env), grace=180, every=30, clock=lambda: now[0])
    seen = []
    for t in (0, 10, 100, 170, 200):
        now[0] = t
        seen.append(watch.doomed())
    assert seen[:4] == [None] * 4  # finished at 0 s; 170 s is inside the grace (and 10 s skips EC2)
    assert seen[4] is not None and "the boot finished (serial console) 200s ago" in seen[4]


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.lane  # a minute of waiting for `shutdown -P +1`
def test_real_image_without_ssm_agent_ends_the_wait_early_then_the_deadman_switch_powers_it_off(
    moto_env: MotoEnv, tmp_path: Path
) -> None:
    from imagelint.aws.ssm import NoReportError
    from imagelint.commands.ami import AmiOptions, Timing, run_ami

    image = _test_image("instance", "bookworm-instance")
    console = tmp_path / "console.log"
    ready = lambda prefix: collect_live_state(prefix=prefix).available  # noqa: E731
    with booted(image, volatile=True, ready=ready, timeout=120, console=console, name="-boot") as prefix:
        deadline = time.monotonic() + 60
        while console_verdict(console.read_text(errors="replace")) != "finished":
            assert time.monotonic() < deadline, console.read_text(errors="replace")[-2000:]
            time.sleep(0.5)

        # the image has no SSM agent: the stand-in agent never goes online; the console is the container's
        moto_env.agent.online = False
        moto_env.console = lambda: console.read_text(errors="replace")
        timing = Timing(poll=0.2, ssm_timeout=600, boot_grace=2, boot_check_every=0.5)
        options = AmiOptions(
            images=[moto_env.image_id],
            report_bucket=moto_env.bucket,
            launch=ec2_ops.LaunchSettings(instance_profile=moto_env.profile),
            timing=timing,
        )
        with pytest.MonkeyPatch.context() as patch:
            for key, value in moto_env.env.items():
                patch.setenv(key, value)
            with pytest.raises(NoReportError) as caught:
                run_ami(options)
        message = str(caught.value)
        assert "will not register with SSM: the boot finished (serial console)" in message  # not 600 s
        assert "console output:" in message and "login:" in message
        assert moto_env.alive() == NOTHING

        # the dead-man switch, run as cloud-init runs a user-data script: the instance powers off
        init = Path(f"/proc/{prefix[2]}")
        script = ec2_ops.deadman_user_data(1)  # the shortest deadline: one minute
        subprocess.run([*prefix, "sh", "-c", script], check=True, timeout=30)
        assert init.exists()  # not at once
        deadline = time.monotonic() + 150
        while init.exists():
            assert time.monotonic() < deadline, "the dead-man switch did not power the image off"
            time.sleep(1)
