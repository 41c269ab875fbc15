"""The records of a ``python`` or ``dlt`` source whose nested values load into child tables
(``source.normalize: {nested: child_tables}``, SPEC §13): before Arrow types a chunk's dicts,
every field holding a list or a mapping in some record becomes the JSON text of its values, as
a JSONL line's nested field is, so a child value keeps its written form (Arrow would unify a
list's numbers: ``2`` next to ``1.5`` would become ``2.0``) and the child table's contract
parses it as it parses a JSONL line's. The other fields stay as the source typed them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

RowsBatch = Callable[[list[Mapping[str, Any]], str], pa.RecordBatch]


def nested_as_text(to_batch: RowsBatch) -> RowsBatch:
    """``to_batch`` applied to the rows with their nested fields as JSON text."""

    def build(rows: list[Mapping[str, Any]], label: str) -> pa.RecordBatch:
        return to_batch(_texted(rows), label)

    return build


def _texted(rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    nested = {k for row in rows for k, v in row.items() if isinstance(v, _NESTED)}
    if not nested:
        return rows
    return [
        {k: (_text(v) if k in nested else v) for k, v in row.items()}
        if nested.intersection(row)
        else row
        for row in rows
    ]


_NESTED = (list, tuple, Mapping)


def _text(value: Any) -> str | None:
    """A value of a nested field as a JSONL text column holds it: text as it is, None as
    null, anything else as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return _json(value)


def _json(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        # The shortest text that reads back as the same number (JSON's own NaN spelling).
        return repr(value) if math.isfinite(value) else json.dumps(value)
    if isinstance(value, Decimal):
        return str(value) if value.is_finite() else json.dumps(float(value))
    if isinstance(value, Mapping):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}:{_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return json.dumps(value.isoformat())
    return json.dumps(str(value), ensure_ascii=False)


__all__ = ["nested_as_text"]
