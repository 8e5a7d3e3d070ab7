"""Hostile YAML for the rule-pack and config loaders, and the property every input must satisfy.

Shared by the property tests (``tests/rulepacks/test_fuzz_yaml.py``) and the long fuzzing run
(``benchmarks/fuzz_yaml.py``). Every generator is a function of a seeded ``random.Random``: the
tests let Hypothesis draw the seeds, the benchmark counts them up.

``make_case(rng)`` picks one of:

* a random YAML document: JSON-like values of any shape, written in block or flow style, with tags
  (``!!set``, ``!!binary``, ``!!int`` on text, local tags...), anchors and aliases, complex and
  non-string keys, merge keys, duplicate keys, several documents, directives, YAML 1.1 oddities
  (base-60 numbers, ``0o17``, ``.nan``, ``yes``), huge numbers and deep nesting;
* a rule pack or config shaped like the real ones, with values swapped for hostile ones (so that
  the schema, the regex and template checks and the reference checks run, not only the parser);
* random bytes or random text;
* a mutated copy of a built-in pack or ``examples/sample.imagelint.yaml``: truncated, bytes
  flipped, lines deleted, duplicated or swapped, and deep nesting, huge numbers, tags, anchors,
  control characters, a BOM or invalid UTF-8 inserted.

``check_case(case, directory)`` writes the case and loads it the way ``imagelint audit -c/-r`` and
``imagelint rules validate`` do. It returns normally when the input loaded, or was refused with the
documented error (an ImageLintError with exit code 2 and one line naming file:line), and raises
``YamlProblem`` (or whatever escaped) otherwise.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from imagelint.errors import ExitCode, ImageLintError
from tests.support import REPO, alarm_after

CASE_SECONDS = 20  # a case that takes longer is a hang
REAL_FILES = [*sorted((REPO / "rules").glob("*.yaml")), REPO / "examples" / "sample.imagelint.yaml"]

WORDS = [
    "rules", "pack", "name", "id", "title", "severity", "scope", "check", "kind", "message",
    "remediation", "paths", "pattern", "version", "waivers", "rule", "reason", "expires", "select",
    "ignore", "parameters", "fail-on", "builtin-rules", "expected-units", "when", "unless", "units",
    "example", "tags", "references", "description", "ignore_case", "redact", "max_per_file",
    "content", "mode", "link", "directory", "signal", "match", "min_count", "window",
    "provided-at-launch", "configured", "vendor_config",
]  # fmt: skip
SCALARS = [
    "", "~", "null", "yes", "no", "on", "off", "true", "False", "0", "-0", "0o17", "0x_1F", "0b101",
    "017", "1_000", "190:20:30", "-1:00", "1e999", "-.inf", ".NaN", "3.14", "1:2:3.5", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "=", "<<", "IL101", "IL999", "X001", "high", "critical", "image",
    "file.contains", "file.present", "journal.signal", "systemd.unit_enabled", "/etc/machine-id",
    "/", ".", "..", "case.yaml", "/dev/null", "/etc", "missing.yaml", "*", "tag:x", "pack:y",
    "{path}", "{path.__class__}", "{line:>999999999}", "{0}", "{", "}", "{unit!x}", "{path:{id}}",
    "(a+)+$", "(a)\\1", "(?<=x)y", "[", "\\", "(?P<n>", "a{1001}", "\\Z", "(?x) # c", "\\p{L}",
    "\x00", "\udcff", "\u202e", "\x85", "\u2028", "é", "\t", "\r\n", "::error::x", "9" * 4400,
]  # fmt: skip
TAGS = [
    "!!set", "!!binary", "!!timestamp", "!!omap", "!!pairs", "!!int", "!!float", "!!bool", "!!null",
    "!!str", "!!seq", "!!map", "!!python/object:os.system", "!local", "!", "!<tag:x.org,2000:y>",
    "!!merge", "!!value",
]  # fmt: skip


class YamlProblem(Exception):
    """The loader misbehaved on an input; ``signature`` groups equal problems (what, and where the
    error was raised)."""

    def __init__(self, problem: str, detail: str, error: BaseException | None = None) -> None:
        super().__init__(f"{problem}: {detail}")
        self.signature = problem + (f" at {raised_at(error)}" if error is not None else "")


def raised_at(error: BaseException) -> str:
    """file:line of the innermost imagelint frame the error came from."""
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "/imagelint/" in f.filename] or frames
    return f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"


@dataclass(frozen=True)
class Case:
    kind: str  # "pack" or "config"
    data: bytes
    origin: str  # which generator made it


# -- generators --------------------------------------------------------------------------------


def _scalar(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.35:
        return rng.choice(SCALARS)
    if pick < 0.5:
        return rng.choice(WORDS)
    if pick < 0.6:
        return rng.choice([rng.randint(-(10**6), 10**6), rng.random() * 1e6, rng.random() < 0.5, None])
    if pick < 0.65:
        return rng.choice(["9", "1", "0x1", "1:"]) * rng.choice([10, 100, 1000, 5000])
    length = rng.choice([1, 3, 8, 20, 200, 3000])
    return "".join(rng.choice("ab:-#&*!|>'\"{}[],? \n\t%@`\\\u00e9\ufeff") for _ in range(length))


def _value(rng: random.Random, depth: int) -> Any:
    if depth > 6 or rng.random() < 0.4:
        return _scalar(rng)
    if rng.random() < 0.5:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        (rng.choice(WORDS) if rng.random() < 0.8 else _scalar(rng)): _value(rng, depth + 1)
        for _ in range(rng.randint(0, 4))
    }


def _quote(text: str, rng: random.Random) -> str:
    style = rng.random()
    if style < 0.5:
        return text if text and re.fullmatch(r"[A-Za-z0-9_./-]+", text) else _double(text)
    if style < 0.75:
        return _double(text)
    return "'" + text.replace("'", "''") + "'"


def _double(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _decorate(rng: random.Random, text: str, anchors: list[str]) -> str:
    """Now and then a tag, an anchor or an alias in front of a node."""
    roll = rng.random()
    if roll < 0.06:
        return f"{rng.choice(TAGS)} {text}"
    if roll < 0.09:
        name = f"a{len(anchors)}"
        anchors.append(name)
        return f"&{name} {text}"
    if roll < 0.11 and anchors:
        return f"*{rng.choice(anchors)}"
    return text


def _flow(rng: random.Random, value: Any, anchors: list[str]) -> str:
    if isinstance(value, list):
        text = "[" + ", ".join(_flow(rng, v, anchors) for v in value) + "]"
    elif isinstance(value, dict):
        items = [f"{_key(rng, k, anchors)}: {_flow(rng, v, anchors)}" for k, v in value.items()]
        text = "{" + ", ".join(items) + "}"
    else:
        text = _plain(rng, value)
    return _decorate(rng, text, anchors)


def _plain(rng: random.Random, value: Any) -> str:
    if value is None:
        return rng.choice(["null", "~", ""])
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else repr(value)
    return _quote(str(value), rng)


def _key(rng: random.Random, key: Any, anchors: list[str]) -> str:
    roll = rng.random()
    if roll < 0.03:
        return "? " + _flow(rng, [key], anchors)  # a sequence as a key
    if roll < 0.05:
        return "? !!set {" + _plain(rng, key) + ": null}"
    if roll < 0.07:
        return "<<"
    return _plain(rng, key)


def _block(rng: random.Random, value: Any, indent: int, anchors: list[str]) -> str:
    pad = " " * indent
    if isinstance(value, dict) and value and rng.random() < 0.8:
        lines = []
        for k, v in value.items():
            child = _block(rng, v, indent + 2, anchors)
            sep = "\n" if child.startswith("\n") else " "
            lines.append(f"{pad}{_key(rng, k, anchors)}:{sep}{child.lstrip(' ') if sep == ' ' else child}")
            if rng.random() < 0.03:
                lines.append(lines[-1])  # a duplicate key
        return "\n" + "\n".join(lines)
    if isinstance(value, list) and value and rng.random() < 0.8:
        items = [f"{pad}- {_block(rng, v, indent + 2, anchors).lstrip()}" for v in value]
        return "\n" + "\n".join(items)
    if isinstance(value, str) and "\n" in value and rng.random() < 0.3:
        body = "\n".join(pad + line for line in value.split("\n"))
        return f"{rng.choice(['|', '>', '|-', '>+'])}\n{body}"
    return _flow(rng, value, anchors)


def random_document(rng: random.Random) -> bytes:
    value = _value(rng, 0)
    if rng.random() < 0.6:
        value = {"rules" if rng.random() < 0.5 else rng.choice(WORDS): value}
    anchors: list[str] = []
    text = _block(rng, value, 0, anchors) if rng.random() < 0.7 else _flow(rng, value, anchors)
    roll = rng.random()
    if roll < 0.05:
        text = "%YAML 1.1\n---\n" + text
    elif roll < 0.08:
        text = "%TAG ! tag:example.com,2000:\n---\n" + text
    elif roll < 0.12:
        text = text + "\n---\n" + text
    if rng.random() < 0.1:
        text = _nest(rng, text)
    return text.lstrip("\n").encode("utf-8", "surrogatepass")


@cache
def _real_rules() -> tuple[dict[str, Any], ...]:
    rules: list[dict[str, Any]] = []
    for path in REAL_FILES[:-1]:
        rules.extend(yaml.safe_load(path.read_text(encoding="utf-8"))["rules"])
    return tuple(rules)


def _hostile_leaf(rng: random.Random, value: Any) -> Any:
    roll = rng.random()
    if roll < 0.4:
        return _scalar(rng)
    if roll < 0.55:
        return _value(rng, 3)
    if roll < 0.7 and isinstance(value, str):
        return value + rng.choice(SCALARS)
    if roll < 0.8:
        return [value] if not isinstance(value, list) else value * 3
    return value


def _mutate_tree(rng: random.Random, value: Any, budget: list[int]) -> Any:
    if budget[0] <= 0:
        return value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            roll = rng.random()
            if roll < 0.05:
                budget[0] -= 1
                continue  # drop a key
            out[k] = _mutate_tree(rng, v, budget)
        if rng.random() < 0.05:
            out[rng.choice(WORDS)] = _scalar(rng)
            budget[0] -= 1
        return out
    if isinstance(value, list):
        return [_mutate_tree(rng, v, budget) for v in value]
    if rng.random() < 0.15:
        budget[0] -= 1
        return _hostile_leaf(rng, value)
    return value


def shaped_document(rng: random.Random) -> tuple[str, bytes]:
    """A rule pack (one to three real rules) or a config, with some values made hostile."""
    if rng.random() < 0.65:
        rules = [dict(r) for r in rng.sample(_real_rules(), rng.randint(1, 3))]
        for i, rule in enumerate(rules):
            rule["id"], rule["name"] = f"X{100 + i}", f"fuzz-rule-{i}"
        data: Any = {"rules": rules}
        kind = "pack"
    else:
        data = yaml.safe_load((REPO / "examples" / "sample.imagelint.yaml").read_text(encoding="utf-8"))
        data["waivers"][0]["expires"] = "2027-06-30"
        data["parameters"] = {"IL104": {"max_per_file": 2}, "IL106": {"pattern": "^x"}}
        data["select"] = ["IL1*", "tag:ssh"]
        kind = "config"
    data = _mutate_tree(rng, data, [rng.randint(1, 4)])
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=rng.choice([60, 4096]))
    if rng.random() < 0.2:
        text = _mutate_text(rng, text)
    return kind, text.encode("utf-8", "surrogatepass")


def _nest(rng: random.Random, text: str) -> str:
    depth = rng.choice([50, 99, 100, 101, 150, 400, 2000])
    deep = "[" * depth + "x" + "]" * depth if rng.random() < 0.5 else "{a: " * depth + "x" + "}" * depth
    return _insert(rng, text, deep)


def _insert(rng: random.Random, text: str, piece: str) -> str:
    lines = text.split("\n")
    at = rng.randrange(len(lines) + 1)
    if rng.random() < 0.5 and at < len(lines):
        lines[at] = lines[at] + " " + piece
    else:
        lines.insert(at, rng.choice(["", "x: ", "- ", "  key: "]) + piece)
    return "\n".join(lines)


def _mutate_text(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    op = rng.randrange(12)
    if op == 0 and text:
        return text[: rng.randrange(len(text))]  # truncated
    if op == 1 and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    elif op == 2 and lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif op == 3 and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == 4:
        return _nest(rng, text)
    elif op == 5:
        number = rng.choice(
            ["9" * 5000, "1" * 65, "0x" + "f" * 5000, "1:" * 3000 + "1", "1e400", "-" + "9" * 4301]
        )
        return _insert(rng, text, rng.choice(["version: ", "window: ", "min_size: ", "- ", ""]) + number)
    elif op == 6:
        return _insert(rng, text, rng.choice(TAGS) + " " + rng.choice(["x", "{a: 1}", "[1]", "''", "Zm9v"]))
    elif op == 7:
        return _insert(rng, text, rng.choice(["&a x", "*a", "&a [1]\n- *a", "<<: {a: 1}", "? [a, b]\n: 1"]))
    elif op == 8:
        return _insert(rng, text, rng.choice(["\x00", "\x07", "\x1b[31m", "\ufeff", "\x85", "\ud800", "\t"]))
    elif op == 9:
        return text.replace("\n", "\r\n") if rng.random() < 0.5 else text.replace("  ", "\t", 1)
    elif op == 10 and lines:
        i = rng.randrange(len(lines))
        lines[i] = " " * rng.randint(0, 7) + lines[i].lstrip()
    elif op == 11:
        return _insert(
            rng, text, "? " + rng.choice(["!!set {a: null}", "[x]", "{a: b}", "1", "null", "true"]) + "\n: v"
        )
    return "\n".join(lines)


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not buf:
            break
        i = rng.randrange(len(buf))
        roll = rng.random()
        if roll < 0.5:
            buf[i] ^= 1 << rng.randrange(8)
        elif roll < 0.7:
            buf[i] = rng.choice(b"\x00\xff\xc3\x80:[{&*!|>-?#%@`'\"\n ")
        elif roll < 0.85:
            del buf[i]
        else:
            buf[i:i] = rng.choice([b"\xef\xbb\xbf", b"\xed\xa0\x80", b"\xc3", b"[[[[", b"\n- ", b": :"])
    return bytes(buf)


def mutated_real(rng: random.Random) -> tuple[str, bytes]:
    path = rng.choice(REAL_FILES)
    kind = "config" if path.name.endswith("imagelint.yaml") else "pack"
    text = path.read_text(encoding="utf-8")
    if kind == "pack" and rng.random() < 0.7:  # most often one rule of the pack: smaller, faster
        data = yaml.safe_load(text)
        data["rules"] = [rng.choice(data["rules"])]
        data["rules"][0] = {**data["rules"][0], "id": "X100", "name": "fuzz-rule"}
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    for _ in range(rng.randint(1, 3)):
        text = _mutate_text(rng, text)
    data_bytes = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.3:
        data_bytes = _mutate_bytes(rng, data_bytes)
    return kind, data_bytes


def random_bytes(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 4, 16, 64, 512])
    if rng.random() < 0.5:
        return bytes(rng.getrandbits(8) for _ in range(size))
    return "".join(rng.choice(":-[]{}#&*!|>'\"% \n\tab1?,") for _ in range(size)).encode()


GENERATORS: dict[str, Callable[[random.Random], tuple[str, bytes]]] = {
    "document": lambda rng: (rng.choice(["pack", "config"]), random_document(rng)),
    "shaped": shaped_document,
    "bytes": lambda rng: (rng.choice(["pack", "config"]), random_bytes(rng)),
    "mutated": mutated_real,
}


def make_case(rng: random.Random) -> Case:
    origin = rng.choices(list(GENERATORS), weights=[35, 25, 15, 25])[0]
    kind, data = GENERATORS[origin](rng)
    return Case(kind, data, origin)


# -- the property ------------------------------------------------------------------------------

LOCATED = re.compile(r":[0-9]+(?::[0-9]+)?$")
FILE_LEVEL = (
    "does not exist",
    "is not a regular file",
    "is larger than",
    "cannot be read",
    "cannot be opened",
)


@cache
def builtin_packs() -> tuple[Any, ...]:
    from imagelint.rulepacks import builtin_pack_paths, load_packs

    return tuple(load_packs([], builtin=builtin_pack_paths()))


def time_limit(seconds: int) -> AbstractContextManager[None]:
    """A hang becomes a ``YamlProblem`` (SIGALRM interrupts pure-Python loops such as PyYAML's)."""
    return alarm_after(seconds, lambda: YamlProblem("hang", f"no answer within {seconds} s"))


def load_case(kind: str, path: Path) -> None:
    """What `imagelint rules validate PACK` / `audit -r PACK` and `audit -c CONFIG` do with a file."""
    from imagelint.config import load_config
    from imagelint.rulepacks import builtin_pack_paths, load_packs

    os.environ["IMAGELINT_NO_CACHE"] = "1"  # fuzz cases are not kept
    if kind == "pack":
        load_packs([path])
        return
    config = load_config(path)
    if config.rule_packs:  # as `audit` does: their ids must not collide with the built-ins'
        packs = load_packs(config.rule_packs, builtin=builtin_pack_paths())
    else:
        packs = [replace(p, rules=list(p.rules)) for p in builtin_packs()]
    config.check_references([r for p in packs for r in p.rules])
    config.apply_parameters(packs)


def check_case(case: Case, directory: Path, seconds: int = CASE_SECONDS) -> str:
    """Load the case; return "loaded" or "refused", raise YamlProblem for anything else."""
    path = directory / "case.yaml"
    path.write_bytes(case.data)
    try:
        with time_limit(seconds):
            load_case(case.kind, path)
    except ImageLintError as exc:
        text = str(exc)
        if exc.exit_code is not ExitCode.USAGE:
            raise YamlProblem(f"exit {int(exc.exit_code)}", text, exc) from None
        if "\n" in text or "\r" in text or "Traceback" in text:
            raise YamlProblem("not one line", repr(text), exc) from None
        where = exc.where or ""
        if where.startswith(str(path)):
            if not LOCATED.search(where):
                raise YamlProblem("no line", text, exc) from None
        elif not where or not (LOCATED.search(where) or exc.message.startswith(FILE_LEVEL)):
            raise YamlProblem("not located", text, exc) from None
        return "refused"
    return "loaded"
