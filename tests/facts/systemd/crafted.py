"""Crafted image trees covering each enablement case, built the way images are built.

Links are made by ``systemctl --root=ROOT enable/mask/...`` wherever systemctl can make them
(it writes absolute targets, as it does in a real image build); only the broken shapes that
systemctl refuses to create (loops, cycles, links to missing units) are made by hand.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from tests.facts.systemd.oracle import SYSTEMCTL

VENDOR = "usr/lib/systemd/system"
ETC = "etc/systemd/system"
RUN = "run/systemd/system"

SERVICE = "[Unit]\nDescription={name}\n\n[Service]\nExecStart=/bin/true\n"


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def link(root: Path, rel: str, target: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def systemctl(root: Path, *args: str) -> None:
    subprocess.run([SYSTEMCTL, f"--root={root}", "--no-pager", *args], check=True, capture_output=True)


def unit(name: str, install: str = "", extra: str = "") -> str:
    text = SERVICE.format(name=name) + extra
    return text + (f"\n[Install]\n{install}\n" if install else "")


def skeleton(root: Path, *, usr_merged: bool = True) -> Path:
    """An image root with the standard targets, usr-merged (``/lib -> usr/lib``) or split."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    if usr_merged:
        os.symlink("usr/lib", root / "lib")
    else:
        (root / "lib/systemd/system").mkdir(parents=True)
    for target in (
        "multi-user.target",
        "graphical.target",
        "basic.target",
        "sysinit.target",
        "sockets.target",
    ):
        write(root, f"{VENDOR}/{target}", f"[Unit]\nDescription={target}\n")
    write(root, f"{VENDOR}/graphical.target", "[Unit]\nDescription=graphical\nRequires=multi-user.target\n")
    write(root, f"{VENDOR}/multi-user.target", "[Unit]\nDescription=multi-user\nRequires=basic.target\n")
    write(
        root,
        f"{VENDOR}/basic.target",
        "[Unit]\nDescription=basic\nRequires=sysinit.target\nWants=sockets.target\n",
    )
    link(root, f"{VENDOR}/default.target", "graphical.target")
    return root


