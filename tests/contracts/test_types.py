"""Logical types <-> Arrow types, reason codes against the published schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dpone.contracts import (
    ColumnSpec,
    ContractDefinitionError,
    ReasonCode,
    arrow_type,
    sink_field,
    spec_from_arrow,
    type_label,
)
from dpone.contracts.spec import LOGICAL_TYPES
from tests.contracts.helpers import spec_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("kind", "arrow", "label"),
    [
        ("string", pa.string(), "string"),
        ("integer", pa.int64(), "integer"),
        ("bigint", pa.int64(), "integer"),
        ("float", pa.float64(), "float"),
        ("decimal(12,2)", pa.decimal128(12, 2), "decimal(12,2)"),
        ("decimal(38,0)", pa.decimal128(38, 0), "decimal(38,0)"),
        ("decimal(1,1)", pa.decimal128(1, 1), "decimal(1,1)"),
        ("boolean", pa.bool_(), "boolean"),
        ("date", pa.date32(), "date"),
        ("time", pa.time64("us"), "time"),
        ("timestamp(tz)", pa.timestamp("us", "UTC"), "timestamp(tz)"),
        ("timestamp", pa.timestamp("us"), "timestamp"),
        ("json", pa.string(), "json"),
        ("binary", pa.binary(), "binary"),
    ],
)
def test_arrow_type_of_every_logical_type(kind: str, arrow: pa.DataType, label: str) -> None:
    col = spec_of(kind)
    assert arrow_type(col) == arrow
    assert type_label(col) == label
    field = sink_field(col)
    assert field.metadata == {b"dpone.type": label.encode()}
    assert spec_from_arrow("c", arrow, field.metadata).type == (
        "integer" if kind == "bigint" else col.type
    )


def test_every_logical_type_has_an_arrow_type() -> None:
    for kind in LOGICAL_TYPES:
        arrow_type(
            ColumnSpec(
                "c",
                kind,  # type: ignore[arg-type]
                precision=10 if kind == "decimal" else None,
                scale=2 if kind == "decimal" else None,
            )
        )


def test_defaults_timestamp_is_aware_and_decimal_is_38_9() -> None:
    assert arrow_type(ColumnSpec("t", "timestamp")) == pa.timestamp("us", "UTC")
    assert arrow_type(ColumnSpec("d", "decimal")) == pa.decimal128(38, 9)


@pytest.mark.parametrize(("precision", "scale"), [(0, 0), (39, 0), (10, 11), (10, -1)])
def test_decimal_bounds(precision: int, scale: int) -> None:
    with pytest.raises(ContractDefinitionError):
        arrow_type(ColumnSpec("d", "decimal", precision=precision, scale=scale))


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ContractDefinitionError):
        arrow_type(ColumnSpec("x", "money"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arrow", "kind"),
    [
        (pa.int8(), "integer"),
        (pa.uint64(), "integer"),
        (pa.float16(), "float"),
        (pa.bool_(), "boolean"),
        (pa.date64(), "date"),
        (pa.time32("ms"), "time"),
        (pa.large_string(), "string"),
        (pa.large_binary(), "binary"),
        (pa.struct([("a", pa.int64())]), "json"),
        (pa.list_(pa.int64()), "json"),
        (pa.dictionary(pa.int32(), pa.string()), "string"),
        (pa.decimal256(60, 2), "string"),
        (pa.month_day_nano_interval(), "string"),
    ],
)
def test_spec_from_arrow(arrow: pa.DataType, kind: str) -> None:
    assert spec_from_arrow("c", arrow).type == kind


def _enums_with(doc: Any, member: str) -> list[list[str]]:
    found: list[list[str]] = []
    if isinstance(doc, dict):
        enum = doc.get("enum")
        if isinstance(enum, list) and member in enum:
            found.append(enum)
        for value in doc.values():
            found += _enums_with(value, member)
    elif isinstance(doc, list):
        for value in doc:
            found += _enums_with(value, member)
    return found


def test_reason_codes_match_every_published_schema_enum() -> None:
    enums: list[list[str]] = []
    for path in sorted((ROOT / "schemas").glob("*.schema.json")):
        enums += _enums_with(json.loads(path.read_text()), ReasonCode.TYPE_MISMATCH.value)
    assert enums, "no published schema lists the reason codes"
    for enum in enums:
        assert sorted(enum) == sorted(code.value for code in ReasonCode)


def test_reason_codes_have_category_stage_and_value_free_message() -> None:
    for code in ReasonCode:
        assert code.category in {
            "schema",
            "source",
            "transform",
            "quality",
            "sink",
            "cdc",
            "unknown",
        }
        assert code.info.message
        assert code.info.stage
