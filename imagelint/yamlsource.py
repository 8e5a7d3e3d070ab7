"""Load YAML that users write (rule packs, config) so that every error can name file:line:column.

The document is composed once into a node tree and constructed from it; the tree is kept so that a
JSON path from a schema error maps back to the line and column it came from. The scanning and parsing
run in libyaml (PyYAML's ``CParser``: the pure-Python scanner took most of an audit's start); only
the composing (where the bounds below are enforced, event by event) and the constructing are Python.

Only the JSON-like part of YAML is accepted, and any input either loads or fails with one line
naming file:line (exit 2), never with a traceback:

* aliases are refused (an alias bomb would otherwise make validation explode), and so are duplicate
  mapping keys, which PyYAML would silently collapse to the last value;
* mapping keys must be strings (``? [a]`` or ``? !!set {}`` would be unhashable; ``1:`` or ``on:``
  would be numbers and booleans that no schema here names);
* tags other than str, int, float, bool, null, seq and map (``!!set``, ``!!binary``,
  ``!!timestamp``, merge keys, local tags) are refused;
* nesting is bounded (``MAX_DEPTH``), so composing, constructing and validating cannot overflow the
  stack; numbers are bounded in length (``MAX_NUMBER_CHARS``: Python refuses to convert long
  decimal strings, and YAML 1.1's base-60 integers are quadratic to convert) and must be finite;
* anything else that goes wrong while loading is still reported at the closest known line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml._yaml import CParser  # libyaml: installed with PyYAML's wheels
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from imagelint.errors import ImageLintError, source_location

MAX_YAML_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 100  # nested sequences and mappings
MAX_NUMBER_CHARS = 64  # characters of one integer or float literal
MAX_SHOWN = 80  # characters of user text quoted in an error message

_CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = frozenset(_CORE + name for name in ("str", "int", "float", "bool", "null", "seq", "map"))


def one_line(text: str, limit: int = 300) -> str:
    """``text`` safe for a one-line error message: control characters escaped, length bounded."""
    cleaned = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text[: limit * 4])
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def shown(value: object) -> str:
    """A short quoted form of a user's value for error messages."""
    text = repr(value)
    return one_line(text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 4] + "...'", MAX_SHOWN + 4)


def _tag_name(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


def _refuse(problem: str, mark: Any) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)


class _StrictLoader(Composer, CParser, SafeConstructor, Resolver):
    """SafeLoader for JSON-like YAML: no aliases, string keys only, core tags only, bounded.

    libyaml scans and parses (``CParser``'s events, each with its mark); Python's ``Composer`` comes
    first in the MRO, so the node tree is composed here, one event at a time, through
    :meth:`compose_node`: an alias or a level too deep is refused before anything is built from it.
    """

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader(stream)  # PyYAML's reader refuses control characters right here, by character
        CParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self.last_mark: Any = None  # libyaml's mark of the last event composed, where nothing else is known
        self.last_node: yaml.Node | None = None  # the node being constructed, for locating surprises

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: Any = self.peek_event()  # never None here: the composer asks only while a node follows
        self.last_mark = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            raise _refuse("YAML aliases (*name) are not allowed here", event.start_mark)
        opens = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        if opens:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _refuse(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            if opens:
                self._depth -= 1
        if node is not None and node.tag not in ALLOWED_TAGS:
            what = (
                "merge keys (<<) are" if node.tag == _CORE + "merge" else f"the tag {_tag_name(node.tag)} is"
            )
            raise _refuse(
                one_line(
                    f"{what} not allowed here (strings, numbers, booleans, null, lists and mappings only)"
                ),
                node.start_mark,
            )
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        self.last_node = node
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise _refuse(f"expected a mapping for {_tag_name(node.tag)}", node.start_mark)
        seen: set[str] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _refuse("a mapping key must be a string, not a list or a mapping", key_node.start_mark)
            if key_node.tag != _CORE + "str":
                raise _refuse(
                    f"a mapping key must be a string, not {_tag_name(key_node.tag)} (quote it: "
                    f"{shown(key_node.value)})",
                    key_node.start_mark,
                )
            if key_node.value in seen:
                raise _refuse(f"duplicate key {shown(key_node.value)}", key_node.start_mark)
            seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)

    def construct_bounded_number(self, node: yaml.Node) -> int | float | bool:
        if not isinstance(node, yaml.ScalarNode):
            raise _refuse(f"expected a scalar for {_tag_name(node.tag)}", node.start_mark)
        text = str(node.value)
        if node.tag != _CORE + "bool" and len(text.replace("_", "")) > MAX_NUMBER_CHARS:
            raise _refuse(
                f"a number of {len(text)} characters is too long (at most {MAX_NUMBER_CHARS})",
                node.start_mark,
            )
        constructor = {
            _CORE + "int": SafeConstructor.construct_yaml_int,
            _CORE + "float": SafeConstructor.construct_yaml_float,
            _CORE + "bool": SafeConstructor.construct_yaml_bool,
        }[node.tag]
        try:
            value: int | float | bool = constructor(self, node)
        except (ValueError, KeyError, IndexError, TypeError):
            raise _refuse(f"not a valid {_tag_name(node.tag)}: {shown(text)}", node.start_mark) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise _refuse(f"not a finite number: {shown(text)}", node.start_mark)
        return value


for _tag in ("int", "float", "bool"):
    # (the stubs bound add_constructor to PyYAML's own loader classes; this is one by composition)
    _StrictLoader.add_constructor(_CORE + _tag, _StrictLoader.construct_bounded_number)  # type: ignore[type-var]

