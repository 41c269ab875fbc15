"""A table or read-only query of PostgreSQL, streamed through ADBC (``COPY ... TO STDOUT``
in binary, straight into Arrow; batches of about 16 MB, re-sliced to the chunk size).

The session is ``READ ONLY``, so a query that writes fails. The connection string arrives
resolved and never appears in the identity, a log or an error (they carry SQLSTATEs only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dpone.connectors.base import Partitioning, SourceChunk
from dpone.connectors.batches import rechunk
from dpone.connectors.errors import (
    SourceConfigError,
    SourceError,
    SourceUnavailable,
)
from dpone.connectors.sources.pgkeyranges import key_ranges
from dpone.connectors.sql import postgres as pg
from dpone.connectors.sql.pgtypes import normalize_batch
from dpone.connectors.sql.select import Relation, select_sql, sql_literal
from dpone.errors import DponeError, Interrupted
from dpone.manifest.specs import PostgresSourceSpec


class PostgresSource:
    """Rows of ``relation``; the incremental cursor is pushed down as a SQL literal.

    ADBC streams a result through COPY only for statements without bound parameters, so the
    cursor value is inlined as a quoted literal that PostgreSQL coerces to the column's type.
    A table with ``partition_column`` splits into key ranges for a scale-out run
    (:class:`~dpone.connectors.base.Partitionable`).
    """

    cursor_pushdown = True

    def __init__(self, spec: PostgresSourceSpec, connection: str) -> None:
        """``connection`` is ``spec.connection`` resolved: kept private, never shown."""
        self._connection = connection
        self.relation = Relation.of(spec.table, spec.query)
        self.incremental = spec.incremental
        self.identity = f"postgres:{self.relation.label}"
        self.partition_column = spec.partition_column
        self.partition_count = spec.partitions

    def __repr__(self) -> str:  # the connection string must not leak through a repr
        return f"PostgresSource({self.identity!r})"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Chunks in cursor order; ``WHERE cursor >= after`` runs on the server."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        sql = select_sql(self.relation, self.incremental, after, sql_literal)
        try:
            conn = pg.connect(self._connection, autocommit=True)
        except pg.DRIVER_ERRORS:
            raise SourceUnavailable("cannot connect to the PostgreSQL source") from None
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                cur.execute(sql)
                with cur.fetch_record_batch() as reader:
                    row = 1
                    batches = (normalize_batch(b) for b in reader)
                    for batch in rechunk(batches, chunk_size):
                        yield SourceChunk(batch, self.relation.partition, None, row, False)
                        row += batch.num_rows
        except pg.DRIVER_ERRORS as exc:
            raise _source_error(exc) from None
        finally:
            with contextlib.suppress(*pg.DRIVER_ERRORS, RuntimeError):  # see sinks/postgres.py
                conn.close()

    def partitions(self, chunk_size: int, after: object | None) -> Partitioning:
        """Key ranges of the table on ``partition_column``; otherwise one partition, and why."""
        label = self.relation.partition
        if self.partition_column is None or self.partition_count is None:
            return Partitioning.whole(label, "the postgres source has no partition_column")
        if self.relation.table is None:
            return Partitioning.whole(label, "a query source cannot be split by key (use table:)")
        return key_ranges(
            self._connection,
            self.relation,
            self.incremental,
            self.partition_column,
            self.partition_count,
            after,
        )


def _source_error(exc: BaseException) -> DponeError:
    kind, detail = pg.classify(exc)
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