def enablement_tree(root: Path) -> Path:
    """One tree with every state systemctl knows, and the shapes that lead to each."""
    skeleton(root)
    v = VENDOR
    # enabled / disabled / static
    write(root, f"{v}/plain.service", unit("plain", "WantedBy=multi-user.target"))
    write(root, f"{v}/disabled.service", unit("disabled", "WantedBy=multi-user.target"))
    write(root, f"{v}/static.service", unit("static"))
    systemctl(root, "enable", "plain.service")
    # Alias= created by enable, and a vendor symlink alias
    write(
        root, f"{v}/aliased.service", unit("aliased", "WantedBy=multi-user.target\nAlias=other-name.service")
    )
    systemctl(root, "enable", "aliased.service")
    link(root, f"{v}/vendor-alias.service", "static.service")
    # RequiredBy= and UpheldBy= (.requires/ and .upholds/ directories)
    write(root, f"{v}/required.service", unit("required", "RequiredBy=multi-user.target"))
    systemctl(root, "enable", "required.service")
    # systemd 252 ignores UpheldBy= in [Install] (static), but an .upholds/ link still enables
    write(root, f"{v}/upheld.service", unit("upheld", "UpheldBy=multi-user.target"))
    write(root, f"{v}/upheld-linked.service", unit("upheld-linked", "WantedBy=multi-user.target"))
    link(
        root,
        f"{ETC}/multi-user.target.upholds/upheld-linked.service",
        "/usr/lib/systemd/system/upheld-linked.service",
    )
    # masks: by systemctl mask (/etc), by hand in /run, and an empty unit file
    write(root, f"{v}/masked.service", unit("masked", "WantedBy=multi-user.target"))
    systemctl(root, "mask", "masked.service")
    write(root, f"{v}/masked-rt.service", unit("masked-rt"))
    systemctl(root, "mask", "--runtime", "masked-rt.service")
    write(root, f"{v}/empty.service", "")
    # enabled-runtime
    write(root, f"{v}/rt.service", unit("rt", "WantedBy=multi-user.target"))
    systemctl(root, "enable", "--runtime", "rt.service")
    # linked / linked-runtime: unit files outside the search path
    write(root, "opt/units/linked.service", unit("linked", "WantedBy=multi-user.target"))
    write(root, "opt/units/linked-rt.service", unit("linked-rt"))
    link(root, f"{ETC}/linked.service", "/opt/units/linked.service")
    link(root, f"{RUN}/linked-rt.service", "/opt/units/linked-rt.service")
    # a linked unit that is also enabled
    write(root, "opt/units/linked-en.service", unit("linked-en", "WantedBy=multi-user.target"))
    link(root, f"{ETC}/linked-en.service", "/opt/units/linked-en.service")
    link(root, f"{ETC}/multi-user.target.wants/linked-en.service", "/opt/units/linked-en.service")
    # templates, instances, DefaultInstance=
    write(root, f"{v}/tmpl@.service", unit("tmpl %i", "WantedBy=multi-user.target"))
    systemctl(root, "enable", "tmpl@one.service")
    write(root, f"{v}/dflt@.service", unit("dflt %i", "WantedBy=multi-user.target\nDefaultInstance=first"))
    systemctl(root, "enable", "dflt@.service")
    write(root, f"{v}/unused@.service", unit("unused %i", "WantedBy=multi-user.target"))
    write(root, f"{v}/static@.service", unit("static %i"))
    link(root, f"{v}/multi-user.target.wants/static@vendor.service", "../static@.service")
    # Also= only: indirect; Also= partner enabled
    write(root, f"{v}/alsoer.service", unit("alsoer", "Also=disabled.service"))
    write(
        root,
        f"{v}/partner.socket",
        "[Socket]\nListenStream=/run/partner.sock\n[Install]\nWantedBy=sockets.target\n",
    )
    write(root, f"{v}/partner.service", unit("partner", "Also=partner.socket\nWantedBy=multi-user.target"))
    systemctl(root, "enable", "partner.service")
    # indirect through a link under another name in a .wants directory
    write(root, f"{v}/indirect-target.service", unit("indirect-target", "WantedBy=multi-user.target"))
    link(
        root,
        f"{ETC}/multi-user.target.wants/someone-else.service",
        "/usr/lib/systemd/system/indirect-target.service",
    )
    # generated and transient
    write(root, "run/systemd/generator/gen.service", unit("gen"))
    write(root, "run/systemd/generator.late/gen-late.service", unit("gen-late"))
    write(root, "run/systemd/transient/tr.scope", "[Scope]\n")
    # /etc overriding a vendor unit of the same name; a drop-in adding [Install]
    write(root, f"{v}/override.service", unit("override vendor", "WantedBy=multi-user.target"))
    write(root, f"{ETC}/override.service", unit("override etc"))
    write(root, f"{v}/dropin-install.service", unit("dropin-install"))
    write(root, f"{v}/dropin-install.service.d/10-install.conf", "[Install]\nWantedBy=multi-user.target\n")
    write(root, f"{ETC}/dropin-etc.service", unit("dropin-etc"))
    write(root, f"{ETC}/dropin-etc.service.d/x.conf", "[Install]\nAlias=dropin-etc-alias.service\n")
    systemctl(root, "enable", "dropin-etc.service")
    # timer, socket and path units
    write(root, f"{v}/tick.timer", "[Timer]\nOnCalendar=daily\n[Install]\nWantedBy=timers.target\n")
    write(root, f"{v}/tick.service", unit("tick"))
    write(root, f"{v}/timers.target", "[Unit]\nDescription=timers\n")
    systemctl(root, "enable", "tick.timer")
    write(
        root,
        f"{v}/watch.path",
        "[Path]\nPathExists=/etc/flag\nUnit=watched.service\n[Install]\nWantedBy=multi-user.target\n",
    )
    write(root, f"{v}/watched.service", unit("watched"))
    systemctl(root, "enable", "watch.path")
    return root


