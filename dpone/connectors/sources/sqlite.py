"""A table or query of a SQLite database file, opened read-only (``mode=ro``).

SQLite values are dynamically typed, so each chunk's columns are typed by Arrow from the
values fetched (``fetchmany``); a column mixing kinds in one chunk (integers and text, say)
arrives as text for that chunk and the contract engine decides.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from urllib.parse import quote

import pyarrow as pa

from dpone.connectors.errors import (
    SourceConfigError,
    SourceError,
    SourceUnavailable,
)
from dpone.connectors.sources._dbfile import DatabaseFileSource


class SqliteSource(DatabaseFileSource):
    """Rows of ``relation``; the cursor is bound as a ``?`` parameter (text compares as text)."""

    kind = "sqlite"
    product = "SQLite"

    def param(self, value: object) -> object:
        return _sqlite_param(value)

    def batches(self, after: object | None, chunk_size: int) -> Iterator[pa.RecordBatch]:
        # SQLite's "schema" is an attached database: main unless the table names another.
        sql, params = self.statement(after)
        uri = f"file:{quote(str(self.database.resolve()))}?mode=ro"
        try:
            con = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise _source_error(exc) from None
        try:
            cur = con.execute(sql, params)
            names = [d[0] for d in cur.description]
            while rows := cur.fetchmany(chunk_size):
                yield _to_batch(names, rows)
        except sqlite3.Error as exc:
            raise _source_error(exc) from None
        finally:
            con.close()


def _sqlite_param(value: object) -> object:
    # sqlite3's datetime adapters are deprecated; ISO text compares correctly with ISO text.
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _to_batch(names: list[str], rows: list[Sequence[object]]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = [_column(values) for values in columns]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _column(values: Sequence[object]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([_text(v) for v in values], pa.string())


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _source_error(exc: sqlite3.Error) -> SourceError | SourceConfigError | SourceUnavailable:
    kind = type(exc).__name__
    text = str(exc)
    if "locked" in text or "busy" in text or "disk I/O" in text:
        return SourceUnavailable(f"the SQLite source database is busy or unreadable ({kind})")
    if isinstance(exc, sqlite3.OperationalError) and ("no such" in text or "syntax" in text):
        return SourceConfigError(
            f"the SQLite source table or query is invalid ({kind})",
            code="DPONE_SOURCE_QUERY_INVALID",
        )
    if "readonly" in text or "read-only" in text:
        return SourceConfigError(
            "the SQLite source query writes; sources are read-only",
            code="DPONE_SOURCE_QUERY_INVALID",
        )
    return SourceError(f"the SQLite source failed ({kind})")
