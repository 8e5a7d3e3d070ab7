"""What the host's ``sh -s`` reads on its standard input: the collector, its plan, and the frame the
bundle comes back in on standard output.

The remote command is only ``sh -s`` (``sudo -n sh -s`` with ``--sudo``), two words any login shell
runs as written; nothing of the plan or the spec passes through a remote shell's quoting. The script:

1. checks the tools the collector needs (``tar``, and ``systemctl`` when the plan records the live
   state); a missing one is answered with a frame saying so;
2. makes a scratch directory (``mktemp -d`` under ``$TMPDIR``, else ``/var/tmp``, mode 0700) and writes
   ``collect.sh`` and ``plan.txt`` into it from here-documents (``sh collect.sh``: nothing there is
   executed, so a ``noexec`` mount is fine);
3. runs the collector in the background and sends ``imagelint-ssh 1 STATUS SIZE`` then SIZE bytes of
   bundle on standard output (STATUS ``ok``, ``collector:RC``, ``missing:TOOL`` or ``no-workdir``);
4. in the foreground, reads standard input until it ends: home closes it once the bundle is in, or
   when it gives up (^C, a deadline, a bound met), and a dropped connection ends it too. Then every
   process of the session is stopped (sshd starts the command in a session of its own, so when the
   shell's process group is its session's, ``kill 0`` reaches the collector and its samplers and
   nothing else; otherwise the background job is stopped and the per-CPU reader told to end) and the
   scratch directory is removed: it goes on every path, the collector killed midway included.
"""

from __future__ import annotations

from imagelint import __version__
from imagelint.collector import script_text

MAGIC = "imagelint-ssh 1"
_EOF = "IMAGELINT_COLLECTOR_EOF"


def remote_command(*, sudo: bool) -> str:
    """The command the ssh client asks the host to run; the script comes on its standard input."""
    return "sudo -n sh -s" if sudo else "sh -s"


def script(plan_text: str) -> str:
    """The whole of what ``sh -s`` reads on the host for the collector plan ``plan_text``."""
    tools = "tar mktemp stat readlink sort comm"
    if any(line.strip() == "show 1" for line in plan_text.splitlines()):
        tools += " systemctl"
    for body in (script_text(), plan_text):
        if any(line == _EOF for line in body.splitlines()):
            raise ValueError("a here-document holds its own end marker")
    return "\n".join(
        [
            f"# imagelint {__version__} over ssh: collect, send the bundle back; the analysis runs at home",
            "set -u",
            "umask 077",
            f'frame() {{ printf \'{MAGIC} %s %s\\n\' "$1" "$2"; }}',
            f"for t in {tools}; do",
            '    command -v "$t" > /dev/null 2>&1 || { frame "missing:$t" 0; exit 97; }',
            "done",
            'W=$(mktemp -d "${TMPDIR:-/var/tmp}/imagelint.XXXXXX") || { frame no-workdir 0; exit 93; }',
            f"cat > \"$W/collect.sh\" <<'{_EOF}'",
            *script_text().splitlines(),
            _EOF,
            f"cat > \"$W/plan.txt\" <<'{_EOF}'",
            *plan_text.splitlines(),
            _EOF,
            "(",
            '    if B=$(sh "$W/collect.sh" "$W" < /dev/null); then',
            '        frame ok "$(wc -c < "$B" | tr -d " ")"',
            '        cat "$B"',
            "    else",
            '        frame "collector:$?" 0',
            "    fi",
            ") &",
            "J=$!",
            "read -r _ || :",  # until home closes standard input (or the connection drops)
            ': > "$W/cpu.stop"',  # the per-CPU reader's own end, should a signal miss it
            "S=$(cat /proc/$$/stat 2> /dev/null) || S=",
            "set -f",
            "set -- ${S##*) }",
            "trap '' TERM",
            # our process group is the session's (sshd's setsid): every process in it is ours
            'if [ -n "${4:-}" ] && [ "$3" = "$4" ]; then kill -TERM 0; else kill -TERM "$J"; fi 2> /dev/null',
            "wait",
            'rm -rf "$W"',
            "exit 0",
            "",
        ]
    )
