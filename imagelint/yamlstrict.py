"""The YAML loader behind :mod:`imagelint.yamlsource`: libyaml scans and parses, Python composes and
constructs, refusing everything but JSON-like YAML within bounds (the list is in yamlsource's
docstring). Kept apart so that PyYAML is imported only when a file is parsed."""

from __future__ import annotations

import math
from typing import Any

import yaml
from yaml._yaml import CParser  # libyaml: installed with PyYAML's wheels
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from imagelint.usertext import one_line, shown

MAX_DEPTH = 100  # nested sequences and mappings
MAX_NUMBER_CHARS = 64  # characters of one integer or float literal

CORE_TAG = "tag:yaml.org,2002:"
ALLOWED_TAGS = frozenset(CORE_TAG + name for name in ("str", "int", "float", "bool", "null", "seq", "map"))


def _tag_name(tag: str) -> str:
    return "!!" + tag[len(CORE_TAG) :] if tag.startswith(CORE_TAG) else tag


def _refuse(problem: str, mark: Any) -> yaml.MarkedYAMLError:
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)


class StrictLoader(Composer, CParser, SafeConstructor, Resolver):
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
                "merge keys (<<) are"
                if node.tag == CORE_TAG + "merge"
                else f"the tag {_tag_name(node.tag)} is"
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
            if key_node.tag != CORE_TAG + "str":
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
        if node.tag != CORE_TAG + "bool" and len(text.replace("_", "")) > MAX_NUMBER_CHARS:
            raise _refuse(
                f"a number of {len(text)} characters is too long (at most {MAX_NUMBER_CHARS})",
                node.start_mark,
            )
        constructor = {
            CORE_TAG + "int": SafeConstructor.construct_yaml_int,
            CORE_TAG + "float": SafeConstructor.construct_yaml_float,
            CORE_TAG + "bool": SafeConstructor.construct_yaml_bool,
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
    StrictLoader.add_constructor(CORE_TAG + _tag, StrictLoader.construct_bounded_number)  # type: ignore[type-var]

# Dates stay strings: schemas say "format: date" and the code parses them, one way for every file.
StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}
