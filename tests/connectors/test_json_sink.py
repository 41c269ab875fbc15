"""A ``type: json`` column at the sink: DuckDB ``JSON`` and PostgreSQL ``jsonb`` (the filesystem
sink keeps the text), whether the column comes with the first batch, is added to a load in
progress (widened) or arrives in Parquet files a scale-out run staged."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpone.connectors.sinks.loadstate import LoadState
from dpone.contracts.spec import ColumnSpec
from dpone.contracts.types import sink_field
from tests.support.postgres import pg_query

from .sinkkit import Target, spec
from .test_staged_parquet import _staged

ID = pa.field("id", pa.int64(), nullable=False)
DOC = sink_field(ColumnSpec("doc", "json"))
SCHEMA = pa.schema([ID, DOC])
DOCS = ['{"a": {"b": [1, 2]}}', "[]", None, '"text"']


def _batch(first: int, schema: pa.Schema = SCHEMA) -> pa.RecordBatch:
    ids = pa.array(range(first, first + len(DOCS)), pa.int64())
    if schema.get_field_index("doc") < 0:
        return pa.record_batch([ids], schema=schema)
    return pa.record_batch([ids, pa.array(DOCS, pa.string())], schema=schema)


def _column_type(target: Target) -> str:
    if target.kind == "filesystem":
        table = target.read()
        assert table is not None
        return str(table.schema.field("doc").type)
    if target.kind == "duckdb":
        with duckdb.connect(str(target.base / target.config["database"])) as con:
            rows = con.execute(
                "SELECT data_type FROM duckdb_columns() WHERE table_name = 'orders' "
                "AND column_name = 'doc'"
            ).fetchall()
        return str(rows[0][0])
    sql = (
        "SELECT data_type FROM information_schema.columns WHERE table_schema = "
        f"'{target.dataset}' AND table_name = 'orders' AND column_name = 'doc'"
    )
    assert target.url is not None
    return str(pg_query(target.url, sql)[0][0])


NATIVE = {"duckdb": "JSON", "postgres": "jsonb", "filesystem": "string"}


def _docs(target: Target) -> list[object]:
    """The ``doc`` values by id, parsed from the JSON text the sink holds."""
    if target.kind == "postgres":
        assert target.url is not None
        sql = f'SELECT doc::text FROM "{target.dataset}".orders ORDER BY id'
        texts = [r[0] for r in pg_query(target.url, sql)]
    else:
        rows = target.rows()
        assert rows is not None
        texts = [r["doc"] for r in rows]
    return [None if t is None else json.loads(t) for t in texts]


@pytest.mark.parametrize("how", ["first_batch", "widened"])
def test_json_column_is_the_sinks_json_type(target: Target, how: str) -> None:
    load = target.sink().begin(
        spec("l1", schema=SCHEMA if how == "first_batch" else pa.schema([ID]))
    )
    if how == "widened":
        assert isinstance(load, LoadState)  # every real sink's load widens (staging.py)
        load.write(_batch(1, pa.schema([ID])))
        load.widen(SCHEMA)
        load.write(_batch(11))
    else:
        load.write(_batch(1))
    load.commit()
    assert _column_type(target) == NATIVE[target.kind]
    expected: list[object] = [{"a": {"b": [1, 2]}}, [], None, "text"]
    assert _docs(target) == ([None] * 4 if how == "widened" else []) + expected


def test_json_column_from_staged_parquet(target: Target, tmp_path: Path) -> None:
    files = _staged(tmp_path / "s1", _batch(1), _batch(5))
    assert pq.read_schema(files[0]).field("doc").type == pa.string()
    marker = target.sink().begin(spec("l1", schema=SCHEMA)).commit_staged_parquet(files)
    assert marker.rows == 8
    assert _column_type(target) == NATIVE[target.kind]
    assert _docs(target)[:2] == [{"a": {"b": [1, 2]}}, []]


@pytest.mark.parametrize(
    "target", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_an_existing_text_column_keeps_its_type(target: Target) -> None:
    """A table created while the column was text (before it was declared json) is not
    retyped: the JSON text loads into it."""
    create = 'CREATE TABLE "{d}".orders (id BIGINT NOT NULL, doc {t})'
    if target.kind == "duckdb":
        with duckdb.connect(str(target.base / target.config["database"])) as con:
            con.execute(f'CREATE SCHEMA "{target.dataset}"')
            con.execute(create.format(d=target.dataset, t="VARCHAR"))
    else:
        assert target.url is not None
        pg_query(target.url, f'CREATE SCHEMA "{target.dataset}"')
        pg_query(target.url, create.format(d=target.dataset, t="text"))
    load = target.sink().begin(spec("l1", schema=SCHEMA))
    load.write(_batch(1))
    load.commit()
    assert _column_type(target) == {"duckdb": "VARCHAR", "postgres": "text"}[target.kind]
    assert _docs(target) == [{"a": {"b": [1, 2]}}, [], None, "text"]
