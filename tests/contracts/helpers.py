"""Shared helpers of the contract tests."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa

from dpone.contracts import ColumnSpec, ContractSpec
from dpone.contracts.spec import Enforcement, LogicalType

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def spec_of(kind: str, name: str = "c", nullable: bool = True) -> ColumnSpec:
    """``decimal(12,2)``, ``timestamp(tz)``, ``timestamp``, ``integer``... as a ColumnSpec."""
    m = _DECIMAL.fullmatch(kind)
    if m:
        return ColumnSpec(name, "decimal", nullable, precision=int(m[1]), scale=int(m[2]))
    if kind == "timestamp(tz)":
        return ColumnSpec(name, "timestamp", nullable, timezone=True)
    if kind == "timestamp":
        return ColumnSpec(name, "timestamp", nullable, timezone=False)
    logical: LogicalType = kind  # type: ignore[assignment]
    return ColumnSpec(name, logical, nullable)


def same_value(actual: Any, expected: Any) -> bool:
    """Equality that sees -0.0 vs 0.0 and a decimal's scale."""
    if isinstance(expected, float):
        return (
            isinstance(actual, float)
            and actual == expected
            and math.copysign(1, actual) == math.copysign(1, expected)
        )
    if isinstance(expected, Decimal):
        return isinstance(actual, Decimal) and str(actual) == str(expected)
    return bool(type(actual) is type(expected) and actual == expected)


def contract(
    *columns: ColumnSpec, enforcement: Enforcement = "quarantine", **kw: Any
) -> ContractSpec:
    return ContractSpec(enforcement=enforcement, columns=tuple(columns), **kw)


def batch(**columns: list[Any] | pa.Array) -> pa.RecordBatch:
    arrays = {k: v if isinstance(v, pa.Array) else pa.array(v) for k, v in columns.items()}
    return pa.RecordBatch.from_pydict(arrays)


def text_batch(**columns: list[str | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({k: pa.array(v, pa.string()) for k, v in columns.items()})
