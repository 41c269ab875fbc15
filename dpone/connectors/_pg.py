"""PostgreSQL through ADBC (Arrow-native, COPY binary both ways): connect, classify errors,
map types. The connection string never reaches a message: errors carry SQLSTATE only."""

from __future__ import annotations

import re
from typing import Any

import adbc_driver_manager
import adbc_driver_postgresql.dbapi as adbc_pg
import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.errors import (
    SinkConstraintViolation,
    SinkDiskFull,
    SinkError,
    SinkLocked,
    SinkPermissionDenied,
    SinkReadOnly,
    SinkSchemaError,
    SinkUnavailable,
)
from dpone.errors import DponeError, Interrupted

Connection = adbc_pg.Connection
Error = adbc_driver_manager.Error


def connect(uri: str, *, autocommit: bool = False) -> Any:
    """An ADBC connection. Callers catch :data:`DRIVER_ERRORS` and say nothing about the URI."""
    return adbc_pg.connect(uri, autocommit=autocommit)


#: What a connect, a statement or a result stream may raise.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (Error, OSError, ValueError, pa.ArrowException)


def sqlstate(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None)
    return str(state) if state else None


_SCHEMA_FIX = (
    "compare the target's columns (\\d in psql) with the load's: restore a column or table "
    "renamed or dropped outside dpone, or load into a new table"
)
_TYPE_FIX = (
    "declare the column in sink.options.schema_contract with the target column's type, length "
    "or precision (enforcement: quarantine sends rows that do not fit to the DLQ), or ALTER "
    "the target column to take the load's values"
)
_UNIQUE_FIX = (
    "rows repeat a key the table's unique index or primary key holds: use strategy merge with "
    "unique_key on those columns, quarantine repeats with quality.assertions.unique_columns, "
    "or drop the unique index"
)
_RETRY = "check that the server is up and reachable, then rerun (the load rolled back)"
_BUG_FIX = "dpone built a statement PostgreSQL rejects: report it with this message (no data in it)"

#: SQLSTATE (exact, then its two-character class) -> (kind, what it means, the fix).
#: The kind picks the error type; the driver's own message is never shown (it may quote a row).
_SQLSTATES: dict[str, tuple[str, str, str]] = {
    "42P01": ("invalid", "undefined table", _SCHEMA_FIX),
    "42703": ("invalid", "undefined column", _SCHEMA_FIX),
    "3F000": ("invalid", "undefined schema", _SCHEMA_FIX),
    "42P07": (
        "invalid",
        "the table already exists",
        "another session created the table at the same time: rerun",
    ),
    "42804": ("invalid", "datatype mismatch", _TYPE_FIX),
    "42846": ("invalid", "cannot coerce", _TYPE_FIX),
    "42501": (
        "permission",
        "insufficient privilege",
        "GRANT the sink's user USAGE and CREATE on the schema (CREATE on the database when the "
        "schema is new) and SELECT, INSERT, DELETE, TRUNCATE on the table, or make it the "
        "table's owner (adding columns needs ownership)",
    ),
    "42601": ("invalid", "syntax error", _BUG_FIX),
    "42": ("invalid", "the statement does not fit the table", _SCHEMA_FIX),
    "23505": ("constraint", "unique violation", _UNIQUE_FIX),
    "23502": (
        "constraint",
        "not-null violation",
        "declare the column nullable: false in the contract with enforcement: quarantine so "
        "NULLs go to the DLQ, or drop NOT NULL on the target column",
    ),
    "23503": (
        "constraint",
        "foreign key violation",
        "load the referenced rows first, or drop the foreign key on the target",
    ),
    "23514": (
        "constraint",
        "check violation",
        "quarantine such rows with a custom assertion that mirrors the CHECK, or relax it",
    ),
    "23": ("constraint", "integrity constraint violation", _UNIQUE_FIX),
    "22": ("invalid", "data exception: a value does not fit the target column", _TYPE_FIX),
    "25006": (
        "read_only",
        "read-only transaction",
        "connect to the primary, not a read-only standby, and do not set "
        "default_transaction_read_only for the sink's user",
    ),
    "40001": ("locked", "serialization failure", "rerun: a concurrent transaction conflicted"),
    "40P01": ("locked", "deadlock detected", "rerun: a concurrent transaction deadlocked with it"),
    "55P03": (
        "locked",
        "lock not available",
        "another session holds a lock on the table (lock_timeout ran out): find it in "
        "pg_stat_activity, wait for it, then rerun",
    ),
    "53100": ("disk_full", "disk full", "free space on the server's data disk, then rerun"),
    "53200": (
        "unavailable",
        "out of memory",
        "lower runtime.chunk_size or give the server more memory, then rerun",
    ),
    "53300": (
        "unavailable",
        "too many connections",
        "raise max_connections or put a connection pooler in front, then rerun",
    ),
    "53": ("unavailable", "insufficient resources", "free server resources, then rerun"),
    "57014": (
        "unavailable",
        "query canceled (statement_timeout or an operator's cancel)",
        "raise statement_timeout for the sink's user or lower runtime.chunk_size, then rerun",
    ),
    "57P": ("unavailable", "the server is shutting down or starting", _RETRY),
    "08": ("unavailable", "connection exception", _RETRY),
    "58": (
        "unavailable",
        "system error on the server",
        "check the server's log for an I/O error, then rerun",
    ),
}


