"""Shipping the local configuration and rule packs to the instances of a launch or fleet run.

The remote ``imagelint audit`` / ``imagelint soak`` must apply what the local run applies: the
config (waivers, ``expected-units``, ``parameters:``, severities, fail-on) and the extra rule packs.
Before ``SendCommand`` the CLI uploads them under ``s3://BUCKET/PREFIX<run id>/input/``; the
instance script downloads them into its work directory through presigned GET URLs (as the
``--install-from`` wheel: the instance profile needs no S3 read permission) and passes ``-c`` / ``-r``.

Layout, relative to ``input/`` (and to ``$W/in/`` on the instance):

- ``config/<path>``: the config file (``--config``, else ``.imagelint.yaml`` of the working
  directory, as the local run found it) and every pack its ``rules:`` names, at their paths
  relative to the common ancestor directory of all of them. The config is shipped byte for byte
  (same sha256, same line numbers in waiver sources) and its relative ``rules:`` entries, such as
  ``packs/x.yaml`` or ``../shared/packs``, resolve on the instance exactly as they do here. An
  absolute ``rules:`` entry cannot be relocated and is refused: make it relative or pass it with
  ``--rules``.
- ``rules/<n>/<name>``: the n-th ``--rules`` pack (a file, or a directory with its ``*.yaml`` /
  ``*.yml`` files, which is what the loader reads of a directory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagelint.errors import UsageError

INPUT_DIR = "input"


@dataclass(frozen=True)
class Inputs:
    """Local files to ship and how the remote commands refer to them (paths relative to ``input/``)."""

    files: tuple[tuple[Path, str], ...] = ()  # (local file, relative path)
    config: str | None = None
    rules: tuple[str, ...] = field(default_factory=tuple)

    def args(self) -> list[tuple[str, str]]:
        """(option, relative path) pairs for the remote command line."""
        return ([("-c", self.config)] if self.config else []) + [("-r", r) for r in self.rules]


def _pack_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
    return [path]


def _config_rule_entries(config_path: Path) -> list[str]:
    from imagelint.errors import ConfigError
    from imagelint.yamlsource import load_yaml

    data = load_yaml(config_path, error=ConfigError).data
    entries = data.get("rules", []) if isinstance(data, dict) else []
    return [str(e) for e in entries]


def collect(config_path: Path | None, extra_rules: list[Path], cwd: Path | None = None) -> Inputs:
    """What to ship for this run: the config the local run uses (explicit or found) and ``--rules``."""
    from imagelint.config import find_config

    files: list[tuple[Path, str]] = []
    config_rel: str | None = None
    found = find_config(config_path, cwd or Path.cwd())
    if found is not None:
        config_file = Path(os.path.abspath(found))
        base = config_file.parent.resolve()
        members: list[Path] = [base / config_file.name]
        for entry in _config_rule_entries(found):
            if os.path.isabs(entry):
                raise UsageError(
                    f"{found}: rules: entry {entry!r} is absolute and cannot be shipped to the instance; "
                    "make it relative to the config file or pass it with --rules"
                )
            target = Path(os.path.normpath(base / entry))
            members += _pack_files(target)
        root = Path(os.path.commonpath([str(m.parent) for m in members]))
        for member in members:
            files.append((member, f"config/{member.relative_to(root).as_posix()}"))
        config_rel = files[0][1]
    rules: list[str] = []
    for n, pack in enumerate(extra_rules):
        if pack.is_dir():
            name = pack.resolve().name or "pack"
            files += [(f, f"rules/{n}/{name}/{f.name}") for f in _pack_files(pack)]
            rules.append(f"rules/{n}/{name}")
        else:
            files.append((pack, f"rules/{n}/{pack.name}"))
            rules.append(f"rules/{n}/{pack.name}")
    return Inputs(files=tuple(files), config=config_rel, rules=tuple(rules))


def input_key(prefix: str, run_id: str, rel: str) -> str:
    """S3 key of one shipped file."""
    return f"{prefix}{run_id}/{INPUT_DIR}/{rel}"


def upload(
    s3: Any, signer: Any, inputs: Inputs, bucket: str, prefix: str, run_id: str, *, expires: int
) -> tuple[tuple[str, str], ...]:
    """Put every shipped file at ``PREFIX<run id>/input/<relative path>``; returns (relative path,
    presigned GET URL valid for ``expires`` seconds, signed by ``signer``, a
    :class:`~imagelint.aws.s3urls.Presigner`) pairs for the instance script."""
    from imagelint.aws.errors import call

    urls: list[tuple[str, str]] = []
    for local, rel in inputs.files:
        try:
            body = local.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {local} to ship it to the instance: {exc.strerror}") from None
        key = input_key(prefix, run_id, rel)
        call(s3.put_object, Bucket=bucket, Key=key, Body=body)
        urls.append((rel, signer.get_url(key, expires)))
    return tuple(urls)
