"""The collector as two files an instance runs without imagelint: ``collect.sh`` and its ``plan.txt``.

`imagelint collector DIR` writes them for recipes that move files themselves (the Packer provisioner
recipe uploads them, runs ``sh DIR/collect.sh DIR`` on the build instance, downloads the bundle whose
path it prints, and judges it at home with ``imagelint audit BUNDLE``). The plan is computed from the
same config and rule packs as that audit, so the bundle holds what those rules read.
"""

from __future__ import annotations

from pathlib import Path

from imagelint.collector import script_text
from imagelint.collector.plan import Plan
from imagelint.errors import UsageError

SCRIPT = "collect.sh"
PLAN = "plan.txt"


def write_collector(directory: Path, plan: Plan) -> tuple[Path, Path]:
    """Write ``collect.sh`` and ``plan.txt`` into ``directory`` (created if missing)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        script, plan_file = directory / SCRIPT, directory / PLAN
        script.write_text(script_text(), encoding="utf-8")
        plan_file.write_text(plan.text(), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{directory}: cannot write the collector there ({exc.strerror or exc})") from None
    return script, plan_file
