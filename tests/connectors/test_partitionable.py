"""Optional source capabilities: which sources split themselves for a scale-out run
(``Partitionable``) and which may be read ahead on another thread (``ReadsAhead``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpone.connectors.base import Partitionable, reads_ahead
from dpone.connectors.sources.postgres import PostgresSource
from dpone.testing import MemorySource
from tests.support.postgres import pg_query

from .specs import build_source


def _orders(pg_url: str, pg_schema: str) -> None:
    pg_query(
        pg_url,
        f'CREATE SCHEMA "{pg_schema}"; '
        f'CREATE TABLE "{pg_schema}".orders AS SELECT g AS id, g % 3 AS bucket '
        "FROM generate_series(1, 20) g; "
        f'INSERT INTO "{pg_schema}".orders VALUES (NULL, NULL), (NULL, 1)',
    )


def test_only_sources_that_split_themselves_are_partitionable(tmp_path: Path) -> None:
    pg = build_source(
        {"type": "postgres", "connection": "postgresql://u@127.0.0.1:1/db", "table": "t"},
        tmp_path,
        read_all_as_text=False,
    )
    duck = build_source(
        {"type": "duckdb", "database": "x.duckdb", "table": "t"}, tmp_path, read_all_as_text=False
    )
    (tmp_path / "a.csv").write_text("id\n1\n")
    files = build_source(
        {"type": "file", "path": "*.csv", "format": "csv"}, tmp_path, read_all_as_text=False
    )
    assert isinstance(pg, PostgresSource)
    assert isinstance(pg, Partitionable)
    assert not isinstance(duck, Partitionable)
    assert not isinstance(MemorySource([]), Partitionable)
    # Only the file source declares that its chunks may be read on another thread.
    assert reads_ahead(files)
    assert not reads_ahead(pg)
    assert not reads_ahead(duck)
    assert not reads_ahead(MemorySource([]))


def test_a_postgres_source_without_a_key_or_with_a_query_is_one_partition(tmp_path: Path) -> None:
    url = "postgresql://u@127.0.0.1:1/db"  # never connected: nothing to split
    table = build_source(
        {"type": "postgres", "connection": url, "table": "s.t"}, tmp_path, read_all_as_text=False
    )
    query = build_source(
        {
            "type": "postgres",
            "connection": url,
            "query": "SELECT 1 AS id",
            "partition_column": "id",
            "partitions": 4,
        },
        tmp_path,
        read_all_as_text=False,
    )
    assert isinstance(table, PostgresSource)
    assert isinstance(query, PostgresSource)
    whole = table.partitions(100, None)
    assert [(p.index, p.kind, p.label) for p in whole.partitions] == [(0, "whole", "s.t")]
    assert whole.single_reason == "the postgres source has no partition_column"
    split = query.partitions(100, None)
    assert [(p.kind, p.label) for p in split.partitions] == [("whole", "query")]
    assert split.single_reason == "a query source cannot be split by key (use table:)"


@pytest.mark.postgres
def test_postgres_key_ranges_cover_every_row_once_in_key_order(
    pg_url: str, pg_schema: str, tmp_path: Path
) -> None:
    _orders(pg_url, pg_schema)
    source = build_source(
        {
            "type": "postgres",
            "connection": pg_url,
            "table": f"{pg_schema}.orders",
            "partition_column": "id",
            "partitions": 3,
        },
        tmp_path,
        read_all_as_text=False,
    )
    assert isinstance(source, PostgresSource)
    split = source.partitions(100, None)
    assert split.single_reason is None
    parts = split.partitions
    assert [p.index for p in parts] == [0, 1, 2, 3]
    assert {p.kind for p in parts} == {"key_range"}
    assert parts[-1].where == '"id" IS NULL'  # rows without a key: a partition of their own
    # Each partition's offset is the count of rows before it: row numbers run on, never repeat.
    seen: list[int | None] = []
    for part in parts:
        assert part.row_offset == len(seen)
        rows = pg_query(
            pg_url,
            f'SELECT id FROM "{pg_schema}".orders WHERE {part.where} ORDER BY {part.order_by}',
        )
        assert rows
        seen.extend(r[0] for r in rows)
    assert sorted(i for i in seen if i is not None) == list(range(1, 21))
    assert seen.count(None) == 2


@pytest.mark.postgres
def test_postgres_key_ranges_of_an_empty_table_are_one_partition(
    pg_url: str, pg_schema: str, tmp_path: Path
) -> None:
    pg_query(pg_url, f'CREATE SCHEMA "{pg_schema}"; CREATE TABLE "{pg_schema}".e (id int)')
    source = build_source(
        {
            "type": "postgres",
            "connection": pg_url,
            "table": f"{pg_schema}.e",
            "partition_column": "id",
            "partitions": 2,
        },
        tmp_path,
        read_all_as_text=False,
    )
    assert isinstance(source, PostgresSource)
    split = source.partitions(100, None)
    assert [(p.kind, p.label) for p in split.partitions] == [("whole", f"{pg_schema}.e")]
    assert split.single_reason == "the table is empty"
