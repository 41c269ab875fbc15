"""dpone.validity against jsonschema: the same verdict on real documents of every published
schema and on mutations of them, and the draft 2020-12 corners the schemas rely on."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpone import published, validity
from dpone.errors import DponeError
from dpone.manifest.loader import load_manifest
from tests.support.paths import EXAMPLES, ROOT
from tests.support.project import good, make_project, ts

SCHEMAS = published.schema_names()
#: Values a mutation puts in place of any value: every JSON type and the usual edges.
REPLACEMENTS: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 2.0, 1.5, "", "x", "x\n", "append", [], [1], {}, {"x": 1},
)  # fmt: skip
MUTATIONS_PER_DOCUMENT = 400


def _jsonschema_valid(name: str, doc: Any, schema: Any = None) -> bool:
    checker = published.validator(name)
    if schema is not None:
        checker = checker.evolve(schema=schema)
    return bool(checker.is_valid(doc))


def _ours(name: str, doc: Any) -> bool:
    return validity.Checker(published.by_id).check(
        published.load_schema(name), published.load_schema(name), doc
    )


def _manifests() -> Iterator[tuple[str, Any]]:
    for path in sorted([*EXAMPLES.rglob("*.yaml"), *(ROOT / "tests").rglob("*.yaml")]):
        try:
            yield str(path.relative_to(ROOT)), load_manifest(path).document
        except DponeError:
            continue  # not a manifest dpone can load: the loader's tests cover it


def _artifacts(root: Path) -> Iterator[tuple[str, Any]]:
    """Every JSON document a run left under ``root`` (JSON files and JSON Lines)."""
    for path in sorted(root.rglob("*")):
        if path.suffix == ".json":
            yield str(path.relative_to(root)), json.loads(path.read_bytes())
        elif path.suffix == ".jsonl":
            for number, line in enumerate(path.read_bytes().splitlines()):
                if line.strip():
                    yield f"{path.relative_to(root)}:{number}", json.loads(line)


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*at, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _paths(value, (*at, index))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _mutants(doc: Any) -> Iterator[Any]:
    """Each a copy of ``doc`` with one change: a value replaced, dropped, repeated, edited or
    given an unknown key."""
    for path in _paths(doc):
        value = _get(doc, path)
        changes: list[Any] = list(REPLACEMENTS)
        if isinstance(value, str):
            changes += [value + "\n", value.upper(), value + "!", value[:1]]
        if isinstance(value, int) and not isinstance(value, bool):
            changes += [value + 1, -value, float(value), str(value)]
        for change in changes:
            if change is value:
                continue
            mutant = copy.deepcopy(doc)
            if not path:
                yield change
                continue
            _get(mutant, path[:-1])[path[-1]] = change
            yield mutant
        if path:
            mutant = copy.deepcopy(doc)
            del _get(mutant, path[:-1])[path[-1]]
            yield mutant
        if isinstance(value, dict):
            for key in ("zz_unknown", "x-note"):
                mutant = copy.deepcopy(doc)
                _get(mutant, path)[key] = 1
                yield mutant
        if isinstance(value, list) and value:
            mutant = copy.deepcopy(doc)
            _get(mutant, path).append(copy.deepcopy(value[0]))
            yield mutant


def _agree(label: str, doc: Any) -> list[str]:
    """The schemas ``doc`` is valid against (by jsonschema), after checking every schema's
    verdict and, for those, the verdicts on its mutants."""
    valid_in = []
    for name in SCHEMAS:
        theirs = _jsonschema_valid(name, doc)
        assert _ours(name, doc) == theirs, f"{label} against {name}: jsonschema says {theirs}"
        if theirs:
            valid_in.append(name)
    for name in valid_in:
        mutants = list(_mutants(doc))
        for mutant in random.Random(label).sample(
            mutants, min(len(mutants), MUTATIONS_PER_DOCUMENT)
        ):
            theirs = _jsonschema_valid(name, mutant)
            assert _ours(name, mutant) == theirs, (
                f"a mutant of {label} against {name}: jsonschema says {theirs}"
            )
    return valid_in


def test_every_manifest_in_the_repository_gets_jsonschemas_verdict() -> None:
    seen = {label: _agree(label, doc) for label, doc in _manifests()}
    assert len(seen) > 40
    assert sum("dpone.manifest.v1" in valid for valid in seen.values()) > 20


def test_every_document_a_run_leaves_gets_jsonschemas_verdict(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("rows.csv", [good(1), good(2), ("x", "c", "1.00", ts(1), "true")])
    project.write_manifest(incremental=True)
    reports = [project.run(), project.run()]
    documents = [("report", report) for report in reports]
    documents += list(_artifacts(project.root))
    valid = {name for label, doc in documents for name in _agree(label, doc)}
    assert {
        "dpone.run.v1",
        "dpone.state.v1",
        "dpone.run-journal.v1",
        "dpone.data_contract_evidence.v1",
        "dpone.dlq.v1",
    } <= valid


def test_every_published_schema_is_answered_without_jsonschema() -> None:
    checker = validity.Checker(published.by_id)
    for name in SCHEMAS:
        schema = published.load_schema(name)
        checker.check(schema, schema, {})  # no Unsupported


@pytest.mark.parametrize(
    ("schema", "value", "valid"),
    [
        ({"type": "integer"}, 2.0, True),
        ({"type": "integer"}, 2.5, False),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, False, False),
        ({"enum": [1]}, True, False),
        ({"enum": [1]}, 1.0, True),
        ({"const": [0]}, [False], False),
        ({"uniqueItems": True}, [1, True], True),
        ({"uniqueItems": True}, [{"a": 1}, {"a": 1.0}], False),
        ({"pattern": "^[a-z]+$"}, "name\n", False),
        ({"patternProperties": {"^a$": {"type": "string"}}}, {"a\n": 1}, False),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1, False),
        ({"items": False, "prefixItems": [True]}, [1], True),
        ({"items": False, "prefixItems": [True]}, [1, 2], False),
        ({"format": "date-time"}, "2026-12-05T10:00:00Z", True),
        ({"format": "date-time"}, "2026-12-05 10:00", False),
        (
            {
                "properties": {"a": True},
                "if": {"required": ["a"]},
                "then": {"properties": {"b": True}},
                "unevaluatedProperties": False,
            },
            {"a": 1, "b": 2},
            True,
        ),
        (
            {
                "properties": {"a": True},
                "if": {"required": ["a"]},
                "then": {"properties": {"b": True}},
                "unevaluatedProperties": False,
            },
            {"b": 2},
            False,
        ),
        (
            {
                "allOf": [{"properties": {"a": True}}, {"type": "string"}],
                "unevaluatedProperties": False,
            },
            {"a": 1},
            False,
        ),
    ],
)
def test_the_draft_2020_12_corners_as_jsonschema_has_them(
    schema: dict[str, Any], value: Any, valid: bool
) -> None:
    root = {"$id": "https://dpone.dev/schemas/test.json", **schema}
    assert validity.Checker(published.by_id).check(root, root, value) is valid
    # jsonschema as dpone configures it (its pattern, its format checker)
    assert _jsonschema_valid(SCHEMAS[0], value, root) is valid


@pytest.mark.parametrize(
    "schema",
    [
        {"multipleOf": 2},
        {"$ref": "#anchor"},
        {"format": "email"},
        {"properties": {"a": {"$dynamicRef": "#x"}}},
        {"type": "decimal"},
        {"$ref": "#/$defs/missing"},
        {"$defs": {"a": [1]}, "$ref": "#/$defs/a/7"},
    ],
)
def test_what_it_does_not_know_it_refuses_to_answer(schema: dict[str, Any]) -> None:
    with pytest.raises(validity.Unsupported):
        validity.Checker(published.by_id).check(schema, schema, 1)
