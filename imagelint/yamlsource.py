"""Load YAML that users write (rule packs, config) so that every error can name file:line:column.

The document is composed once into a node tree and constructed from it; the tree is kept so that a
JSON path from a schema error maps back to the line and column it came from. Aliases are refused
(an alias bomb would otherwise make validation explode), and so are duplicate mapping keys, which
PyYAML would silently collapse to the last value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from imagelint.errors import ImageLintError, source_location

MAX_YAML_BYTES = 4 * 1024 * 1024


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without aliases and without duplicate keys."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(
                problem="YAML aliases (*name) are not allowed here", problem_mark=event.start_mark
            )
        return super().compose_node(parent, index)  # type: ignore[no-any-return]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            if isinstance(key, list | dict):
                raise yaml.MarkedYAMLError(
                    problem="a mapping key must be a scalar", problem_mark=key_node.start_mark
                )
            if key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r}", problem_mark=key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Dates stay strings: schemas say "format: date" and the code parses them, one way for every file.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
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
        if node is None:
            return self.path
        return source_location(self.path, node.start_mark.line + 1, node.start_mark.column + 1)


def load_yaml(path: Path, *, error: type[ImageLintError]) -> YamlDocument:
    """Read and parse one YAML file; any problem raises ``error`` with file:line:column."""
    name = str(path)
    try:
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            raise error(what, where=name)
        if path.stat().st_size > MAX_YAML_BYTES:
            raise error(f"is larger than {MAX_YAML_BYTES // (1024 * 1024)} MiB", where=name)
        raw = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot be read: {exc.strerror}", where=name) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(
            f"is not valid UTF-8 (byte offset {exc.start})", where=source_location(name, line)
        ) from None
    loader = _StrictLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = source_location(name, mark.line + 1, mark.column + 1) if mark else name
        raise error(f"invalid YAML: {exc.problem or exc.context}", where=where) from None
    except yaml.YAMLError as exc:
        raise error(f"invalid YAML: {exc}", where=name) from None
    finally:
        loader.dispose()
    return YamlDocument(name, data, root)


def first_schema_error(document: YamlDocument, schema: dict[str, Any], error: type[ImageLintError]) -> None:
    """Validate ``document.data`` against a JSON Schema; raise the most relevant error, located."""
    import jsonschema  # imported here: it is heavy and only needed when a file is validated

    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    best = jsonschema.exceptions.best_match(validator.iter_errors(document.data))
    if best is None:
        return
    path = list(best.absolute_path)
    if best.validator == "additionalProperties" and isinstance(best.instance, dict):
        extra = [k for k in best.instance if k not in best.schema.get("properties", {})]
        path += extra[:1]  # point at the unknown key itself
    field = "/".join(str(p) for p in path) or "(top level)"
    raise error(f"{field}: {_describe(best)}", where=document.locate(path))


def _describe(err: Any) -> str:
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are not allowed", "unknown key(s)")
    if err.validator == "enum" and list(err.absolute_path)[-1:] == ["kind"]:
        return f"unknown check kind {err.instance!r} (see `imagelint schema rules` for the kinds)"
    if err.validator == "enum" and len(err.validator_value) > 12:
        return f"{err.instance!r} is not one of the {len(err.validator_value)} allowed values"
    return str(err.message)
