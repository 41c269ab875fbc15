"""DuckDB staging in whole row groups: batches of any size, every row staged once, in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dpone.connectors.sinks.duckdb_load import ROW_GROUP_ROWS, DuckDbLoad

from .sinkkit import SCHEMA, Target, spec

SIZES = [5, ROW_GROUP_ROWS - 10, ROW_GROUP_ROWS + 7, 2 * ROW_GROUP_ROWS + 3, 1, 3]


def _batch(start: int, count: int, tag: str) -> pa.RecordBatch:
    ids = pa.array(range(start, start + count), pa.int64())
    names = pa.array([tag] * count, pa.string())
    amounts = pa.nulls(count, pa.decimal128(18, 2))
    return pa.record_batch([ids, names, amounts], schema=SCHEMA)


@pytest.fixture
def duck(tmp_path: Path) -> Target:
    config = {"type": "duckdb", "database": "warehouse.duckdb", "dataset": "analytics"}
    return Target("duckdb", tmp_path, {**config, "table": "orders"})


@pytest.fixture
def inserts(monkeypatch: pytest.MonkeyPatch) -> list[pa.RecordBatch]:
    """Every batch the load inserts into its staging table."""
    seen: list[pa.RecordBatch] = []
    real = DuckDbLoad._insert

    def insert(self: DuckDbLoad, batch: pa.RecordBatch) -> None:
        seen.append(batch)
        real(self, batch)

    monkeypatch.setattr(DuckDbLoad, "_insert", insert)
    return seen


def test_rows_are_staged_in_whole_row_groups_and_once(
    duck: Target, inserts: list[pa.RecordBatch]
) -> None:
    staged = duck.sink().begin(spec("l1"))
    start = 0
    for number, size in enumerate(SIZES):
        staged.write(_batch(start, size, f"b{number}"))
        start += size
    assert all(b.num_rows % ROW_GROUP_ROWS == 0 for b in inserts)  # nothing partial yet
    staged.commit()
    # Only the last insert (at the commit) holds a partial row group; the rows kept their order.
    assert all(b.num_rows % ROW_GROUP_ROWS == 0 for b in inserts[:-1])
    ids: list[Any] = [i for b in inserts for i in b.column("id").to_pylist()]
    assert ids == list(range(start))
    table = duck.read()
    assert table is not None
    assert sorted(table.column("id").to_pylist()) == list(range(start))
    assert duck.leftovers() == []


def test_merge_keeps_the_last_row_of_a_key_across_row_groups(duck: Target) -> None:
    staged = duck.sink().begin(spec("l1", "merge"))
    staged.write(_batch(0, ROW_GROUP_ROWS - 1, "first"))
    staged.write(_batch(0, 3, "second"))  # ids 0..2 again, across the row group boundary
    staged.write(_batch(1, 1, "third"))  # id 1 again, waiting until the commit
    staged.commit()
    table = duck.read()
    assert table is not None
    names = dict(zip(table.column("id").to_pylist(), table.column("name").to_pylist(), strict=True))
    assert len(names) == ROW_GROUP_ROWS - 1
    assert (names[0], names[1], names[2], names[3]) == ("second", "third", "second", "first")


def test_an_abort_drops_the_rows_still_waiting(duck: Target) -> None:
    sink = duck.sink()
    staged = sink.begin(spec("l1"))
    staged.write(_batch(0, ROW_GROUP_ROWS + 5, "x"))
    staged.abort()
    assert duck.read() is None
    assert duck.leftovers() == []
    staged = sink.begin(spec("l2"))
    staged.write(_batch(0, 7, "y"))
    staged.commit()
    table = duck.read()
    assert table is not None
    assert table.column("name").to_pylist() == ["y"] * 7
