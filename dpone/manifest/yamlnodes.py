"""A manifest's YAML node graph turned into plain JSON-compatible data, with the line and
column of every value (the loader's second half; ``loader.py`` reads the file and reports).

Working on ruamel.yaml's nodes, never on constructed Python objects, lets dpone decide what a
manifest may hold:

- no tags beyond the JSON-compatible core schema (``!!python/object``, ``!custom`` refused);
- no duplicate keys (ruamel's composer does not check them; its constructor would, but
  constructing first would lose the marks the error needs);
- anchors and aliases expand within a node budget (alias bombs refused) and a depth limit,
  checked on the event stream before any node graph is built;
- timestamps stay the text the user wrote (a manifest is configuration, not data);
- integers beyond ±2**53 and non-finite floats are refused: they have no exact JSON form,
  and the plan fingerprint is computed over RFC 8785 canonical JSON.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
)
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from dpone.errors import ErrorDetail, ManifestError
from dpone.manifest.pointers import join_pointer
from dpone.records import frozen

MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_ALIASES = 1_000
SAFE_INT = 2**53

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_CORE}{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")}
_MERGE_TAG = f"{_CORE}merge"
_MAP_TAG = f"{_CORE}map"
_SEQ_TAG = f"{_CORE}seq"


@frozen
class Mark:
    """1-based positions of a mapping key (if any) and of its value."""

    line: int
    column: int
    key_line: int | None = None
    key_column: int | None = None


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0


class NodeConverter:
    """Node graph -> plain data, collecting marks and errors (collect-all where it can)."""

    def __init__(self, display_path: str) -> None:
        self.display_path = display_path
        self.marks: dict[str, Mark] = {}
        self.errors: list[ErrorDetail] = []
        self.budget = _Budget()

    def error(self, code: str, message: str, node: Node, pointer: str, *fixes: str) -> None:
        self.errors.append(
            ErrorDetail(
                code=code,
                message=message,
                stage="load",
                pointer=pointer,
                path=self.display_path,
                line=node.start_mark.line + 1,
                column=node.start_mark.column + 1,
                fixes=tuple(fixes),
            )
        )

    def convert(self, node: Node, pointer: str, depth: int) -> Any:
        self.budget.nodes += 1
        if self.budget.nodes > MAX_NODES:
            raise Abort(
                "DPONE_MANIFEST_YAML_ALIAS_LIMIT",
                f"the manifest expands to more than {MAX_NODES} nodes",
                node,
                pointer,
                "remove the anchors and aliases that repeat large parts of the document",
            )
        if depth > MAX_DEPTH:
            raise Abort(
                "DPONE_MANIFEST_YAML_TOO_DEEP",
                f"the manifest nests deeper than {MAX_DEPTH} levels",
                node,
                pointer,
                "flatten the structure; no manifest key needs that depth",
            )
        if isinstance(node, MappingNode):
            return self._mapping(node, pointer, depth)
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ_TAG:
                self._bad_tag(node, pointer)
                return None
            out = []
            for i, item in enumerate(node.value):
                child = join_pointer(pointer, i)
                self.marks[child] = value_mark(item)
                out.append(self.convert(item, child, depth + 1))
            return out
        assert isinstance(node, ScalarNode)
        return self._scalar(node, pointer)

    def _bad_tag(self, node: Node, pointer: str) -> None:
        self.error(
            "DPONE_MANIFEST_YAML_TAG",
            "YAML tags are not allowed in a manifest",
            node,
            pointer,
            "remove the tag; write plain strings, numbers, lists and mappings",
        )

    def _scalar(self, node: ScalarNode, pointer: str) -> Any:
        tag = node.tag
        if tag not in _SCALAR_TAGS:
            self._bad_tag(node, pointer)
            return None
        if tag == f"{_CORE}str" or tag == f"{_CORE}timestamp":
            return node.value
        value = _core_scalar(tag, str(node.value))
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int) and not -SAFE_INT <= value <= SAFE_INT:
            self.error(
                "DPONE_MANIFEST_RANGE",
                "integers beyond ±2^53 have no exact JSON form",
                node,
                pointer,
                "quote the number to make it a string",
            )
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.error(
                "DPONE_MANIFEST_TYPE",
                "infinite and NaN numbers are not allowed in a manifest",
                node,
                pointer,
                "write a finite number, or quote it to make it a string",
            )
            return None
        return value

    def _mapping(self, node: MappingNode, pointer: str, depth: int) -> dict[str, Any] | None:
        if node.tag != _MAP_TAG:
            self._bad_tag(node, pointer)
            return None
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.update(self._merge_sources(value_node, pointer, depth))
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag not in _SCALAR_TAGS:
                self.error(
                    "DPONE_MANIFEST_TYPE",
                    "mapping keys must be plain scalars",
                    key_node,
                    pointer,
                    "write the key as a plain name",
                )
                continue
            # A key is a name: keep the text as written (``1_000`` stays "1_000").
            key = str(key_node.value)
            child = join_pointer(pointer, key)
            if key in seen:
                self.error(
                    "DPONE_MANIFEST_YAML_DUPLICATE_KEY",
                    f"the key {key!r} appears more than once in this mapping",
                    key_node,
                    child,
                    "keep one occurrence of the key",
                )
                continue
            seen.add(key)
            vm = value_mark(value_node)
            self.marks[child] = Mark(
                vm.line, vm.column, key_node.start_mark.line + 1, key_node.start_mark.column + 1
            )
            out[key] = self.convert(value_node, child, depth + 1)
        for key, value in merged.items():
            out.setdefault(key, value)
        return out

    def _merge_sources(self, node: Node, pointer: str, depth: int) -> dict[str, Any]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for src in sources:
            value = self.convert(src, pointer, depth + 1)
            if not isinstance(value, dict):
                self.error(
                    "DPONE_MANIFEST_TYPE",
                    "a merge key (<<) takes a mapping or a list of mappings",
                    src,
                    pointer,
                )
                continue
            for key, item in value.items():
                merged.setdefault(key, item)
        return merged


class Abort(Exception):
    def __init__(self, code: str, message: str, node: Node | None, pointer: str, fix: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.node = node
        self.pointer = pointer
        self.fix = fix


def _core_scalar(tag: str, text: str) -> bool | int | float | None:
    """The value of a scalar the YAML 1.2 resolver already typed as bool, null, int or float."""
    kind = tag[len(_CORE) :]
    if kind == "null":
        return None
    if kind == "bool":
        return text.lower() == "true"
    digits = text.replace("_", "")
    if kind == "int":
        sign = -1 if digits.startswith("-") else 1
        body = digits.lstrip("+-").lower()
        for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
            if body.startswith(prefix):
                return sign * int(body[2:], base)
        return sign * int(body, 10)
    lowered = digits.lower()
    if lowered in (".nan", "+.nan", "-.nan"):
        return math.nan
    if lowered.endswith(".inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    return float(digits)


def value_mark(node: Node) -> Mark:
    return Mark(node.start_mark.line + 1, node.start_mark.column + 1)


def yaml_parser() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 2)
    return yaml


def check_events(text: str, display_path: str) -> None:
    """Depth and alias count from the event stream, before any node graph is built."""
    depth = 0
    aliases = 0
    events: Iterator[Any] = yaml_parser().parse(io.StringIO(text))
    for event in events:
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _event_error(
                    event,
                    display_path,
                    "DPONE_MANIFEST_YAML_TOO_DEEP",
                    f"the manifest nests deeper than {MAX_DEPTH} levels",
                    "flatten the structure; no manifest key needs that depth",
                )
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
        elif isinstance(event, AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _event_error(
                    event,
                    display_path,
                    "DPONE_MANIFEST_YAML_ALIAS_LIMIT",
                    f"the manifest uses more than {MAX_ALIASES} aliases",
                    "write the repeated parts out, or use fewer aliases",
                )


def _event_error(event: Any, path: str, code: str, message: str, fix: str) -> ManifestError:
    """The manifest error of one event of the stream (where it starts), raised at once."""
    mark = event.start_mark
    detail = ErrorDetail(
        code=code,
        message=message,
        stage="load",
        path=path,
        line=mark.line + 1,
        column=mark.column + 1,
        fixes=(fix,),
    )
    return ManifestError.collect([detail], path)


def compose(text: str) -> Node | None:
    """The node graph of ``text`` (None for an empty document); YAML errors propagate."""
    root: Node | None = yaml_parser().compose(io.StringIO(text))
    return root
