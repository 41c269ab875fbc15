"""PostgreSQL names, temporary tables and connection cleanup a load uses: an identifier's
length limit, a temporary table of the session's transaction, Arrow rows sent into one by
ADBC, and ending a load's transaction or connection without hiding the run's own error."""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa

from dpone.connectors.sql import postgres as pg
from dpone.connectors.sql.identifiers import qualify, quote_ident
from dpone.connectors.sql.pgtypes import pg_type, staging_array

#: PostgreSQL truncates a longer identifier (NAMEDATALEN - 1)
MAX_IDENTIFIER_BYTES = 63


def too_long(name: str) -> bool:
    return len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES


def temporary(name: str) -> str:
    """A temporary table of this session, qualified: ``"pg_temp"."name"``."""
    return qualify("pg_temp", name)


def ingest_temporary(cur: Any, name: str, table: pa.Table) -> None:
    """``table`` into a temporary table dropped at the end of the current transaction."""
    columns = [f"{quote_ident(f.name)} {pg_type(f.type, staging=True)}" for f in table.schema]
    cur.execute(f"CREATE TEMPORARY TABLE {quote_ident(name)} ({', '.join(columns)}) ON COMMIT DROP")
    arrays = [staging_array(column.combine_chunks()) for column in table.columns]
    staged = pa.RecordBatch.from_arrays(arrays, names=table.schema.names)
    cur.adbc_ingest(name, staged, mode="append", temporary=True)


# Cleanup is best effort and must not hide the run's own error: after an interrupt inside the
# driver, ADBC also raises RuntimeError ("Cannot close AdbcConnection with open AdbcStatement").
_CLEANUP_ERRORS = (*pg.DRIVER_ERRORS, RuntimeError)


def rollback(conn: Any) -> None:
    with contextlib.suppress(*_CLEANUP_ERRORS):
        conn.rollback()


def close(conn: Any) -> None:
    with contextlib.suppress(*_CLEANUP_ERRORS):
        conn.close()


def release(conn: Any, owned: bool) -> None:
    """Close a connection of its own; a session's pinned one only ends its transaction."""
    if owned:
        close(conn)
    else:
        rollback(conn)


__all__ = [
    "MAX_IDENTIFIER_BYTES",
    "close",
    "ingest_temporary",
    "release",
    "rollback",
    "temporary",
    "too_long",
]
