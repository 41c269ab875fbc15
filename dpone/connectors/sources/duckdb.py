"""A table or query of a DuckDB database file, opened read-only, streamed as Arrow."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import duckdb
import pyarrow as pa

from dpone.connectors.batches import rechunk
from dpone.connectors.errors import (
    SourceConfigError,
    SourceError,
    SourceUnavailable,
)
from dpone.connectors.sources._dbfile import DatabaseFileSource
from dpone.errors import Interrupted


class DuckDbSource(DatabaseFileSource):
    """Rows of ``relation`` in ``database``, streamed as Arrow straight from DuckDB.

    The file is opened ``read_only``, so a query that writes fails. In one process DuckDB
    refuses a read-only and a read-write connection to the same file at once: do not read
    from the file a DuckDB sink of the same run writes to.
    """

    kind = "duckdb"
    product = "DuckDB"

    def batches(self, after: object | None, chunk_size: int) -> Iterator[pa.RecordBatch]:
        try:
            con = duckdb.connect(str(self.database), read_only=True)
        except duckdb.Error as exc:
            raise _source_error(exc) from None
        try:
            with interruptible("reading the DuckDB source"):
                catalog = str(con.execute("SELECT current_database()").fetchall()[0][0])
                sql, params = self.statement(after, catalog)
                reader = con.sql(sql, params=params or None).to_arrow_reader(chunk_size)
                yield from rechunk(_batches(reader), chunk_size)
        except duckdb.Error as exc:
            raise _source_error(exc) from None
        finally:
            con.close()


@contextlib.contextmanager
def interruptible(doing: str) -> Iterator[None]:
    """A signal during a DuckDB call (Ctrl-C, or SIGTERM through the CLI's handler) does not
    surface as ``KeyboardInterrupt``: DuckDB cancels the query and raises
    ``RuntimeError('Query interrupted')`` (or ``InterruptException``), or wraps the interrupt
    raised in Python code it called back (reading a registered Arrow object) in another error.
    Give it back as ``DPONE_INTERRUPTED``, so the run rolls back and exits 130 instead of
    failing as a sink error or an internal one. Use it inside the ``try`` that turns
    ``duckdb.Error`` into a typed error."""
    try:
        yield
    except (duckdb.Error, RuntimeError) as exc:
        if not _is_interrupt(exc):
            raise
        raise Interrupted(f"{doing} was cancelled: the run was interrupted") from None


def _is_interrupt(exc: BaseException) -> bool:
    if isinstance(exc, duckdb.InterruptException):
        return True
    if isinstance(exc, duckdb.Error):
        return "KeyboardInterrupt" in str(exc)
    return "interrupted" in str(exc).lower()


def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    # DuckDB labels TIMESTAMPTZ with its TimeZone setting; the instants are UTC either way.
    schema = utc_labels(reader.schema)
    for batch in reader:
        yield batch if schema is reader.schema else batch.cast(schema)


def utc_labels(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every zoned timestamp labelled UTC (the same schema if none is)."""
    if not any(pa.types.is_timestamp(f.type) and f.type.tz not in (None, "UTC") for f in schema):
        return schema
    return pa.schema(
        [
            f.with_type(pa.timestamp(f.type.unit, tz="UTC"))
            if pa.types.is_timestamp(f.type) and f.type.tz is not None
            else f
            for f in schema
        ]
    )


def _source_error(exc: duckdb.Error) -> SourceError | SourceConfigError | SourceUnavailable:
    kind = type(exc).__name__
    if isinstance(exc, (duckdb.CatalogException, duckdb.BinderException, duckdb.ParserException)):
        return SourceConfigError(
            f"the DuckDB source table or query is invalid ({kind})",
            code="DPONE_SOURCE_QUERY_INVALID",
        )
    if isinstance(exc, (duckdb.IOException, duckdb.OutOfMemoryException)):
        return SourceUnavailable(f"the DuckDB source database cannot be read ({kind})")
    if isinstance(exc, duckdb.InvalidInputException) and "read-only" in str(exc):
        return SourceConfigError(
            "the DuckDB source query writes; sources are read-only",
            code="DPONE_SOURCE_QUERY_INVALID",
        )
    return SourceError(f"the DuckDB source failed ({kind})")
