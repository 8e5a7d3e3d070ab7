"""Load YAML that users write (rule packs, config) so that every error can name file:line:column.

The document is composed once into a node tree and constructed from it; the tree is kept so that a
JSON path from a schema error maps back to the line and column it came from. The scanning and parsing
run in libyaml (PyYAML's ``CParser``: the pure-Python scanner took most of an audit's start); only
the composing (where the bounds below are enforced, event by event) and the constructing are Python:
the loader is :mod:`imagelint.yamlstrict`, imported (with PyYAML) only when a file is parsed: a run
whose rule packs were kept (:mod:`imagelint.rulepacks.cache`) and that has no config file parses none.

Only the JSON-like part of YAML is accepted, and any input either loads or fails with one line
naming file:line (exit 2), never with a traceback:

* aliases are refused (an alias bomb would otherwise make validation explode), and so are duplicate
  mapping keys, which PyYAML would silently collapse to the last value;
* mapping keys must be strings (``? [a]`` or ``? !!set {}`` would be unhashable; ``1:`` or ``on:``
  would be numbers and booleans that no schema here names);
* tags other than str, int, float, bool, null, seq and map (``!!set``, ``!!binary``,
  ``!!timestamp``, merge keys, local tags) are refused;
* nesting is bounded (``yamlstrict.MAX_DEPTH``), so composing, constructing and validating cannot overflow the
  stack; numbers are bounded in length (``yamlstrict.MAX_NUMBER_CHARS``: Python refuses to convert long
  decimal strings, and YAML 1.1's base-60 integers are quadratic to convert) and must be finite;
* anything else that goes wrong while loading is still reported at the closest known line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagelint.errors import ImageLintError, source_location
from imagelint.records import dataclass
from imagelint.usertext import MAX_SHOWN, one_line, shown

if TYPE_CHECKING:
    import yaml

MAX_YAML_BYTES = 4 * 1024 * 1024


@dataclass
class YamlDocument:
    """Parsed data plus the node tree it came from, for locating errors."""

    path: str
    data: Any
    root: yaml.Node | None

    def locate(self, json_path: Sequence[str | int]) -> str:
        """``file:line:column`` of the value at ``json_path`` (the deepest part that exists)."""
        import yaml  # loaded already: the document was parsed

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
    import yaml

    from imagelint.yamlstrict import StrictLoader

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(
            f"is not valid UTF-8 (byte offset {exc.start})", where=source_location(name, line)
        ) from None
    try:
        loader = StrictLoader(text)  # the reader refuses control characters right here
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
    import yaml

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
