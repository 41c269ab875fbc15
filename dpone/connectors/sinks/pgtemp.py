"""PostgreSQL names and temporary tables a load uses: an identifier's length limit, a
temporary table of the session's transaction, and Arrow rows sent into one by ADBC."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

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


__all__ = ["MAX_IDENTIFIER_BYTES", "ingest_temporary", "temporary", "too_long"]
