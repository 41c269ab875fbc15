"""Logical types <-> Arrow types (SPEC §3).

One table decides how every logical type is stored in Arrow, and so in the sink:

=========== ======================================= ============================================
logical     Arrow type                              notes
=========== ======================================= ============================================
string      ``string`` (utf8)                       any valid UTF-8, whitespace is data
integer     ``int64``                               ``bigint`` is an alias
float       ``float64``                             finite values only (NaN/±inf are rejected)
decimal     ``decimal128(precision, scale)``        precision 1..38, scale 0..precision
boolean     ``bool``
date        ``date32``                              0001-01-01 .. 9999-12-31, proleptic Gregorian
time        ``time64[us]``                          00:00:00 .. 23:59:59.999999
timestamp   ``timestamp[us, tz=UTC]``               ``timezone: true`` (the default): instants
timestamp   ``timestamp[us]``                       ``timezone: false``: wall-clock, no zone
json        ``string`` (utf8) holding JSON text     the field carries ``dpone.type = json``
binary      ``binary``
=========== ======================================= ============================================

Every field of a sink schema carries ``dpone.type`` metadata (``decimal(12,2)``,
``timestamp(tz)``, ``json``...) so the sink layer can map it without guessing.
"""

from __future__ import annotations

import pyarrow as pa

from dpone.contracts.errors import ContractDefinitionError
from dpone.contracts.spec import LOGICAL_TYPES, ColumnSpec, ContractSpec

#: Timestamps and times are stored with microsecond precision (DuckDB and PostgreSQL's unit).
TIME_UNIT = "us"
UTC = "UTC"
TYPE_METADATA_KEY = b"dpone.type"
DEFAULT_DECIMAL = (38, 9)

_SIMPLE: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "bigint": pa.int64(),
    "float": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "time": pa.time64(TIME_UNIT),
    "json": pa.string(),
    "binary": pa.binary(),
}


def canonical(col: ColumnSpec) -> ColumnSpec:
    """``col`` with its defaults made explicit (``bigint`` -> ``integer``, decimal and tz defaults).

    Raises :class:`ContractDefinitionError` for a type the engine cannot represent.
    """
    if col.type not in LOGICAL_TYPES:
        raise ContractDefinitionError(
            f"column {col.name!r} has unknown type {col.type!r}",
            fixes=(f"use one of: {', '.join(LOGICAL_TYPES)}",),
        )
    if col.type == "bigint":
        return ColumnSpec(col.name, "integer", col.nullable)
    if col.type == "decimal":
        precision = DEFAULT_DECIMAL[0] if col.precision is None else col.precision
        scale = DEFAULT_DECIMAL[1] if col.scale is None else col.scale
        if col.precision is None and col.scale is not None:
            precision = max(precision, scale)
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise ContractDefinitionError(
                f"column {col.name!r}: decimal precision must be 1..38 and scale 0..precision",
                code="DPONE_MANIFEST_DECIMAL_SCALE",
            )
        return ColumnSpec(col.name, "decimal", col.nullable, precision=precision, scale=scale)
    if col.type == "timestamp":
        tz = True if col.timezone is None else col.timezone
        return ColumnSpec(col.name, "timestamp", col.nullable, timezone=tz)
    return ColumnSpec(col.name, col.type, col.nullable)


def decimal_params(col: ColumnSpec) -> tuple[int, int]:
    """(precision, scale) of a canonical decimal column."""
    if col.precision is None or col.scale is None:
        return decimal_params(canonical(col))
    return col.precision, col.scale


def arrow_type(col: ColumnSpec) -> pa.DataType:
    """The Arrow type that stores ``col`` (see the module table)."""
    col = canonical(col)
    if col.type == "decimal":
        return pa.decimal128(*decimal_params(col))
    if col.type == "timestamp":
        return pa.timestamp(TIME_UNIT, tz=UTC if col.timezone else None)
    return _SIMPLE[col.type]


def type_label(col: ColumnSpec) -> str:
    """A short, value-free name of the logical type: ``decimal(12,2)``, ``timestamp(tz)``..."""
    col = canonical(col)
    if col.type == "decimal":
        return f"decimal({col.precision},{col.scale})"
    if col.type == "timestamp":
        return "timestamp(tz)" if col.timezone else "timestamp"
    return col.type


def sink_field(col: ColumnSpec, *, nullable: bool | None = None) -> pa.Field:
    """The sink field of ``col``; ``nullable`` overrides the declared nullability."""
    return pa.field(
        col.name,
        arrow_type(col),
        nullable=col.nullable if nullable is None else nullable,
        metadata={TYPE_METADATA_KEY: type_label(col).encode()},
    )


def sink_schema(contract: ContractSpec) -> pa.Schema:
    """The Arrow schema of the declared columns as the sink stores them.

    Every mode keeps the declared nullability: under ``warn`` a value that does not fit loads
    as NULL only where the column allows it; elsewhere its row is rejected.
    """
    return pa.schema([sink_field(c) for c in contract.columns])


def spec_from_arrow(
    name: str, dtype: pa.DataType, metadata: dict[bytes, bytes] | None = None
) -> ColumnSpec:
    """The logical type that holds values of an Arrow type without loss (typed sources, sinks).

    Types without a lossless logical home (nested, intervals...) map to ``json`` when they can
    be serialized, else to ``string``.
    """
    label = (metadata or {}).get(TYPE_METADATA_KEY)
    if label == b"json":
        return ColumnSpec(name, "json")
    t = dtype
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return ColumnSpec(name, "boolean")
    if pa.types.is_integer(t):
        return ColumnSpec(name, "integer")
    if pa.types.is_floating(t):
        return ColumnSpec(name, "float")
    if pa.types.is_decimal(t) and t.precision <= 38:
        return ColumnSpec(name, "decimal", precision=t.precision, scale=t.scale)
    if pa.types.is_date(t):
        return ColumnSpec(name, "date")
    if pa.types.is_time(t):
        return ColumnSpec(name, "time")
    if pa.types.is_timestamp(t):
        return ColumnSpec(name, "timestamp", timezone=t.tz is not None)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return ColumnSpec(name, "binary")
    if is_nested(t):
        return ColumnSpec(name, "json")
    return ColumnSpec(name, "string")


def is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def is_nested(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_struct(t)
        or pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_map(t)
    )
