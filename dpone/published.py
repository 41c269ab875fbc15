"""The published JSON Schemas (``dpone/schemas/``, in the wheel too; the top-level ``schemas/``
of SPEC §1 is a link to it).

One source of truth: the program validates what it reads and writes against these files,
and ``dpone schemas export`` copies them out unchanged.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import orjson
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from dpone.canonical import verify_checksum

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
    resources_by_id = []
    for name in schema_names():
        schema = load_schema(name)
        resources_by_id.append((schema["$id"], Resource.from_contents(schema, DRAFT202012)))
    return Registry().with_resources(resources_by_id)


@functools.cache
def _whole(pattern: str) -> re.Pattern[str]:
    """A trailing ``$`` as the end of the text: Python's ``$`` also matches before a final
    newline, which would let ``"name\\n"`` pass an identifier pattern into a file name."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _whole(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = extend(Draft202012Validator, validators={"pattern": _pattern})


@functools.cache
def validator(name: str) -> Draft202012Validator:
    # The published schemas are checked against the metaschema by the test suite
    # (tests/manifest/test_schema_doc.py), not in every process that validates a document.
    schema = load_schema(name)
    strict: Draft202012Validator = _Validator(
        schema, registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    return strict


def schema_errors(doc: Any, name: str) -> list[str]:
    """Human-readable problems of ``doc`` against schema ``name`` (empty when valid)."""
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
