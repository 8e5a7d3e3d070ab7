"""The AMIs of the current Packer run, from the ``manifest`` post-processor's file.

The manifest accumulates builds across runs (and packer 1.6.6's ``-force`` does not truncate it),
so the build is the one whose ``packer_run_uuid`` equals ``$PACKER_RUN_UUID`` (set by Packer inside
``shell-local``), else the one of ``last_run_uuid``; never simply the first. One run holds every
build of the template (two ``source`` blocks, two builds, one run UUID), so ``$PACKER_BUILD_NAME``
(also set by Packer inside ``shell-local``; the manifest records the same value as the build's
``name``) narrows it to the build whose post-processor is running: build B's gate never checks
build A's AMI. ``artifact_id`` is ``region:ami-id`` or, for several regions, such pairs joined by
commas.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from imagelint.errors import UsageError


def amis_from_manifest(
    path: Path, run_uuid: str | None = None, build_name: str | None = None
) -> list[tuple[str, str]]:
    """[(region, ami id), ...] of the selected run's builds (of ``build_name`` /
    ``$PACKER_BUILD_NAME`` when given)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the Packer manifest: {exc.strerror}", where=str(path)) from None
    except ValueError as exc:
        raise UsageError(f"the Packer manifest is not JSON: {exc}", where=str(path)) from None
    builds = data.get("builds") if isinstance(data, dict) else None
    if not isinstance(builds, list) or not builds:
        raise UsageError("the Packer manifest has no builds", where=str(path))
    wanted = run_uuid if run_uuid is not None else os.environ.get("PACKER_RUN_UUID") or None
    source = "PACKER_RUN_UUID"
    if wanted is None or not any(b.get("packer_run_uuid") == wanted for b in builds):
        if run_uuid is not None or os.environ.get("PACKER_RUN_UUID"):
            raise UsageError(f"no build of run {wanted} in the Packer manifest", where=str(path))
        wanted, source = data.get("last_run_uuid"), "last_run_uuid"
    selected = [b for b in builds if b.get("packer_run_uuid") == wanted]
    if not selected:
        raise UsageError(f"no build matches {source} {wanted!r} in the Packer manifest", where=str(path))
    name = build_name if build_name is not None else os.environ.get("PACKER_BUILD_NAME") or None
    if name is not None:
        selected = [b for b in selected if b.get("name") == name]
        if not selected:
            raise UsageError(
                f"no build named {name!r} (PACKER_BUILD_NAME) in run {wanted} of the Packer manifest",
                where=str(path),
            )
    amis: list[tuple[str, str]] = []
    for build in selected:
        artifact = str(build.get("artifact_id") or "")
        for pair in filter(None, (p.strip() for p in artifact.split(","))):
            region, sep, ami = pair.partition(":")
            if not sep or not ami.startswith("ami-"):
                name = build.get("name", "?")
                raise UsageError(
                    f"build {name!r}: artifact_id {artifact!r} is not region:ami-id[,region:ami-id...] "
                    "(is it an amazon-* builder?)",
                    where=str(path),
                )
            if (region, ami) not in amis:
                amis.append((region, ami))
    if not amis:
        raise UsageError(f"the selected build ({source} {wanted}) has no AMI", where=str(path))
    return amis
