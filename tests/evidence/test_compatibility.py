"""The compatibility rule (docs/contracts.md): each schema change additive or breaking."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dpone.contracts.spec import ColumnSpec
from dpone.contracts.types import sink_field
from dpone.evidence.compatibility import compatibility, widens
from dpone.evidence.model import schema_changes

TABLE = "analytics.orders"


def field(name: str, type_: str, *, nullable: bool = True, **kw: int | bool) -> pa.Field:
    return sink_field(ColumnSpec(name, type_, nullable=nullable, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("before", "after", "widening"),
    [
        ("decimal(10,2)", "decimal(12,2)", True),
        ("decimal(10,2)", "decimal(11,3)", True),
        ("decimal(10,2)", "decimal(10,3)", False),  # one integer digit fewer
        ("decimal(10,2)", "decimal(12,1)", False),  # a fraction digit fewer
        ("integer", "decimal(19,0)", True),
        ("integer", "decimal(20,2)", False),
        ("integer", "float", False),  # above 2**53 a float is not exact
        ("date", "timestamp", True),
        ("date", "timestamp(tz)", True),
        ("timestamp", "date", False),
        ("timestamp", "timestamp(tz)", False),
        ("float", "integer", False),
        ("string", "json", True),  # the same text; a sink may report JSON as a string
        ("integer", "string", False),
        ("boolean", "boolean", True),
    ],
)
def test_the_widening_table(before: str, after: str, widening: bool) -> None:
    assert widens(before, after) is widening


def test_a_new_table_is_additive() -> None:
    written = {"id": field("id", "integer", nullable=False)}
    report = compatibility(TABLE, None, written, schema_changes(TABLE, None, written))
    assert report.level == "additive"
    assert [c.change for c in report.changes] == ["table_created"]


def test_no_change_is_level_none() -> None:
    existing = pa.schema([field("id", "integer", nullable=False), field("name", "string")])
    written = {f.name: f for f in existing}
    report = compatibility(TABLE, existing, written, schema_changes(TABLE, existing, written))
    assert report.to_json() == {"level": "none", "changes": []}


def test_each_change_is_classified_and_the_worst_is_the_level() -> None:
    existing = pa.schema(
        [
            field("id", "integer", nullable=False),
            field("amount", "decimal", precision=10, scale=2),
            field("day", "date"),
            field("code", "integer"),
            field("name", "string"),
            field("gone", "string"),
            field("__dpone__nc__amount", "string"),
        ]
    )
    written = {
        f.name: f
        for f in [
            field("id", "integer", nullable=False),
            field("amount", "decimal", precision=12, scale=2),
            field("day", "timestamp", timezone=True),
            field("code", "string"),
            field("name", "string", nullable=False),
            field("note", "string"),
        ]
    }
    report = compatibility(TABLE, existing, written, schema_changes(TABLE, existing, written))
    assert [(c.change, c.column, c.before, c.after, c.compatibility) for c in report.changes] == [
        ("column_added", "note", None, "string", "additive"),
        ("type_widened", "amount", "decimal(10,2)", "decimal(12,2)", "additive"),
        ("type_widened", "day", "date", "timestamp(tz)", "additive"),
        ("type_changed", "code", "integer", "string", "breaking"),
        ("nullability_tightened", "name", "string", "string", "breaking"),
        ("column_missing", "gone", "string", None, "breaking"),
    ]
    # a variant column a run does not write stays, and is no change
    assert all(c.column != "__dpone__nc__amount" for c in report.changes)
    assert report.level == "breaking"
    assert report.to_json()["changes"][0] == {
        "change": "column_added",
        "table": TABLE,
        "column": "note",
        "before": None,
        "after": "string",
        "compatibility": "additive",
    }


def test_additive_changes_only() -> None:
    existing = pa.schema([field("id", "integer", nullable=False)])
    written = {
        "id": field("id", "integer", nullable=False),
        "__dpone__nc__id": field("__dpone__nc__id", "string"),
    }
    report = compatibility(TABLE, existing, written, schema_changes(TABLE, existing, written))
    assert [c.change for c in report.changes] == ["variant_column_created"]
    assert report.level == "additive"
