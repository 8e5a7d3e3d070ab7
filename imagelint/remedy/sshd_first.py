"""Whether sshd_config's leading directives already give an option its value (set-sshd-option).

sshd takes the first value it reads. The fix puts ``OPTION VALUE`` at the top of the main file,
unless the directives before the first ``Include`` or ``Match`` already set OPTION to VALUE, so
running it again (or with several options) changes nothing. The script does the same test in awk
(:data:`AWK`); both read the same words: a keyword ends at a blank or ``=``.
"""

from __future__ import annotations

import re

_KEY_END = re.compile(r"[ \t=]")
_VALUE_START = re.compile(r"^[ \t]*=?[ \t]*")

AWK = r"""
BEGIN { k = tolower(k); found = 0 }
/^[ \t]*(#|$)/ { next }
{
  line = $0; sub(/^[ \t]+/, "", line); key = line; sub(/[ \t=].*$/, "", key)
  n = length(key); key = tolower(key)
  if (key == "include" || key == "match") exit
  if (key == k) {
    val = substr(line, n + 1); sub(/^[ \t]*=?[ \t]*/, "", val); sub(/[ \t\r]+$/, "", val)
    found = (val == v); exit
  }
}
END { exit found ? 0 : 1 }
"""


def already_set(text: str, option: str, value: str) -> bool:
    for raw in text.split("\n"):
        line = raw.lstrip(" \t")
        if not line or line.startswith("#"):
            continue
        key = _KEY_END.split(line, maxsplit=1)[0]
        if key.lower() in ("include", "match"):
            return False
        if key.lower() == option.lower():
            return _VALUE_START.sub("", line[len(key) :], count=1).rstrip(" \t\r") == value
    return False
