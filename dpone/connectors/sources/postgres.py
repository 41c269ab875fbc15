"""A table or read-only query of PostgreSQL, streamed through ADBC (``COPY ... TO STDOUT``
in binary, straight into Arrow; batches of about 16 MB, re-sliced to the chunk size).

The session is ``READ ONLY``, so a query that writes fails. The connection string arrives
resolved and never appears in the identity, a log or an error (they carry SQLSTATEs only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import date, datetime, time
from decimal import Decimal

from dpone.connectors import _pg
from dpone.connectors._util import rechunk
from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import (
    SourceConfigError,
    SourceError,
    SourceUnavailable,
)
from dpone.connectors.sources._sql import Relation, select_sql
from dpone.errors import DponeError, Interrupted
from dpone.manifest.specs import PostgresSourceSpec


class PostgresSource:
    """Rows of ``relation``; the incremental cursor is pushed down as a SQL literal.

    ADBC streams a result through COPY only for statements without bound parameters, so the
    cursor value is inlined as a quoted literal that PostgreSQL coerces to the column's type.
    """

    cursor_pushdown = True

    def __init__(self, spec: PostgresSourceSpec, connection: str) -> None:
        """``connection`` is ``spec.connection`` resolved: kept private, never shown."""
        self._connection = connection
        self.relation = Relation.of(spec.table, spec.query)
        self.incremental = spec.incremental
        self.identity = f"postgres:{self.relation.label}"

    def __repr__(self) -> str:  # the connection string must not leak through a repr
        return f"PostgresSource({self.identity!r})"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Chunks in cursor order; ``WHERE cursor >= after`` runs on the server."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        sql = select_sql(self.relation, self.incremental, after, sql_literal)
        try:
            conn = _pg.connect(self._connection, autocommit=True)
        except _pg.DRIVER_ERRORS:
            raise SourceUnavailable("cannot connect to the PostgreSQL source") from None
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                cur.execute(sql)
                with cur.fetch_record_batch() as reader:
                    row = 1
                    batches = (_pg.normalize_batch(b) for b in reader)
                    for batch in rechunk(batches, chunk_size):
                        yield SourceChunk(batch, self.relation.partition, None, row, False)
                        row += batch.num_rows
        except _pg.DRIVER_ERRORS as exc:
            raise _source_error(exc) from None
        finally:
            with contextlib.suppress(*_pg.DRIVER_ERRORS, RuntimeError):  # see sinks/postgres.py
                conn.close()


def sql_literal(value: object) -> str:
    """A quoted SQL literal of unknown type (PostgreSQL coerces it to the column's type)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (datetime, date, time)):
        text = value.isoformat()
    elif isinstance(value, (int, float, Decimal, str)):
        text = str(value)
    else:
        raise SourceConfigError(
            f"an incremental cursor of type {type(value).__name__} cannot be pushed down"
        )
    if "\x00" in text:
        raise SourceConfigError("an incremental cursor value contains a NUL character")
    # standard_conforming_strings is on (the default since 9.1): only quotes need doubling.
    return "'" + text.replace("'", "''") + "'"


def _source_error(exc: BaseException) -> DponeError:
    kind, detail = _pg.classify(exc)
    if kind == "interrupted":
        return Interrupted("the PostgreSQL source query was cancelled: the run was interrupted")
    if kind in ("unavailable", "locked", "disk_full"):
        return SourceUnavailable(f"the PostgreSQL source failed ({detail})")
    if kind == "read_only":
        return SourceConfigError(
            f"the PostgreSQL source query writes; sources are read-only ({detail})",
            code="DPONE_SOURCE_QUERY_INVALID",
        )
    if kind in ("invalid", "permission", "constraint"):
        return SourceConfigError(
            f"the PostgreSQL source table or query is invalid ({detail})",
            code="DPONE_SOURCE_QUERY_INVALID",
        )
    return SourceError(f"the PostgreSQL source failed ({detail})")
