"""The published JSON Schemas (``dpone/schemas/``, in the wheel too; the top-level ``schemas/``
of SPEC §1 is a link to it).

One source of truth: the program validates what it reads and writes against these files,
and ``dpone schemas export`` copies them out unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

import orjson

from dpone import validity
from dpone.canonical import verify_checksum

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError
    from referencing import Registry

SCHEMA_SUFFIX = ".schema.json"


def _root() -> Traversable:
    return resources.files("dpone").joinpath("schemas")


def schema_names() -> list[str]:
    """Every published schema id, e.g. ``dpone.manifest.v1``, sorted."""
    return sorted(
        entry.name[: -len(SCHEMA_SUFFIX)]
        for entry in _root().iterdir()
        if entry.name.endswith(SCHEMA_SUFFIX)
    )


def schema_text(name: str) -> bytes:
    return _root().joinpath(name + SCHEMA_SUFFIX).read_bytes()


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(schema_text(name))
    return doc


@functools.cache
def registry() -> Registry:
    """Every published schema by its ``$id``, so schemas can ``$ref`` one another."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    resources_by_id = []
    for name in schema_names():
        schema = load_schema(name)
        resources_by_id.append((schema["$id"], Resource.from_contents(schema, DRAFT202012)))
    return Registry().with_resources(resources_by_id)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not validity.whole(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """jsonschema's validator of schema ``name``, for what is wrong with a document; whether
    it is valid at all is :func:`is_valid`'s to say, which imports no jsonschema."""
    # The published schemas are checked against the metaschema by the test suite
    # (tests/manifest/test_schema_doc.py), not in every process that validates a document.
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    strict: Draft202012Validator = extend(Draft202012Validator, validators={"pattern": _pattern})(
        load_schema(name), registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    return strict


def by_id(address: str) -> dict[str, Any]:
    """The published schema whose ``$id`` is ``address``."""
    for name in schema_names():
        schema = load_schema(name)
        if schema.get("$id") == address:
            return schema
    raise validity.Unsupported(f"no published schema has the $id {address!r}")


@functools.cache
def _checker() -> validity.Checker:
    return validity.Checker(by_id)


def matches(name: str, schema: Any, value: Any) -> bool:
    """Whether ``value`` is valid against ``schema``, a part of the published schema
    ``name`` (its ``$ref`` resolve in it)."""
    try:
        return _checker().check(schema, load_schema(name), value)
    except validity.Unsupported:  # a schema beyond dpone.validity: jsonschema answers
        return bool(validator(name).evolve(schema=schema).is_valid(value))


def is_valid(doc: Any, name: str) -> bool:
    """Whether ``doc`` is valid against the published schema ``name``."""
    return matches(name, load_schema(name), doc)


def schema_errors(doc: Any, name: str) -> list[str]:
    """Human-readable problems of ``doc`` against schema ``name`` (empty when valid)."""
    if is_valid(doc, name):
        return []
    out = []
    for err in sorted(validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path)):
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        out.append(f"{pointer}: {err.message}")
    return out


def checked_document(data: bytes, name: str, invalid: Callable[[str], Exception]) -> dict[str, Any]:
    """A file dpone wrote and reads back (untrusted): a JSON object valid against schema
    ``name`` whose checksum member verifies. Otherwise ``invalid(why)`` is raised; ``why``
    says what is wrong ("is not JSON", ...) and never quotes the document."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise invalid("is not JSON") from None
    if not isinstance(doc, dict) or schema_errors(doc, name):
        raise invalid(f"is not a valid {name}")
    if not verify_checksum(doc):
        raise invalid("does not match its checksum")
    return doc
