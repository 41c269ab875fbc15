"""PostgreSQL through ADBC (Arrow-native, COPY binary both ways): connect and classify errors
(the types live in ``pgtypes.py``). The connection string never reaches a message: errors carry
SQLSTATE only."""

from __future__ import annotations

from typing import Any

import adbc_driver_manager
import adbc_driver_postgresql.dbapi as adbc_pg
import pyarrow as pa

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