# Dates stay strings: schemas say "format: date" and the code parses them, one way for every file.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}


@dataclass
class YamlDocument:
    """Parsed data plus the node tree it came from, for locating errors."""

    path: str
    data: Any
    root: yaml.Node | None

    def locate(self, json_path: Sequence[str | int]) -> str:
        """``file:line:column`` of the value at ``json_path`` (the deepest part that exists)."""
        node = self.root
        for step in json_path:
            child = None
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if key_node.value == step:
                        child = value_node
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
                child = node.value[step]
            if child is None:
                break
            node = child
        if node is None:  # an empty document: its first line
            return source_location(self.path, 1)
        return source_location(self.path, node.start_mark.line + 1, node.start_mark.column + 1)


def load_yaml(path: Path, *, error: type[ImageLintError]) -> YamlDocument:
    """Read and parse one YAML file; any problem raises ``error`` with file:line:column."""
    return parse_yaml(str(path), read_yaml_bytes(path, error=error), error=error)


def read_yaml_bytes(path: Path, *, error: type[ImageLintError]) -> bytes:
    """The bytes of a YAML file (a regular file of at most ``MAX_YAML_BYTES``), else ``error``."""
    name = str(path)
    try:
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise error(what, where=name)
        if path.stat().st_size > MAX_YAML_BYTES:
            raise error(f"is larger than {MAX_YAML_BYTES // (1024 * 1024)} MiB", where=name)
        return path.read_bytes()
    except OSError as exc:
        raise error(f"cannot be read: {exc.strerror}", where=name) from None


def parse_yaml(name: str, raw: bytes, *, error: type[ImageLintError]) -> YamlDocument:
    """Parse the YAML bytes of the file ``name``; any problem raises ``error`` with file:line:column."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(
            f"is not valid UTF-8 (byte offset {exc.start})", where=source_location(name, line)
        ) from None
    try:
        loader = _StrictLoader(text)  # the reader refuses control characters right here
    except yaml.reader.ReaderError as exc:
        raise _reader_error(error, name, text, exc) from None
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = source_location(name, mark.line + 1, mark.column + 1) if mark else _at_line(name, 1)
        raise error(f"invalid YAML: {one_line(str(exc.problem or exc.context))}", where=where) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_error(error, name, text, exc) from None
    except Exception as exc:  # anything else PyYAML lets escape: still one located line, exit 2
        node = loader.last_node
        mark = node.start_mark if node is not None else loader.last_mark
        line = mark.line + 1 if mark is not None else 1
        detail = "nested too deeply" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {exc}"
        raise error(f"invalid YAML: {one_line(detail)}", where=_at_line(name, line)) from None
    finally:
        loader.dispose()
    return YamlDocument(name, data, root)


def _at_line(name: str, line: int) -> str:
    return source_location(name, line)


def _reader_error(
    error: type[ImageLintError], name: str, text: str, exc: yaml.reader.ReaderError
) -> ImageLintError:
    position = exc.position if isinstance(exc.position, int) else 0
    line = text.count("\n", 0, max(position, 0)) + 1
    what = f"#x{exc.character:04x}" if isinstance(exc.character, int) else shown(exc.character)
    return error(
        f"invalid YAML: unacceptable character {what} ({one_line(str(exc.reason))})",
        where=_at_line(name, line),
    )


def first_schema_error(document: YamlDocument, schema: dict[str, Any], error: type[ImageLintError]) -> None:
    """Validate ``document.data`` against a JSON Schema; raise the most relevant error, located."""
    import jsonschema  # imported here: it is heavy and only needed when a file is validated

    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    try:
        best = jsonschema.exceptions.best_match(validator.iter_errors(document.data))
    except RecursionError:  # deeply nested when/unless conditions: the validator recurses per level
        raise error("nested too deeply to validate", where=_deepest(document)) from None
    if best is None:
        return
    path = list(best.absolute_path)
    if best.validator == "additionalProperties" and isinstance(best.instance, dict):
        extra = [k for k in best.instance if k not in best.schema.get("properties", {})]
        path += extra[:1]  # point at the unknown key itself
    field = "/".join(str(p) for p in path) or "(top level)"
    raise error(one_line(f"{field}: {_describe(best)}"), where=document.locate(path))


def _deepest(document: YamlDocument) -> str:
    """file:line:column of the most deeply nested node (where a depth problem shows)."""
    deepest, depth = document.root, 0
    stack: list[tuple[yaml.Node, int]] = [(document.root, 0)] if document.root is not None else []
    while stack:
        node, level = stack.pop()
        if level > depth:
            deepest, depth = node, level
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, level + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend((child, level + 1) for _, child in node.value)
    if deepest is None:
        return document.path
    return source_location(document.path, deepest.start_mark.line + 1, deepest.start_mark.column + 1)


def _describe(err: Any) -> str:
    if err.validator == "additionalProperties":
        return str(err.message).replace("Additional properties are not allowed", "unknown key(s)")
    if err.validator == "enum" and list(err.absolute_path)[-1:] == ["kind"]:
        return f"unknown check kind {shown(err.instance)} (see `imagelint schema rules` for the kinds)"
    if err.validator == "enum" and len(err.validator_value) > 12:
        return f"{shown(err.instance)} is not one of the {len(err.validator_value)} allowed values"
    message = str(err.message)
    quoted = repr(err.instance)
    if len(quoted) > MAX_SHOWN:  # the user's whole value would crowd out what is wrong with it
        message = message.replace(quoted, shown(err.instance))
    return message
