"""Which way in an image takes, decided offline before the boot, from the files of the image itself.

The machine offers the throwaway key two ways (:mod:`imagelint.vm.access`); an image takes one when:

- **NoCloud seed**: cloud-init is installed (``/usr/bin/cloud-init`` and the directory ``/etc/cloud``)
  and not disabled (no ``/etc/cloud/cloud-init.disabled``). Its datasource list is not read: an image
  whose cloud-init ignores NoCloud is still offered the seed, and then times out at the boot deadline.
- **SMBIOS credential** ``ssh.authorized_keys.root``: systemd 252 or later (PID 1 imports credentials
  from SMBIOS type 11 from 252 on) and tmpfiles' ``provision.conf`` (``/etc/tmpfiles.d`` before
  ``/usr/lib/tmpfiles.d``, as systemd-tmpfiles reads them) with a line that installs that credential
  as ``/root/.ssh/authorized_keys`` (systemd.system-credentials(7): "Added in version 252"). The
  version is the number in the name of systemd's private library, ``libsystemd-shared-NNN.so``
  (``/usr/lib/systemd``, ``/lib/systemd``, ``/usr/lib64/systemd`` or a multiarch ``/usr/lib/*/systemd``):
  nothing in the image is run.

Both need sshd (``/usr/sbin/sshd`` or ``/usr/bin/sshd``). Only the ways the image takes are offered;
when neither is, :attr:`Access.refusal` is the one line saying what is missing, and the image is not
booted. An image that could not be read offline is offered both (:func:`undetermined`).
"""

from __future__ import annotations

import re

from imagelint.errors import ImageLintError
from imagelint.records import dataclass
from imagelint.targets.interface import FileKind, Target

MIN_SYSTEMD = 252  # SMBIOS type 11 credentials in PID 1 and provision.conf's ssh.authorized_keys.root
CREDENTIAL = "ssh.authorized_keys.root"
SHARED_LIBRARY = (
    "/usr/lib/systemd/libsystemd-shared-*.so",
    "/lib/systemd/libsystemd-shared-*.so",
    "/usr/lib64/systemd/libsystemd-shared-*.so",
    "/usr/lib/*/systemd/libsystemd-shared-*.so",
)
VERSION = re.compile(r"libsystemd-shared-(\d{1,5})(?:[.~+-][^/]{0,64})?\.so\Z")
PROVISION = ("/etc/tmpfiles.d/provision.conf", "/usr/lib/tmpfiles.d/provision.conf")
PROVISION_LIMIT = 64 * 1024
SSHD = ("/usr/sbin/sshd", "/usr/bin/sshd")
UNREACHABLE = "this image cannot be reached to soak it"


@dataclass(frozen=True)
class Access:
    """The ways in offered to this image, and why (``facts.vm.access`` in the report)."""

    seed: bool
    credential: bool
    seed_why: str
    credential_why: str
    systemd: int | None = None
    sshd: bool = True

    @property
    def offered(self) -> list[str]:
        return [
            name for name, on in (("nocloud-seed", self.seed), ("smbios-credential", self.credential)) if on
        ]

    @property
    def refusal(self) -> str | None:
        """The one line saying why the image cannot be reached, or None when a way is offered."""
        if not self.sshd:
            return f"no sshd ({' or '.join(SSHD)}) in the image: {UNREACHABLE}"
        if self.offered:
            return None
        return f"{self.seed_why}, and {self.credential_why}: {UNREACHABLE}"

    def facts(self) -> dict[str, object]:
        return {
            "offered": self.offered,
            "nocloud_seed": self.seed_why,
            "smbios_credential": self.credential_why,
            "systemd_version": self.systemd,
            "sshd": self.sshd,
        }


def undetermined(why: str) -> Access:
    """Both ways, for an image whose files could not be read offline."""
    said = f"offered: {why}"
    return Access(seed=True, credential=True, seed_why=said, credential_why=said)


def decide(target: Target) -> Access:
    """The ways ``target`` (the image opened offline) takes, read from its files only."""
    seed, seed_why = _cloud_init(target)
    version = systemd_version(target)
    credential, credential_why = _credential(target, version)
    sshd = any(_exists(target, path) for path in SSHD)
    return Access(seed, credential and sshd, seed_why, credential_why, version, sshd)


def systemd_version(target: Target) -> int | None:
    """systemd's major version from the name of ``libsystemd-shared-NNN.so``; None when there is none."""
    found = set()
    for pattern in SHARED_LIBRARY:
        try:
            names = target.glob(pattern)
        except ImageLintError:
            continue
        for name in names:
            match = VERSION.search(name)
            if match:
                found.add(int(match.group(1)))
    return max(found) if found else None


def _cloud_init(target: Target) -> tuple[bool, str]:
    if not _exists(target, "/usr/bin/cloud-init"):
        return False, "no cloud-init (/usr/bin/cloud-init)"
    if not _is_dir(target, "/etc/cloud"):
        return False, "no cloud-init configuration (/etc/cloud)"
    if _exists(target, "/etc/cloud/cloud-init.disabled"):
        return False, "cloud-init disabled (/etc/cloud/cloud-init.disabled)"
    return True, "cloud-init (/usr/bin/cloud-init, /etc/cloud)"


def _credential(target: Target, version: int | None) -> tuple[bool, str]:
    if version is None:
        return False, f"no systemd version could be read (libsystemd-shared-NNN.so) to take {CREDENTIAL}"
    if version < MIN_SYSTEMD:
        return False, f"systemd {version} < {MIN_SYSTEMD} does not take {CREDENTIAL}"
    where = _provision(target)
    if where is None:
        return False, f"systemd {version} has no tmpfiles provision.conf installing {CREDENTIAL}"
    return True, f"systemd {version} installs {CREDENTIAL} ({where})"


def _provision(target: Target) -> str | None:
    """The provision.conf systemd-tmpfiles would read, when it installs the credential for root."""
    for path in PROVISION:
        try:
            stat = target.lstat(path)
            if stat is None:
                continue
            if stat.kind == FileKind.SYMLINK and target.readlink(path) == "/dev/null":
                return None  # masked
            text = target.read_text(path, limit=PROVISION_LIMIT).text
        except ImageLintError:
            return None
        for line in text.splitlines():
            fields = line.split()
            if len(fields) >= 7 and not fields[0].startswith("#") and fields[6] == CREDENTIAL:
                return path
        return None  # the first one found overrides the rest, as systemd-tmpfiles reads them
    return None


def _exists(target: Target, path: str) -> bool:
    try:
        return target.exists(path)
    except ImageLintError:
        return False


def _is_dir(target: Target, path: str) -> bool:
    try:
        stat = target.stat(path)
    except ImageLintError:
        return False
    return stat is not None and stat.kind == FileKind.DIR
