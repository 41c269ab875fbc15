"""A ``python`` or ``dlt`` source's dicts with child tables asked for: every field holding a list
or a mapping in some record of the chunk becomes each record's JSON text, numbers as written
(an integer next to a fraction stays an integer), before Arrow types the chunk."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa

from dpone.connectors.presence import rows_batch
from dpone.connectors.sources._nested import nested_as_text


def typed(rows: list[Mapping[str, Any]], label: str) -> pa.RecordBatch:
    del label
    return rows_batch(rows)


def test_nested_fields_become_json_text_with_numbers_as_written() -> None:
    rows: list[Mapping[str, Any]] = [
        {"id": 1, "orders": [{"qty": 2, "price": 1.5}], "meta": None},
        {"id": 2, "orders": ({"qty": 3, "ok": True, "at": dt.date(2026, 1, 2)},), "meta": "x"},
        {"id": 3, "orders": None, "meta": {"d": Decimal("1.10"), "n": float("nan")}},
    ]
    batch = nested_as_text(typed)(rows, "t")
    assert batch.schema.field("id").type == pa.int64()
    assert batch.schema.field("orders").type == pa.string()
    assert batch.column("orders").to_pylist() == [
        '[{"qty":2,"price":1.5}]',
        '[{"qty":3,"ok":true,"at":"2026-01-02"}]',
        None,
    ]
    # text stays text (the contract judges it), a mapping is its JSON text
    assert batch.column("meta").to_pylist() == [None, "x", '{"d":1.10,"n":NaN}']
    parsed = json.loads(batch.column("orders")[0].as_py())
    assert parsed == [{"qty": 2, "price": 1.5}]


def test_a_chunk_without_nested_values_is_typed_as_it_is() -> None:
    rows: list[Mapping[str, Any]] = [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    assert nested_as_text(typed)(rows, "t").equals(rows_batch(rows))