def syntax_tree(root: Path) -> Path:
    """Unit files whose [Install] section exercises the parser: systemctl's verdict depends on it."""
    skeleton(root)
    v = VENDOR
    write(root, f"{v}/cont.service", unit("cont", "WantedBy=multi-user.target \\\n  graphical.target"))
    write(
        root,
        f"{v}/cont-comment.service",
        unit("cc", "WantedBy=\\\n# a comment inside a continuation\n  multi-user.target"),
    )
    write(root, f"{v}/reset.service", unit("reset", "WantedBy=multi-user.target\nWantedBy="))
    write(root, f"{v}/reset-dropin.service", unit("reset-dropin", "WantedBy=multi-user.target"))
    write(root, f"{v}/reset-dropin.service.d/reset.conf", "[Install]\nWantedBy=\n")
    write(root, f"{v}/quoted.service", unit("quoted", 'WantedBy="multi-user.target"'))
    write(root, f"{v}/semicolon.service", unit("semi", "; WantedBy=multi-user.target"))
    write(root, f"{v}/crlf.service", unit("crlf", "WantedBy=multi-user.target").replace("\n", "\r\n"))
    write(root, f"{v}/bom.service", "\ufeff" + unit("bom", "WantedBy=multi-user.target"))
    write(root, f"{v}/case.service", unit("case", "wantedby=multi-user.target"))
    write(root, f"{v}/lower-section.service", unit("lower") + "[install]\nWantedBy=multi-user.target\n")
    write(root, f"{v}/spaces.service", unit("spaces", "  WantedBy =   multi-user.target   "))
    write(root, f"{v}/broken-header.service", unit("broken", "WantedBy=multi-user.target") + "[Unit\n")
    write(root, f"{v}/no-equals.service", unit("noeq", "WantedBy multi-user.target"))
    write(root, f"{v}/also-spec.service", unit("also-spec", "Also=%p-helper.service"))
    write(root, f"{v}/also-spec-helper.service", unit("helper"))
    write(root, f"{v}/also-bad.service", unit("also-bad", "Also=not a unit"))
    write(root, f"{v}/dflt-spec@.service", unit("ds", "WantedBy=multi-user.target\nDefaultInstance=%p"))
    systemctl(root, "enable", "dflt-spec@.service")
    write(root, f"{v}/dflt-bad@.service", unit("db", "WantedBy=multi-user.target\nDefaultInstance=a/b"))
    write(
        root,
        f"{v}/alias-mount.mount",
        "[Mount]\nWhat=/dev/x\nWhere=/alias-mount\n[Install]\nAlias=other.mount\n",
    )
    write(
        root,
        f"{v}/nonutf8.service",
        unit("nonutf8", "WantedBy=multi-user.target").encode() + b"\n# \xff\xfe bad\n",
    )
    write(root, f"{v}/garbage.service", bytes(range(256)) * 64)
    write(root, f"{v}/garbage-lines.service", b"\x00\x01\x02[Install\nWantedBy=x\n\x89PNG\r\n\x1a\n")
    write(root, f"{v}/long-line.service", unit("long") + "X-Long=" + "a" * (1024 * 1024 + 10) + "\n")
    return root


