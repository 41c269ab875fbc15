"""engine: dask loads a ``type: json`` column as DuckDB JSON, like engine: local: the tasks
stage it as a Parquet string and the commit reads the files straight into the JSON column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpone import api
from tests.support.scaleout import write_manifest

pytestmark = [pytest.mark.dask, pytest.mark.slow]


def _run(root: Path, engine: str) -> list[tuple[Any, ...]]:
    source = {"type": "file", "format": "jsonl", "path": "data/*.jsonl"}
    columns = {"id": {"type": "integer"}, "doc": {"type": "json"}}
    workers = {"dask": {"n_workers": 1}} if engine == "dask" else {}
    path = write_manifest(root, f"json_{engine}", engine, source, columns, chunk_size=50, **workers)
    report = api.run(path).to_json()
    assert (report["rows"]["loaded"], report["rows"]["quarantined"]) == (196, 4)
    database = root / f".json_{engine}" / f"json_{engine}.duckdb"
    with duckdb.connect(str(database), read_only=True) as con:
        kind = con.sql(
            "SELECT data_type FROM duckdb_columns() WHERE table_name = 't' AND column_name = 'doc'"
        ).fetchall()
        assert kind == [("JSON",)]
        return con.sql(
            "SELECT id, doc->>'$.n', json_array_length(doc->'$.items') FROM dpone.t ORDER BY id"
        ).fetchall()


def test_dask_loads_json_columns_as_local_does(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    for part in range(2):
        lines = []
        for i in range(part * 100, part * 100 + 100):
            doc: object = {"n": i, "items": [{"k": j} for j in range(i % 3)]}
            lines.append(json.dumps({"id": i, "doc": "{bad" if i % 50 == 7 else doc}))
        (tmp_path / "data" / f"p{part}.jsonl").write_text("\n".join(lines) + "\n")
    local = _run(tmp_path, "local")
    assert local[:3] == [(0, "0", 0), (1, "1", 1), (2, "2", 2)]
    assert _run(tmp_path, "dask") == local
