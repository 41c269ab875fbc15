"""Whether a document is valid against one of dpone's published JSON Schemas, answered
without importing jsonschema.

Why our own: every run validates its manifest, the state and the journal it reads back, and
importing jsonschema (with referencing, attrs and rpds) costs a start-up 0.04-0.06 s, a
fifth of a small run. These published schemas use a small part of draft 2020-12, so this
module answers only *valid or not* for that part, by walking the schema. Where a document
is invalid, :mod:`dpone.published` imports jsonschema after all to say why: the messages
users see are jsonschema's, and this module never has to explain anything.

It is conservative by construction: a schema that uses a keyword it does not know is
refused at :func:`check` (:class:`Unsupported`), and the caller then asks jsonschema.
``tests/test_validity.py`` runs both on every published schema against real documents and
thousands of mutations of them, and requires the same verdict.

The semantics mirrored are jsonschema's for draft 2020-12 with dpone's format checker:

* ``type``: an integer is an ``int`` that is not a ``bool``, or an integral ``float``; a
  number is any non-``bool`` ``numbers.Number``; an object a ``dict``; an array a ``list``.
* ``enum``, ``const`` and ``uniqueItems`` compare as JSON does: ``True`` is not ``1``.
* ``pattern`` is dpone's (a trailing ``$`` is the end of the text, see
  ``dpone.published._whole``); ``patternProperties`` and ``additionalProperties`` use
  ``re.search`` as jsonschema does.
* ``unevaluatedProperties`` sees the keys that ``properties``, ``patternProperties``,
  ``additionalProperties`` and ``unevaluatedProperties`` of the schema itself evaluated,
  and those of its ``$ref``, of its valid ``allOf``/``anyOf``/``oneOf`` branches and of its
  ``if``/``then``/``else``.
* ``format: date-time`` is RFC 3339 when ``rfc3339_validator`` is installed, as jsonschema's
  format checker does; without it the format is not asserted (nor is it by jsonschema).
"""

from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

Schema = Any  # a dict or a bool
Lookup = Callable[[str], Mapping[str, Any]]  # a schema's $id -> the schema

# Keywords that assert nothing (annotations) or that a referenced schema carries.
_ANNOTATIONS = frozenset(
    {
        "$comment",
        "$defs",
        "$id",
        "$schema",
        "contentEncoding",
        "contentMediaType",
        "default",
        "deprecated",
        "description",
        "examples",
        "readOnly",
        "title",
        "writeOnly",
    }
)
_FORMATS = frozenset({"date-time"})
# Where the keywords hold schemas: one, a mapping of them, a list of them.
_ONE_SUBSCHEMA = frozenset(
    {
        "additionalProperties",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedProperties",
    }
)
_SUBSCHEMA_MAPS = frozenset({"$defs", "patternProperties", "properties"})
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})


class Unsupported(ValueError):
    """The schema uses a keyword, a ``$ref`` or a format this module does not answer for."""


