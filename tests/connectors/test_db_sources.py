"""DuckDB, SQLite and PostgreSQL sources: table, query, cursor pushdown, read-only."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from dpone.connectors import SourceChunk
from dpone.connectors.errors import SourceConfigError, SourceUnavailable
from dpone.errors import SecretError
from tests.support.postgres import pg_query

from .specs import build_source


def ids(chunks: list[SourceChunk]) -> list[int]:
    return [int(v) for c in chunks for v in c.batch.column("id").to_pylist()]


def check_numbering(chunks: list[SourceChunk], partition: str) -> None:
    row = 1
    for c in chunks:
        assert (c.partition, c.first_row, c.rereadable, c.file_sha256) == (
            partition,
            row,
            False,
            None,
        )
        row += c.num_rows


@pytest.fixture
def duck_file(tmp_path: Path) -> Path:
    path = tmp_path / "src.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE orders AS SELECT range + 1 AS id, "
        "TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_hours(range) AS updated_at, "
        "CAST(range AS DECIMAL(18,2)) AS amount FROM range(25)"
    )
    con.close()
    return path


def test_duckdb_table_query_and_cursor_pushdown(tmp_path: Path, duck_file: Path) -> None:
    config = {
        "type": "duckdb",
        "database": "src.duckdb",
        "table": "orders",
        "incremental": {"cursor_column": "updated_at", "initial_value": "2026-01-01T02:00:00Z"},
    }
    source = build_source(config, tmp_path, read_all_as_text=True)
    assert source.cursor_pushdown is True
    assert source.identity == "duckdb:src.duckdb:table:orders"

    first = list(source.chunks(10))
    assert ids(first) == list(range(3, 26))  # at or above the initial value (dlt's >=)
    assert [c.num_rows for c in first] == [10, 10, 3]
    check_numbering(first, "orders")
    schema = first[0].batch.schema
    assert schema.field("updated_at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("amount").type == pa.decimal128(18, 2)

    after_text = list(source.chunks(10, after="2026-01-01T20:00:00+00:00"))
    assert ids(after_text) == [21, 22, 23, 24, 25]  # >= the lower bound: boundary rows too
    after_typed = list(source.chunks(10, after=datetime(2026, 1, 1, 20, tzinfo=UTC)))
    assert ids(after_typed) == [21, 22, 23, 24, 25]

    query = build_source(
        {
            "type": "duckdb",
            "database": "src.duckdb",
            "query": "SELECT id, amount FROM orders WHERE id % 2 = 0;",
            "incremental": {"cursor_column": "id"},
        },
        tmp_path,
        read_all_as_text=True,
    )
    assert query.identity.startswith("duckdb:src.duckdb:query:")
    q = list(query.chunks(100, after=10))
    assert ids(q) == [10, 12, 14, 16, 18, 20, 22, 24]
    check_numbering(q, "query")


def test_duckdb_source_is_read_only_and_errors_are_typed(tmp_path: Path, duck_file: Path) -> None:
    writes = build_source(
        {"type": "duckdb", "database": "src.duckdb", "query": "DELETE FROM orders RETURNING id"},
        tmp_path,
        read_all_as_text=True,
    )
    with pytest.raises(SourceConfigError):
        list(writes.chunks(10))
    missing = build_source(
        {"type": "duckdb", "database": "src.duckdb", "table": "nope"},
        tmp_path,
        read_all_as_text=True,
    )
    with pytest.raises(SourceConfigError) as info:
        list(missing.chunks(10))
    assert info.value.code == "DPONE_SOURCE_QUERY_INVALID"
    no_file = build_source(
        {"type": "duckdb", "database": "absent.duckdb", "table": "t"},
        tmp_path,
        read_all_as_text=True,
    )
    with pytest.raises(SourceConfigError):
        list(no_file.chunks(10))
    con = duckdb.connect(str(duck_file))
    assert con.execute("SELECT count(*) FROM orders").fetchall() == [(25,)]
    con.close()


def test_sqlite_table_query_and_cursor_pushdown(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "src.sqlite")
    con.execute("CREATE TABLE events (id INTEGER, kind TEXT, ts TEXT, payload BLOB, mixed)")
    con.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
        [
            (i, f"k{i % 3}", f"2026-01-01T00:00:{i:02d}", b"\x00\x01", i if i % 2 else f"t{i}")
            for i in range(1, 21)
        ],
    )
    con.commit()
    con.close()
    source = build_source(
        {
            "type": "sqlite",
            "database": "src.sqlite",
            "table": "events",
            "incremental": {"cursor_column": "ts"},
        },
        tmp_path,
        read_all_as_text=True,
    )
    all_rows = list(source.chunks(8))
    assert [c.num_rows for c in all_rows] == [8, 8, 4]
    check_numbering(all_rows, "events")
    batch = all_rows[0].batch
    assert batch.schema.field("id").type == pa.int64()
    assert batch.schema.field("payload").type == pa.binary()
    assert batch.schema.field("mixed").type == pa.string()  # ints and text in one chunk
    assert ids(list(source.chunks(8, after="2026-01-01T00:00:15"))) == [15, 16, 17, 18, 19, 20]

    query = build_source(
        {"type": "sqlite", "database": "src.sqlite", "query": "SELECT id FROM events WHERE id < 4"},
        tmp_path,
        read_all_as_text=True,
    )
    assert ids(list(query.chunks(8))) == [1, 2, 3]
    writes = build_source(
        {"type": "sqlite", "database": "src.sqlite", "query": "DELETE FROM events RETURNING id"},
        tmp_path,
        read_all_as_text=True,
    )
    with pytest.raises(SourceConfigError):
        list(writes.chunks(8))


@pytest.mark.postgres
def test_postgres_table_query_and_cursor_pushdown(
    pg_url: str, pg_schema: str, tmp_path: Path
) -> None:
    pg_query(
        pg_url,
        f'CREATE SCHEMA "{pg_schema}"; '
        f'CREATE TABLE "{pg_schema}".orders AS SELECT g AS id, '
        "timestamptz '2026-01-01 00:00:00+00' + make_interval(hours => g) AS updated_at, "
        "(g * 1.25)::numeric(18,2) AS amount, 'it''s' AS note "
        "FROM generate_series(1, 30) g",
    )
    source = build_source(
        {
            "type": "postgres",
            "connection": pg_url,
            "table": f"{pg_schema}.orders",
            "incremental": {"cursor_column": "updated_at", "initial_value": "2026-01-01T05:00:00Z"},
        },
        tmp_path,
        read_all_as_text=True,
    )
    assert source.identity == f"postgres:table:{pg_schema}.orders"
    assert "127.0.0.1" not in repr(source)
    chunks = list(source.chunks(10))
    assert ids(chunks) == list(range(5, 31))
    assert [c.num_rows for c in chunks] == [10, 10, 6]
    check_numbering(chunks, f"{pg_schema}.orders")
    schema = chunks[0].batch.schema
    assert schema.field("amount").type == pa.decimal128(18, 2)
    assert schema.field("updated_at").type == pa.timestamp("us", tz="UTC")
    assert chunks[0].batch.column("amount")[0].as_py() == Decimal("6.25")

    after = list(source.chunks(10, after=datetime(2026, 1, 2, 4, tzinfo=UTC)))
    assert ids(after) == [28, 29, 30]
    quoted = build_source(
        {
            "type": "postgres",
            "connection": pg_url,
            "query": f'SELECT id, note FROM "{pg_schema}".orders',
            "incremental": {"cursor_column": "note"},
        },
        tmp_path,
        read_all_as_text=True,
    )
    # A quote in the cursor is escaped: the bound matches the rows' own value (>=), no more.
    assert len(ids(list(quoted.chunks(50, after="it's")))) == 30
    assert list(quoted.chunks(10, after="it's!")) == []
    assert len(ids(list(quoted.chunks(50, after="it")))) == 30


@pytest.mark.postgres
def test_postgres_source_is_read_only_and_never_leaks_the_url(
    pg_url: str, pg_schema: str, tmp_path: Path
) -> None:
    pg_query(pg_url, f'CREATE SCHEMA "{pg_schema}"; CREATE TABLE "{pg_schema}".t (id int)')
    writes = build_source(
        {
            "type": "postgres",
            "connection": pg_url,
            "query": f'DELETE FROM "{pg_schema}".t RETURNING id',
        },
        tmp_path,
        read_all_as_text=True,
    )
    with pytest.raises(SourceConfigError):
        list(writes.chunks(10))
    secret = "postgresql://postgres:hunter2@127.0.0.1:1/test"
    down = build_source(
        {"type": "postgres", "connection": secret, "table": "t"}, tmp_path, read_all_as_text=True
    )
    with pytest.raises(SourceUnavailable) as info:
        list(down.chunks(10))
    assert "hunter2" not in str(info.value)
    assert info.value.__cause__ is None
    with pytest.raises(SecretError) as unset:  # preflight: exit 2 before anything is read
        build_source(
            {"type": "postgres", "connection": "${PG_URL_UNSET}", "table": "t"},
            tmp_path,
            read_all_as_text=True,
        )
    assert unset.value.exit_code == 2