def describe(state: str) -> tuple[str, str, str]:
    """(kind, what it means, the fix) for a SQLSTATE: exact, then by class."""
    for key in (state, state[:3], state[:2]):
        if key in _SQLSTATES:
            return _SQLSTATES[key]
    return "failed", "unexpected error", _BUG_FIX


def classify(exc: BaseException) -> tuple[str, str]:
    """(kind, detail) of a driver exception; kind is one of interrupted, unavailable,
    read_only, disk_full, locked, invalid, constraint, permission, failed. The detail is the
    SQLSTATE or the exception's class name."""
    state = sqlstate(exc)
    if state == "57014" and "user request" in str(exc):
        # The ADBC driver answers Ctrl-C during a blocking call with a cancel request and
        # raises this instead of KeyboardInterrupt (so does an operator's pg_cancel_backend);
        # a statement timeout, the same SQLSTATE, says so and stays a failure.
        return "interrupted", f"SQLSTATE {state}"
    if state is None:
        status = getattr(exc, "status_code", None)
        kind = (
            "unavailable" if isinstance(exc, OSError) or status in _TRANSIENT_STATUS else "failed"
        )
        return kind, type(exc).__name__
    return describe(state)[0], f"SQLSTATE {state}"


_SINK_ERRORS: dict[str, type[DponeError]] = {
    "read_only": SinkReadOnly,
    "disk_full": SinkDiskFull,
    "unavailable": SinkUnavailable,
    "locked": SinkLocked,
    "invalid": SinkSchemaError,
    "constraint": SinkConstraintViolation,
    "permission": SinkPermissionDenied,
}


def sink_error(exc: BaseException, doing: str) -> DponeError:
    """A typed sink error for a driver exception raised while ``doing`` (an operation and the
    quoted names it touches): transient or terminal by SQLSTATE, with what the SQLSTATE
    means and a fix, never the server's message."""
    kind, detail = classify(exc)
    if kind == "interrupted":
        return Interrupted(f"PostgreSQL sink: {doing} was cancelled: the run was interrupted")
    state = sqlstate(exc)
    if state is None:
        fix = (
            _RETRY
            if kind == "unavailable"
            else "check the connection string (user, database, host) and the server"
        )
        return _SINK_ERRORS.get(kind, SinkError)(
            f"PostgreSQL sink: {doing} failed ({detail})", fixes=(fix,)
        )
    _, meaning, fix = describe(state)
    message = f"PostgreSQL sink: {doing} failed ({detail} {meaning})"
    return _SINK_ERRORS.get(kind, SinkError)(message, fixes=(fix,))


_TRANSIENT_STATUS = {
    adbc_driver_manager.AdbcStatusCode.IO,
    adbc_driver_manager.AdbcStatusCode.CANCELLED,
    adbc_driver_manager.AdbcStatusCode.TIMEOUT,
    adbc_driver_manager.AdbcStatusCode.UNAUTHENTICATED,
}


# --- types ----------------------------------------------------------------------------------------


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
