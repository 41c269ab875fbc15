"""The published manifest and error schemas: well-formed, documented, in step with the code.

The manifest schema is what an editor shows (yaml-language-server): every property carries a
description, and its closed vocabularies and DLQ limits are the ones the Python code uses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML

from dpone.contracts.dlq import LIMITS, PII_POLICIES
from dpone.contracts.spec import (
    COERCIONS,
    CONFLICT_POLICIES,
    ENFORCEMENTS,
    EVOLUTION_MODES,
    LOGICAL_TYPES,
)
from dpone.errors import MANIFEST_CODES

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_SCHEMA = ROOT / "schemas" / "dpone.manifest.v1.schema.json"
ERROR_SCHEMA = ROOT / "schemas" / "dpone.error.v1.schema.json"
EXAMPLES = ROOT / "manifests_examples"
INVALID = EXAMPLES / "invalid"
EXAMPLE_MANIFESTS = sorted(EXAMPLES.glob("*/manifest.yaml"))

# JSON pointers (as key tuples) into the manifest schema.
SINK_OPTIONS = ("properties", "sink", "properties", "options", "properties")
CONTRACT = (*SINK_OPTIONS, "schema_contract", "properties")
DLQ = (*SINK_OPTIONS, "dlq", "properties")


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def _yaml(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def _at(doc: dict[str, Any], keys: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in keys:
        node = node[key]
    return node


def _properties(node: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """Every (location, schema) under a ``properties`` keyword, however deeply nested.

    ``if`` subschemas are conditions (``type: file``), not documentation: they are skipped.
    """
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "if":
                continue
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    yield f"{where}/properties/{name}", sub
            yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _properties(item, f"{where}/{i}")


@pytest.fixture(scope="module")
def manifest_schema() -> dict[str, Any]:
    return _load(MANIFEST_SCHEMA)


@pytest.fixture(scope="module")
def validator(manifest_schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(manifest_schema)


@pytest.mark.parametrize(
    "path", sorted(MANIFEST_SCHEMA.parent.glob("*.schema.json")), ids=lambda p: p.name
)
def test_schema_is_valid_draft_2020_12(path: Path) -> None:
    """Every published schema (dpone.published no longer checks them in each process)."""
    schema = _load(path)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://dpone.dev/schemas/{path.name}"
    Draft202012Validator.check_schema(schema)


def test_every_manifest_property_has_a_description(manifest_schema: dict[str, Any]) -> None:
    found = list(_properties(manifest_schema))
    assert len(found) > 50
    missing = [where for where, sub in found if not str(sub.get("description", "")).strip()]
    assert missing == []


def test_logical_types_match(manifest_schema: dict[str, Any]) -> None:
    column = _at(manifest_schema, (*CONTRACT, "columns", "additionalProperties"))
    assert tuple(column["properties"]["type"]["enum"]) == LOGICAL_TYPES


def test_enforcements_match(manifest_schema: dict[str, Any]) -> None:
    assert tuple(_at(manifest_schema, (*CONTRACT, "enforcement", "enum"))) == ENFORCEMENTS


def test_coercions_match(manifest_schema: dict[str, Any]) -> None:
    assert tuple(_at(manifest_schema, (*CONTRACT, "coercion", "enum"))) == COERCIONS


def test_evolution_modes_match(manifest_schema: dict[str, Any]) -> None:
    modes = manifest_schema["$defs"]["evolutionMode"]["enum"]
    assert tuple(modes) == EVOLUTION_MODES


def test_conflict_policies_match(manifest_schema: dict[str, Any]) -> None:
    policy = _at(
        manifest_schema, (*SINK_OPTIONS, "type_inference", "properties", "conflict_policy")
    )
    assert tuple(policy["enum"]) == CONFLICT_POLICIES


def test_pii_policies_match(manifest_schema: dict[str, Any]) -> None:
    assert tuple(_at(manifest_schema, (*DLQ, "pii_policy", "enum"))) == PII_POLICIES


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_dlq_limits_match(manifest_schema: dict[str, Any], name: str) -> None:
    default, low, high = LIMITS[name]
    prop = _at(manifest_schema, (*DLQ, name))
    assert (prop["default"], prop["minimum"], prop["maximum"]) == (default, low, high)


def test_there_are_examples() -> None:
    assert len(EXAMPLE_MANIFESTS) >= 4


@pytest.mark.parametrize("path", EXAMPLE_MANIFESTS, ids=lambda p: p.parent.name)
def test_example_is_valid(validator: Draft202012Validator, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=../../schemas/")
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(_yaml(path))]
    assert errors == []


@pytest.mark.parametrize("path", EXAMPLE_MANIFESTS, ids=lambda p: p.parent.name)
def test_example_file_source_matches_files(path: Path) -> None:
    source = _yaml(path)["source"]
    # An object store example's bucket is filled by its upload.py; test_every_example_runs
    # runs it against the local S3 server.
    if source["type"] == "file" and "://" not in source["path"]:
        assert sorted(path.parent.glob(source["path"])), source["path"]


def _with_extension_keys(node: Any, parent_key: str = "") -> Any:
    """``node`` with an ``x-note`` key added to every mapping that has fixed keys."""
    if isinstance(node, list):
        return [_with_extension_keys(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _with_extension_keys(value, key) for key, value in node.items()}
    if parent_key not in ("columns", "args", "params", "headers"):  # keys are data
        out["x-note"] = {"anything": [1, "two"]}
    return out


@pytest.mark.parametrize("path", EXAMPLE_MANIFESTS, ids=lambda p: p.parent.name)
def test_extension_keys_are_allowed_everywhere(validator: Draft202012Validator, path: Path) -> None:
    doc = _with_extension_keys(_yaml(path))
    assert [e.message for e in validator.iter_errors(doc)] == []


def test_unknown_key_is_rejected(validator: Draft202012Validator) -> None:
    doc = _yaml(EXAMPLES / "orders_csv" / "manifest.yaml")
    doc["sink"]["options"]["dlq"]["retention"] = 30
    doc["source"]["callable"] = "pkg:rows"  # a key of the python source type
    assert sorted(e.validator for e in validator.iter_errors(doc)) == [
        "additionalProperties",
        "unevaluatedProperties",
    ]


def test_golden_invalid_manifests_are_listed() -> None:
    expected = _load(INVALID / "expected.json")
    files = sorted(p.name for p in INVALID.glob("*.yaml"))
    assert len(files) >= 20
    assert sorted(expected) == files
    for name, errors in expected.items():
        assert errors, name
        for error in errors:
            assert error["code"] in MANIFEST_CODES, (name, error)
            assert isinstance(error["line"], int), (name, error)
            assert error["column"] is None or isinstance(error["column"], int), (name, error)


def test_error_schema_accepts_a_summary() -> None:
    one = {
        "schema": "dpone.error.v1",
        "code": "DPONE_MANIFEST_UNKNOWN_KEY",
        "stage": "validate",
        "severity": "error",
        "message": "unknown key 'retention'",
        "fixes": ["did you mean 'retention_days'?"],
        "path": "manifest.yaml",
        "pointer": "/sink/options/dlq/retention",
        "line": 12,
        "column": 7,
    }
    summary = {
        "schema": "dpone.error.v1",
        "code": "DPONE_MANIFEST_INVALID",
        "stage": "validate",
        "severity": "error",
        "message": "the manifest has 2 errors",
        "fixes": [],
        "errors": [one, one],
    }
    validator = Draft202012Validator(_load(ERROR_SCHEMA))
    assert list(validator.iter_errors(summary)) == []
    assert list(validator.iter_errors({**one, "line": 0}))
