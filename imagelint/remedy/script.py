"""The plan as a POSIX ``sh`` script taking the image root as ``$1`` (default ``/``), and as a Packer
provisioner block around it.

Every argument is quoted with ``shlex.quote`` and every action is one of a fixed set of commands
(``systemctl --root``, ``rm``, ``ln``, ``chmod``, a truncation, a line put first in sshd_config, a
``!`` put before a hash in /etc/shadow), so a
rule pack or an image path can never add shell. The script cannot resolve links as a chroot would,
so it refuses (exit 3) to go through any link on the way to a path it changes, as ``--apply`` does
for the file steps; the paths are the canonical ones the audit resolved, so on the audited tree it
never meets one. A file it rewrites (sshd_config, /etc/shadow) passes --apply's checks first, and its
new text is made in a fresh ``mktemp`` file in the file's own directory: no name the image could
have planted a link at. It carries only the helpers its steps call.
"""

from __future__ import annotations

import re
import shlex

from imagelint.remedy.apply import MAX_SHADOW, MAX_SSHD_CONFIG
from imagelint.remedy.plan import Plan, Step
from imagelint.remedy.sshd_first import AWK
from imagelint.report.escape import for_log

PRELUDE = r"""set -eu
il_root=${1:-/}
case $il_root in -*) echo "imagelint fix: the root is a path, not an option (./$il_root)" >&2; exit 2 ;; esac
case $il_root in /) il_root= ;; *) il_root=${il_root%/} ;; esac
if [ ! -d "${il_root:-/}" ]; then echo "imagelint fix: ${il_root:-/} is not a directory" >&2; exit 2; fi
SYSTEMCTL_SKIP_SYSV=1  # the native unit is what is disabled: no update-rc.d pass
export SYSTEMCTL_SKIP_SYSV
"""

# Each helper is emitted only when a step uses it (HELPERS[name]: its text and the helpers it calls).
NOLINK = r"""
# il_nolink PATH N: stop (exit 3) if any of the first N components of PATH below the root is a link
il_nolink() {
  il_rest=${1#/} il_cur=$il_root il_n=$2
  while [ -n "$il_rest" ] && [ "$il_n" -gt 0 ]; do
    il_part=${il_rest%%/*}
    case $il_rest in */*) il_rest=${il_rest#*/} ;; *) il_rest= ;; esac
    il_cur=$il_cur/$il_part il_n=$((il_n - 1))
    if [ -L "$il_cur" ]; then echo "imagelint fix: a link on the way to $1; not followed" >&2; exit 3; fi
  done
}
"""

# --apply's checks of a file it rewrites (remedy/apply.py, _read_bounded): no link on the way or at
# the file, a regular file or none, at most LIMIT bytes. The new text is made in a temporary that
# mktemp creates afresh (O_EXCL, an unpredictable name) in the file's own directory inside the root,
# then written over the file in place, as --apply writes it: the same inode, so owner and mode stay.
REWRITE = r"""
il_tmp=
il_cleanup() { if [ -n "$il_tmp" ]; then rm -f -- "$il_tmp"; fi; }
trap il_cleanup EXIT
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM

# il_rewritable PATH LIMIT: stop (exit 3) unless PATH below the root can be rewritten as --apply would
il_rewritable() {
  il_nolink "$1" 1000
  il_f=$il_root$1 il_d=$il_root${1%/*}
  if [ -e "$il_f" ] && [ ! -f "$il_f" ]; then
    echo "imagelint fix: $1 is not a regular file; not changed" >&2; exit 3
  fi
  if [ -f "$il_f" ] && [ "$(wc -c < "$il_f")" -gt "$2" ]; then
    echo "imagelint fix: $1 is larger than $2 bytes; not changed" >&2; exit 3
  fi
}

# il_replace: write the temporary's text over $il_f (same inode) and remove the temporary
il_replace() {
  cat -- "$il_tmp" > "$il_f"
  rm -f -- "$il_tmp"
  il_tmp=
}
"""

SSHD = r"""
# il_sshd OPTION VALUE: make OPTION VALUE sshd's first value, unless the leading directives say so
il_sshd() {
  il_rewritable /etc/ssh/sshd_config MAX_SSHD_CONFIG
  if [ ! -d "$il_d" ]; then
    echo "imagelint fix: /etc/ssh/sshd_config: its directory does not exist" >&2; exit 3
  fi
  if [ -f "$il_f" ] && awk -v k="$1" -v v="$2" 'AWK' "$il_f"; then return 0; fi
  il_tmp=$(mktemp "$il_d/.imagelint.XXXXXX")
  { printf '%s %s\n' "$1" "$2"; if [ -f "$il_f" ]; then cat -- "$il_f"; fi; } > "$il_tmp"
  il_replace
}
""".replace("'AWK'", shlex.quote(AWK.strip())).replace("MAX_SSHD_CONFIG", str(MAX_SSHD_CONFIG))

LOCK = r"""
# il_lock USER: a ! before USER's hash in /etc/shadow, as passwd -l puts it (no backup left beside it)
il_lock() {
  il_rewritable /etc/shadow MAX_SHADOW
  il_unlocked='NF > 1 && $1 == u && substr($2, 1, 1) != "!"'
  if [ -f "$il_f" ] && awk -F: -v u="$1" "$il_unlocked { f = 1 } END { exit !f }" "$il_f"; then
    il_tmp=$(mktemp "$il_d/.imagelint.XXXXXX")
    awk -F: -v OFS=: -v u="$1" "$il_unlocked { \$2 = \"!\" \$2 } { print }" "$il_f" > "$il_tmp"
    il_replace
  fi
}
""".replace("MAX_SHADOW", str(MAX_SHADOW))

HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "il_nolink": (NOLINK, ()),
    "il_rewrite": (REWRITE, ("il_nolink",)),
    "il_sshd": (SSHD, ("il_rewrite",)),
    "il_lock": (LOCK, ("il_rewrite",)),
}
_SHELL_INERT = re.compile(r"[A-Za-z0-9._+*?-]+")  # a name pattern the shell only expands, never splits


def _depth(path: str) -> int:
    return len([p for p in path.split("/") if p])


def _command(step: Step) -> str:
    if step.action in ("disable-unit", "mask-unit"):
        verb = step.action.removesuffix("-unit")
        return f'systemctl --root="${{il_root:-/}}" {verb} -- {shlex.quote(step["unit"])}'
    if step.action == "set-sshd-option":
        return f"il_sshd {shlex.quote(step['option'])} {shlex.quote(step['value'])}"
    if step.action == "lock-password":
        return f"il_lock {shlex.quote(step['user'])}"
    path = step["path"]
    here = f'"$il_root"{shlex.quote(path)}'
    n = _depth(path)
    if step.action == "remove-path":
        return f"il_nolink {shlex.quote(path)} {n - 1}; rm -rf -- {here}"
    if step.action == "remove-matching":
        pattern = step["match"]
        if not _SHELL_INERT.fullmatch(pattern):  # the pack's schema allows no other; never trust it here
            raise ValueError(f"remove-matching pattern {pattern!r} is not shell-inert")
        return (
            f"il_nolink {shlex.quote(path)} {n}; for il_e in {here}/{pattern}; do "
            'if [ -e "$il_e" ] || [ -L "$il_e" ]; then rm -rf -- "$il_e"; fi; done'
        )
    if step.action == "empty-file":
        return f"il_nolink {shlex.quote(path)} {n}; if [ -f {here} ] && [ -s {here} ]; then : > {here}; fi"
    if step.action == "symlink":
        target = shlex.quote(step["target"])
        return (
            f"il_nolink {shlex.quote(path)} {n - 1}; "
            f'if [ ! -L {here} ] || [ "$(readlink -- {here})" != {target} ]; then '
            f"rm -rf -- {here}; ln -s -- {target} {here}; fi"
        )
    if step.action == "chmod":
        mode = _symbolic(step["clear"])
        return f"il_nolink {shlex.quote(path)} {n}; if [ -e {here} ]; then chmod {mode} -- {here}; fi"
    raise ValueError(f"unknown fix action {step.action}")


def _symbolic(clear: str) -> str:
    """Octal bits to clear as chmod's symbolic mode (``0002`` → ``o-w``)."""
    bits = int(clear, 8)
    classes = []
    for who, shift, special, letter in (("u", 6, 0o4000, "s"), ("g", 3, 0o2000, "s"), ("o", 0, 0o1000, "t")):
        perms = "".join(c for c, b in (("r", 4), ("w", 2), ("x", 1)) if bits >> shift & b)
        perms += letter if bits & special else ""
        if perms:
            classes.append(f"{who}-{perms}")
    return ",".join(classes) or "a-"


def _helpers(commands: list[str]) -> str:
    """The helpers the commands call, each once, every helper before those that call it."""
    wanted: list[str] = []

    def want(name: str) -> None:
        for needed in HELPERS[name][1]:
            want(needed)
        if name not in wanted:
            wanted.append(name)

    for name in HELPERS:
        if any(re.search(rf"(^|; ){name} ", command) for command in commands):
            want(name)
    return "".join(HELPERS[name][0] for name in wanted)


def render_script(plan: Plan, subject: str, version: str) -> str:
    commands = [_command(step) for step in plan.steps]
    lines = [
        "#!/bin/sh",
        f"# imagelint {version} fix for {for_log(subject)}",
        "# Usage: sh fix.sh [IMAGE-ROOT]   (default /: inside the image build; a mounted image otherwise)",
        PRELUDE + _helpers(commands),
    ]
    for step, command in zip(plan.steps, commands, strict=True):
        lines.extend(f"# clears {for_log(finding)}" for finding in plan.clears[step])
        lines.append(command)
    if plan.manual:
        lines.append("")
        lines.append("# not fixable automatically:")
        lines.extend(f"#   {for_log(finding)}: {for_log(why)}" for finding, why in plan.manual)
    return "\n".join(lines) + "\n"


def render_packer(plan: Plan, subject: str, version: str) -> str:
    """An HCL ``provisioner "shell"`` block running the script on the build instance (root /)."""
    script = render_script(plan, subject, version)
    script = script.replace("${", "$${").replace("%{", "%%{")  # HCL template sequences, kept literal
    delimiter = "IMAGELINT_FIX"
    while any(line.strip() == delimiter for line in script.splitlines()):
        delimiter += "_"
    return (
        f"# imagelint {version} fix: paste into the build block, after the steps it corrects\n"
        'provisioner "shell" {\n'
        '  execute_command = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh {{ .Path }} /"\n'
        f"  inline = [<<-{delimiter}\n{script}{delimiter}\n  ]\n"
        "}\n"
    )
