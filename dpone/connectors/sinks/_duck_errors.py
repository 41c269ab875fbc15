"""DuckDB exceptions as typed sink errors that say what failed and how to fix it.

The message names the operation, the quoted identifiers it touched and DuckDB's exception
class; the driver's own text never appears (it may quote a row value or a path).
"""

from __future__ import annotations

import duckdb

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
from dpone.connectors.sinks._common import os_error
from dpone.errors import DponeError

_SCHEMA_FIX = (
    "compare the target's columns (DESCRIBE the table) with the load's: restore a column or "
    "table renamed or dropped outside dpone, or load into a new table"
)
_TYPE_FIX = (
    "declare the column in sink.options.schema_contract with the target column's type "
    "(enforcement: quarantine sends rows that do not fit to the DLQ), or ALTER the target "
    "column to the load's type"
)
_CONSTRAINT_FIX = (
    "a row repeats a key or breaks NOT NULL/CHECK on the target: use strategy merge with "
    "unique_key on the constrained columns, or quarantine such rows before the load "
    "(quality.assertions.unique_columns with on_failure: quarantine; nullable: false in the "
    "contract), or drop the constraint"
)
_BUG_FIX = "dpone built a statement DuckDB rejects: report it with this message (it holds no data)"

#: (exception class, error type, what it means, the fix), most specific first.
_CLASSES: tuple[tuple[type[BaseException], type[DponeError], str, str], ...] = (
    (
        duckdb.TransactionException,
        SinkLocked,
        "a concurrent transaction on the same table conflicts with this one",
        "rerun once the other writer of this database has finished",
    ),
    (
        duckdb.OutOfMemoryException,
        SinkUnavailable,
        "DuckDB ran out of memory",
        "lower runtime.chunk_size or give DuckDB more memory (memory_limit), then rerun",
    ),
    (
        duckdb.IOException,
        SinkUnavailable,
        "reading or writing the database file failed",
        "check the disk and the file (network drive? corrupt file?) and rerun",
    ),
    (
        duckdb.BinderException,
        SinkSchemaError,
        "a table or column name does not resolve against the database",
        _SCHEMA_FIX,
    ),
    (
        duckdb.CatalogException,
        SinkSchemaError,
        "a table or schema it names is missing, or exists when it should not",
        "check that nothing outside dpone dropped, renamed or created that table or schema, "
        "then rerun (dpone recreates its own marker, key and staging tables)",
    ),
    (
        duckdb.DependencyException,
        SinkSchemaError,
        "another object (a view or an index) depends on the table and blocks the change",
        "drop the dependent view or index, rerun, then recreate it",
    ),
    (
        duckdb.ConstraintException,
        SinkConstraintViolation,
        "rows break a constraint of the table (PRIMARY KEY, UNIQUE, NOT NULL or CHECK)",
        _CONSTRAINT_FIX,
    ),
    (
        duckdb.DataError,  # ConversionException, TypeMismatchException, OutOfRangeException
        SinkSchemaError,
        "a value does not convert to the target column's type",
        _TYPE_FIX,
    ),
    (
        duckdb.PermissionException,
        SinkPermissionDenied,
        "a DuckDB setting forbids the operation (enable_external_access, lock_configuration)",
        "remove the restricting setting from the DuckDB sink's configuration",
    ),
    (
        duckdb.ProgrammingError,  # ParserException, InvalidInputException...
        SinkError,
        "DuckDB rejected the statement",
        _BUG_FIX,
    ),
)


def duck_error(exc: BaseException, doing: str) -> DponeError:
    """A typed error for a DuckDB or OS exception raised while ``doing`` (an operation and the
    quoted names it touches, e.g. ``adding column "x" to "db"."s"."t"``)."""
    if isinstance(exc, OSError):
        return os_error(exc, f"DuckDB sink: {doing}")
    text = str(exc).lower()  # read to classify only, never shown
    head = f"DuckDB sink: {doing} failed ({type(exc).__name__})"
    if "read-only" in text or "read only" in text or "permission denied" in text:
        return SinkReadOnly(
            f"{head}: the database file or the connection is read-only",
            fixes=(
                "make the database file and its folder writable for this user and do not set "
                "access_mode READ_ONLY on a sink",
            ),
        )
    if "no space left" in text:
        return SinkDiskFull(
            f"{head}: the disk is full",
            fixes=("free space on the disk of the database file, then rerun",),
        )
    if "lock" in text and isinstance(exc, duckdb.IOException):
        return SinkLocked(
            f"{head}: another process holds the database file",
            fixes=(
                "DuckDB allows one writing process per file: stop the other process that has "
                "the file open (a DuckDB shell, a notebook, another run) or wait for it, "
                "then rerun",
            ),
        )
    for cls, error, meaning, fix in _CLASSES:
        if isinstance(exc, cls):
            return error(f"{head}: {meaning}", fixes=(fix,))
    return SinkError(head, fixes=(_BUG_FIX,))
