"""Image facts for the inventory: ``/etc/os-release`` and the kernel command line.

The kernel command line of an image is not in one place; each source found is listed with what it
says, so a change in any of them shows in a diff:

- ``/etc/kernel/cmdline``: systemd's kernel-install and unified kernel images (one line);
- ``/boot/loader/entries/*.conf``: Boot Loader Specification entries (RHEL 9, Fedora, Amazon
  Linux 2023 use them with GRUB), their ``options`` lines;
- ``/etc/default/grub``: ``GRUB_CMDLINE_LINUX`` and ``GRUB_CMDLINE_LINUX_DEFAULT`` (Debian,
  Ubuntu: what ``update-grub`` writes into grub.cfg), the value as written (not shell-expanded);
- ``/proc/cmdline``: on a live host (``audit --live``), the command line the kernel booted with.

Values are read through the target (capped), at most ``MAX_ENTRIES`` loader entries and
``MAX_VALUE`` characters a value.
"""

from __future__ import annotations

import shlex
from typing import Any

from imagelint.errors import ImageDamageError, ImageReadError
from imagelint.targets.interface import Target

OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
KERNEL_CMDLINE = "/etc/kernel/cmdline"
LOADER_ENTRIES = "/boot/loader/entries"
DEFAULT_GRUB = "/etc/default/grub"
GRUB_KEYS = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
MAX_ENTRIES = 64
MAX_VALUE = 4096
MAX_KEYS = 64
READ_LIMIT = 256 * 1024


def _read(target: Target, path: str, problems: list[str]) -> str | None:
    try:
        if target.stat(path) is None:
            return None
        return target.read_bytes(path, limit=READ_LIMIT).decode("utf-8", "replace")
    except (ImageReadError, ImageDamageError) as exc:
        problems.append(f"{path}: {exc.reason}")
        return None


def _shell_value(raw: str) -> str:
    """A ``KEY=value`` right-hand side as the shell would quote it (no expansion); raw if unbalanced."""
    try:
        words = shlex.split(raw, comments=True)
    except ValueError:
        return raw.strip()[:MAX_VALUE]
    return " ".join(words)[:MAX_VALUE]


def os_release(target: Target, problems: list[str]) -> dict[str, str] | None:
    """The os-release fields (``ID``, ``VERSION_ID``, ``PRETTY_NAME``...), from the first file found."""
    for path in OS_RELEASE:
        text = _read(target, path, problems)
        if text is None:
            continue
        fields: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key.isidentifier() and not key.startswith("#") and len(fields) < MAX_KEYS:
                fields[key] = _shell_value(value[:MAX_VALUE])
        return fields
    return None


def kernel_cmdline(target: Target, problems: list[str], *, live: bool = False) -> list[dict[str, str]]:
    """Every kernel command line source found: [{"source": where, "value": the options}]."""
    found: list[dict[str, str]] = []
    if live:
        text = _read(target, "/proc/cmdline", problems)
        if text is not None:
            found.append({"source": "/proc/cmdline", "value": text.strip()[:MAX_VALUE]})
    text = _read(target, KERNEL_CMDLINE, problems)
    if text is not None:
        found.append({"source": KERNEL_CMDLINE, "value": " ".join(text.split())[:MAX_VALUE]})
    try:
        entries = sorted(n for n in target.listdir(LOADER_ENTRIES) if n.endswith(".conf"))
    except (ImageReadError, ImageDamageError) as exc:
        problems.append(f"{LOADER_ENTRIES}: {exc.reason}")
        entries = []
    if len(entries) > MAX_ENTRIES:
        problems.append(f"{LOADER_ENTRIES}: {len(entries)} entries; only the first {MAX_ENTRIES} read")
    for name in entries[:MAX_ENTRIES]:
        path = f"{LOADER_ENTRIES}/{name}"
        entry = _read(target, path, problems) or ""
        options = [line.split(None, 1)[1] for line in entry.splitlines() if line.startswith("options ")]
        found.append({"source": path, "value": " ".join(options).strip()[:MAX_VALUE]})
    text = _read(target, DEFAULT_GRUB, problems)
    grub: dict[str, str] = {}  # the last assignment wins, as when the shell sources the file
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key in GRUB_KEYS:
            grub[key] = _shell_value(value)
    found += [{"source": f"{DEFAULT_GRUB}:{key}", "value": value} for key, value in grub.items()]
    return found


def image_facts(target: Target, *, live: bool = False) -> dict[str, Any]:
    problems: list[str] = []
    return {
        "os_release": os_release(target, problems),
        "kernel_cmdline": kernel_cmdline(target, problems, live=live),
        "problems": problems,
    }