@functools.cache
def whole(pattern: str) -> re.Pattern[str]:
    """A ``pattern``: a trailing ``$`` is the end of the text. Python's ``$`` also matches
    before a final newline, which would let ``"name\\n"`` pass an identifier pattern into a
    file name."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


@functools.cache
def _search(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, numbers.Number)
    raise Unsupported(f"type {name!r}")


def equal(one: Any, two: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, ``1`` is ``1.0``, containers compare deeply."""
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(equal(one[k], two[k]) for k in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one is two
    return bool(one == two)


def _unique(items: list[Any]) -> bool:
    # Pairwise: it finds every repeat, where a sort would depend on the values' order.
    return not any(equal(a, b) for i, a in enumerate(items) for b in items[i + 1 :])


@functools.cache
def _rfc3339() -> Callable[[str], bool] | None:
    try:
        from rfc3339_validator import validate_rfc3339  # type: ignore[import-untyped]
    except ImportError:  # jsonschema asserts no date-time without it either
        return None
    checker: Callable[[str], bool] = validate_rfc3339
    return checker


class Checker:
    """Answers for the schemas ``lookup`` finds by ``$id``; ``check`` is the whole of it."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup
        self._checked: set[int] = set()

    def check(self, schema: Schema, root: Mapping[str, Any], value: Any) -> bool:
        """Whether ``value`` is valid against ``schema``, a schema inside the document
        ``root`` (its ``#`` for ``$ref``). :class:`Unsupported` if the schema, or one it
        refers to, asks for what this module does not know."""
        self._supported(root)
        return self._valid(schema, root, value)

    # --- what the schemas may use -------------------------------------------------------

    def _supported(self, root: Mapping[str, Any]) -> None:
        if id(root) in self._checked:
            return
        self._checked.add(id(root))
        self._walk(root, root)

    def _walk(self, schema: Schema, root: Mapping[str, Any]) -> None:
        if isinstance(schema, bool):
            return
        if not isinstance(schema, dict):
            raise Unsupported("a schema that is neither an object nor a boolean")
        for key, sub in schema.items():
            if key == "$id" and schema is not root:
                raise Unsupported("an $id inside a schema")
            if key not in _ANNOTATIONS and key not in _ASSERTIONS and not key.startswith("x-"):
                raise Unsupported(f"the keyword {key!r}")
            if key in _ONE_SUBSCHEMA:
                self._walk(sub, root)
            for each in (
                sub.values() if key in _SUBSCHEMA_MAPS else sub if key in _SUBSCHEMA_LISTS else ()
            ):
                self._walk(each, root)
            if key == "$ref":
                # The target is walked with its document (this one, or another published one).
                self._supported(self._resolve(sub, root)[1])
            elif key == "format" and sub not in _FORMATS:
                raise Unsupported(f"the format {sub!r}")
            elif key == "type":
                for name in sub if isinstance(sub, list) else [sub]:
                    _is_type(None, name)  # raises on an unknown type name

    def _resolve(self, ref: str, root: Mapping[str, Any]) -> tuple[Schema, Mapping[str, Any]]:
        address, _, fragment = ref.partition("#")
        target_root = self._lookup(address) if address else root
        if fragment and not fragment.startswith("/"):
            raise Unsupported(f"the $ref {ref!r}")  # anchors
        node: Any = target_root
        try:
            for part in fragment.split("/")[1:]:
                key = unquote(part).replace("~1", "/").replace("~0", "~")
                node = node[int(key)] if isinstance(node, list) else node[key]
        except (KeyError, IndexError, ValueError, TypeError):
            # A pointer to nothing: jsonschema's referencing says so in its own words.
            raise Unsupported(f"the $ref {ref!r}") from None
        return node, target_root

    # --- the answer ---------------------------------------------------------------------

    def _valid(self, schema: Schema, root: Mapping[str, Any], value: Any) -> bool:
        if schema is True:
            return True
        if schema is False:
            return False
        for key, sub in schema.items():
            if key in _ANNOTATIONS or key in ("then", "else") or key.startswith("x-"):
                continue
            if not _KEYWORDS[key](self, sub, schema, root, value):  # _walk refused the others
                return False
        return True

    def evaluated(self, schema: Schema, root: Mapping[str, Any], value: dict[str, Any]) -> set[str]:
        """The keys of ``value`` that ``schema`` evaluates (``unevaluatedProperties``): its
        own keywords', its ``$ref``'s and its valid branches'."""
        if isinstance(schema, bool):
            return set()
        keys: set[str] = set()
        properties = schema.get("properties")
        if isinstance(properties, dict):
            keys |= properties.keys() & value.keys()
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if keyword in schema:
                sub = schema[keyword]
                keys |= {k for k, v in value.items() if self._valid(sub, root, v)}
        for pattern in schema.get("patternProperties", ()):
            keys |= {k for k in value if _search(pattern).search(k)}
        return keys | self._evaluated_by_others(schema, root, value)

    def _evaluated_by_others(
        self, schema: dict[str, Any], root: Mapping[str, Any], value: dict[str, Any]
    ) -> set[str]:
        keys: set[str] = set()
        if "$ref" in schema:
            target, target_root = self._resolve(schema["$ref"], root)
            keys |= self.evaluated(target, target_root, value)
        for keyword in ("allOf", "oneOf", "anyOf"):
            for sub in schema.get(keyword, ()):
                if self._valid(sub, root, value):
                    keys |= self.evaluated(sub, root, value)
        if "if" in schema:
            if self._valid(schema["if"], root, value):
                keys |= self.evaluated(schema["if"], root, value)
                if "then" in schema:
                    keys |= self.evaluated(schema["then"], root, value)
            elif "else" in schema:
                keys |= self.evaluated(schema["else"], root, value)
        return keys


# --- one function per keyword: (checker, its value, the schema, root, instance) -> valid ---


def _type(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return any(_is_type(value, name) for name in (sub if isinstance(sub, list) else [sub]))


def _enum(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return any(equal(each, value) for each in sub)


def _const(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return equal(sub, value)


def _ref(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    target, target_root = c._resolve(sub, root)
    return c._valid(target, target_root, value)


def _number(compare: Callable[[Any, Any], bool]) -> Callable[..., bool]:
    def keyword(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
        return not _is_type(value, "number") or compare(value, sub)

    return keyword


def _length(compare: Callable[[int, int], bool], kind: str) -> Callable[..., bool]:
    def keyword(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
        return not _is_type(value, kind) or compare(len(value), sub)

    return keyword


def _pattern(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return not isinstance(value, str) or whole(sub).search(value) is not None


def _format(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    checker = _rfc3339()  # the only format _FORMATS lets through: date-time
    return not isinstance(value, str) or checker is None or checker(value.upper())


def _required(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return not isinstance(value, dict) or all(k in value for k in sub)


def _properties(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    return all(c._valid(sub[k], root, v) for k, v in value.items() if k in sub)


def _pattern_properties(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    return all(
        c._valid(each, root, v)
        for pattern, each in sub.items()
        for k, v in value.items()
        if _search(pattern).search(k)
    )


def _additional(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    declared = schema.get("properties", {})
    patterns = [_search(p) for p in schema.get("patternProperties", ())]
    return all(
        c._valid(sub, root, v)
        for k, v in value.items()
        if k not in declared and not any(p.search(k) for p in patterns)
    )


def _unevaluated(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return True
    seen = c.evaluated(schema, root, value)
    return all(c._valid(sub, root, v) for k, v in value.items() if k not in seen)


def _property_names(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return not isinstance(value, dict) or all(c._valid(sub, root, k) for k in value)


def _items(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    if not isinstance(value, list):
        return True
    after = len(schema.get("prefixItems", ()))
    return all(c._valid(sub, root, v) for v in value[after:])


def _prefix_items(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    if not isinstance(value, list):
        return True
    return all(c._valid(each, root, v) for each, v in zip(sub, value, strict=False))


def _unique_items(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return not (sub and isinstance(value, list)) or _unique(value)


def _all_of(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return all(c._valid(each, root, value) for each in sub)


def _any_of(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return any(c._valid(each, root, value) for each in sub)


def _one_of(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return sum(1 for each in sub if c._valid(each, root, value)) == 1


def _not(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    return not c._valid(sub, root, value)


def _if(c: Checker, sub: Any, schema: Any, root: Any, value: Any) -> bool:
    branch = "then" if c._valid(sub, root, value) else "else"
    return branch not in schema or c._valid(schema[branch], root, value)


_KEYWORDS: dict[str, Callable[[Checker, Any, Any, Any, Any], bool]] = {
    "$ref": _ref,
    "additionalProperties": _additional,
    "allOf": _all_of,
    "anyOf": _any_of,
    "const": _const,
    "enum": _enum,
    "exclusiveMaximum": _number(lambda v, limit: v < limit),
    "exclusiveMinimum": _number(lambda v, limit: v > limit),
    "format": _format,
    "if": _if,
    "items": _items,
    "maxItems": _length(lambda n, limit: n <= limit, "array"),
    "maxLength": _length(lambda n, limit: n <= limit, "string"),
    "maximum": _number(lambda v, limit: v <= limit),
    "minItems": _length(lambda n, limit: n >= limit, "array"),
    "minLength": _length(lambda n, limit: n >= limit, "string"),
    "minimum": _number(lambda v, limit: v >= limit),
    "not": _not,
    "oneOf": _one_of,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "prefixItems": _prefix_items,
    "properties": _properties,
    "propertyNames": _property_names,
    "required": _required,
    "type": _type,
    "unevaluatedProperties": _unevaluated,
    "uniqueItems": _unique_items,
}
# What _walk lets through: what _KEYWORDS checks, and the branches "if" reads.
_ASSERTIONS = frozenset(_KEYWORDS) | {"then", "else"}