def bad_tree(root: Path) -> Path:
    """The broken shapes: each must be a recorded problem, never an exception."""
    skeleton(root)
    v = VENDOR
    write(root, f"{v}/ok.service", unit("ok", "WantedBy=multi-user.target"))
    systemctl(root, "enable", "ok.service")
    # a unit symlink loop and an alias cycle
    link(root, f"{ETC}/loop.service", "/etc/systemd/system/loop.service")
    link(root, f"{ETC}/cycle-a.service", "cycle-b.service")
    link(root, f"{ETC}/cycle-b.service", "cycle-a.service")
    # a .wants link to a missing unit, an alias to a missing unit, a linked unit whose file is gone
    link(root, f"{ETC}/multi-user.target.wants/ghost.service", "/usr/lib/systemd/system/ghost.service")
    link(root, f"{ETC}/dangling-alias.service", "/usr/lib/systemd/system/nowhere.service")
    link(root, f"{ETC}/dangling-linked.service", "/opt/gone/dangling-linked.service")
    # a "self-alias": a link to the same name elsewhere in the search path (systemctl 252: bad)
    write(root, f"{v}/self.service", unit("self", "WantedBy=multi-user.target"))
    link(root, f"{ETC}/self.service", "/lib/systemd/system/self.service")
    # a link that climbs out of the image: it resolves inside the image root
    write(root, "opt/escape.service", unit("escape"))
    link(root, f"{ETC}/escape.service", "../../../../../../../../opt/escape.service")
    # an alias link of a type that may not alias, and one changing the type
    write(root, f"{v}/data.mount", "[Mount]\nWhat=/dev/x\nWhere=/data\n")
    link(root, f"{v}/data-alias.mount", "data.mount")
    link(root, f"{v}/type-change.socket", "ok.service")
    # a template of a type that cannot be templated
    write(root, f"{v}/tmpl@.mount", "[Mount]\nWhat=/dev/x\nWhere=/t\n")
    # binary garbage and a 40 MB unit file
    write(root, f"{v}/garbage.service", random.Random(3).randbytes(4096))
    big = (unit("big", "WantedBy=multi-user.target") + "# padding\n" * (4 * 1024 * 1024)).encode()
    write(root, f"{v}/big.service", big)
    # a drop-in "directory" that is a file
    write(root, f"{v}/dropin-file.service", unit("dropin-file"))
    write(root, f"{v}/dropin-file.service.d", "not a directory\n")
    return root


def split_usr_tree(root: Path) -> Path:
    """A split-/usr image: /lib/systemd/system and /usr/lib/systemd/system are different directories."""
    skeleton(root, usr_merged=False)
    write(root, "lib/systemd/system/in-lib.service", unit("in-lib", "WantedBy=multi-user.target"))
    write(root, "usr/lib/systemd/system/in-usr.service", unit("in-usr", "WantedBy=multi-user.target"))
    write(root, "lib/systemd/system/both.service", unit("both lib"))
    write(root, "usr/lib/systemd/system/both.service", unit("both usr", "WantedBy=multi-user.target"))
    write(root, "usr/local/lib/systemd/system/local.service", unit("local", "WantedBy=multi-user.target"))
    link(root, "lib/systemd/system/lib-alias.service", "/usr/lib/systemd/system/in-usr.service")
    systemctl(root, "enable", "in-lib.service", "in-usr.service", "local.service")
    return root


def preset_tree(root: Path) -> Path:
    """Preset files across directories: overriding by file name, ordering, globs, instance lists."""
    skeleton(root)
    for name in ("alpha", "beta", "gamma", "delta", "db-one", "db-two", "x1", "xy", "mixed"):
        write(root, f"{VENDOR}/{name}.service", unit(name, "WantedBy=multi-user.target"))
    write(root, f"{VENDOR}/inst@.service", unit("inst", "WantedBy=multi-user.target"))
    write(root, f"{VENDOR}/other@.service", unit("other", "WantedBy=multi-user.target"))
    write(root, f"{VENDOR}/tick.timer", "[Timer]\nOnCalendar=daily\n[Install]\nWantedBy=timers.target\n")
    systemctl(root, "enable", "inst@a.service", "inst@zz.service", "other@b.service")
    write(
        root,
        "usr/lib/systemd/system-preset/50-vendor.preset",
        "# vendor policy\nenable alpha.service\ndisable beta.service\nenable inst@.service a b\n"
        "disable db-*\n; a comment\nenable *.timer\nignore gamma.service\n",
    )
    # same file name in /etc hides the vendor one entirely
    write(root, "usr/lib/systemd/system-preset/20-hidden.preset", "disable delta.service\n")
    write(root, "etc/systemd/system-preset/20-hidden.preset", "enable delta.service\ndisable alpha.service\n")
    write(
        root,
        "etc/systemd/system-preset/30-local.preset",
        "disable x[!y].service\nenable xy.service   # trailing comment\ndisable mixed.service extra\n"
        "disable other@*.service\n",
    )
    write(root, "usr/lib/systemd/system-preset/99-default.preset", "disable *\n")
    return root
