"""Arrow <-> PostgreSQL types: the column types dpone creates, the types it reads back, and
ADBC's opaque extension columns unwrapped."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.errors import SinkSchemaError


def pg_type(arrow: pa.DataType, *, staging: bool = False) -> str:  # noqa: C901 (a flat ladder, one branch per Arrow type)
    """The PostgreSQL column type for an Arrow type (``staging`` keeps JSON as text for COPY)."""
    t = pa.types
    if t.is_boolean(arrow):
        return "boolean"
    if t.is_int8(arrow) or t.is_int16(arrow) or t.is_uint8(arrow):
        return "smallint"
    if t.is_int32(arrow) or t.is_uint16(arrow):
        return "integer"
    if t.is_int64(arrow) or t.is_uint32(arrow):
        return "bigint"
    if t.is_uint64(arrow):
        return "numeric(20,0)"
    if t.is_float16(arrow) or t.is_float32(arrow):
        return "real"
    if t.is_float64(arrow):
        return "double precision"
    if t.is_decimal(arrow):
        return f"numeric({arrow.precision},{arrow.scale})"
    if t.is_string(arrow) or t.is_large_string(arrow) or t.is_string_view(arrow):
        return "text"
    if isinstance(arrow, pa.JsonType):
        return "text" if staging else "jsonb"
    if t.is_null(arrow):
        return "text"
    if (
        t.is_binary(arrow)
        or t.is_large_binary(arrow)
        or t.is_fixed_size_binary(arrow)
        or t.is_binary_view(arrow)
    ):
        return "bytea"
    if t.is_date(arrow):
        return "date"
    if t.is_time(arrow):
        return "time"
    if t.is_timestamp(arrow):
        return "timestamptz" if arrow.tz is not None else "timestamp"
    if t.is_duration(arrow):
        return "interval"
    raise SinkSchemaError(f"Arrow type {arrow} has no PostgreSQL column type in dpone")


def staging_array(array: pa.Array) -> pa.Array:
    """What COPY binary can take for a column: JSON as its text, NULL-typed as text."""
    if isinstance(array.type, pa.JsonType):
        return array.storage
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.string())
    return array


_NUMERIC = re.compile(r"^numeric\((\d+),(\d+)\)$")
_SIMPLE: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "smallint": pa.int16(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "real": pa.float32(),
    "double precision": pa.float64(),
    "text": pa.string(),
    "bytea": pa.binary(),
    "date": pa.date32(),
    "time without time zone": pa.time64("us"),
    "timestamp without time zone": pa.timestamp("us"),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    "json": pa.string(),
    "jsonb": pa.string(),
    "uuid": pa.string(),
    "interval": pa.month_day_nano_interval(),
}


def arrow_type(formatted: str) -> pa.DataType:
    """Arrow type for ``format_type()`` text; unknown types read as text."""
    if formatted in _SIMPLE:
        return _SIMPLE[formatted]
    match = _NUMERIC.match(formatted)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        return (
            pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        )
    return pa.string()


def normalize_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Unwrap ADBC's opaque extension columns: ``numeric(p,s)`` to a decimal, others to text."""
    if not any(isinstance(f.type, pa.BaseExtensionType) for f in batch.schema):
        return batch
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if isinstance(field.type, pa.BaseExtensionType):
            column = _unwrap(field, column)
            field = pa.field(field.name, column.type, field.nullable)
        arrays.append(column)
        fields.append(field)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _unwrap(field: pa.Field, column: pa.Array) -> pa.Array:
    storage = column.storage
    meta = field.metadata or {}
    typmod = int(meta.get(b"POSTGRESQL:typmod", b"-1") or -1)
    if meta.get(b"POSTGRESQL:type") == b"numeric" and typmod >= 4:
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        if 0 < precision <= 38:
            try:
                return pc.cast(storage, pa.decimal128(precision, scale))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return storage  # NaN or Infinity: text, the contract decides
    return storage
