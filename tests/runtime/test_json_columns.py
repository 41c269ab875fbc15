"""``type: json`` columns land as the sink's own JSON type (SPEC §13): DuckDB ``JSON`` and
PostgreSQL ``jsonb``, queried back with each database's JSON operators; a value that is not
JSON text is dead-lettered with a schema reason; the filesystem sink keeps the text."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from tests.support.postgres import pg_query

LINES = [
    {"id": 1, "doc": {"kind": "a", "items": [{"sku": "x", "n": 2}]}, "tags": ["red", "blue"]},
    {"id": 2, "doc": {"kind": "b", "items": []}, "tags": []},
    {"id": 3, "doc": "{not json", "tags": None},
    {"id": 4, "doc": None, "tags": [1, {"deep": [True]}]},
]
COLUMNS = {"id": {"type": "integer", "nullable": False}, "doc": {"type": "json"}}


def project(root: Path, sink: dict[str, Any], mode: str = "append") -> Path:
    (root / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in LINES))
    manifest = {
        "name": "json_cols",
        "source": {"type": "file", "format": "jsonl", "path": "events.jsonl"},
        "sink": {
            **sink,
            "dataset": sink.get("dataset", "analytics"),
            "table": "events",
            "strategy": {"mode": mode, **({"unique_key": ["id"]} if mode == "merge" else {})},
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {**COLUMNS, "tags": {"type": "json"}},
                }
            },
        },
    }
    path = root / "manifest.yaml"
    path.write_text(json.dumps(manifest))
    return path


def run(manifest: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["run", str(manifest), "--format", "json"], env={})
    doc: dict[str, Any] = json.loads(result.stdout)
    assert result.exit_code == 0, doc
    return doc


def dlq_reasons(root: Path, run_id: str) -> list[tuple[str, str]]:
    segments = sorted((root / ".dpone/dlq/runs" / run_id).glob("segments/*.jsonl"))
    records = [json.loads(line) for s in segments for line in s.read_text().splitlines()]
    return [(r["reason"]["code"], r["reason"]["column"]) for r in records]


def test_duckdb_json_columns_are_native_json(tmp_path: Path) -> None:
    manifest = project(tmp_path, {"type": "duckdb", "database": "w.duckdb"})
    doc = run(manifest)
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (3, 1)
    assert dlq_reasons(tmp_path, doc["run_id"]) == [("schema.type_mismatch", "doc")]
    run(manifest)  # a second load into the existing table keeps the type
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        types = dict(
            con.sql(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'events'"
            ).fetchall()
        )
        assert (types["doc"], types["tags"]) == ("JSON", "JSON")
        rows = con.sql(
            "SELECT id, doc->>'$.kind', doc->'$.items[0]'->>'$.sku', json_array_length(tags), "
            "tags->'$[1]'->'$.deep'->>'$[0]' FROM analytics.events ORDER BY id"
        ).fetchall()
    assert rows == [
        (1, "a", "x", 2, None),
        (1, "a", "x", 2, None),
        (2, "b", None, 0, None),
        (2, "b", None, 0, None),
        (4, None, None, 2, "true"),
        (4, None, None, 2, "true"),
    ]


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_postgres_json_columns_are_jsonb(
    tmp_path: Path, pg_url: str, pg_schema: str, mode: str
) -> None:
    sink = {"type": "postgres", "connection": pg_url, "dataset": pg_schema}
    manifest = project(tmp_path, sink, mode)
    doc = run(manifest)
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (3, 1)
    assert dlq_reasons(tmp_path, doc["run_id"]) == [("schema.type_mismatch", "doc")]
    run(manifest)
    types = pg_query(
        pg_url,
        "SELECT column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = '{pg_schema}' AND table_name = 'events'",
    )
    assert (dict(types)["doc"], dict(types)["tags"]) == ("jsonb", "jsonb")
    rows = pg_query(
        pg_url,
        f"SELECT id, doc->>'kind', doc #>> '{{items,0,sku}}', jsonb_array_length(tags), "
        f'tags @> \'["red"]\' FROM "{pg_schema}".events ORDER BY id',
    )
    once = [(1, "a", "x", 2, True), (2, "b", None, 0, False), (4, None, None, 2, False)]
    assert rows == (once if mode == "merge" else [r for r in once for _ in (0, 1)])


def test_filesystem_keeps_json_as_text(tmp_path: Path) -> None:
    manifest = project(tmp_path, {"type": "filesystem", "path": "out"})
    doc = run(manifest)
    assert doc["rows"]["loaded"] == 3
    files = sorted((tmp_path / "out").rglob("*.parquet"))
    table = pq.read_table(files).sort_by("id")
    assert str(table.schema.field("doc").type) == "string"
    assert [json.loads(v) if v else v for v in table.column("tags").to_pylist()] == [
        ["red", "blue"],
        [],
        [1, {"deep": [True]}],
    ]


def test_python_rows_with_nested_values_land_as_json(tmp_path: Path) -> None:
    """A Python source's dicts and lists (Arrow structs and lists) are serialized into the
    json column, which DuckDB holds as JSON; the evidence's ddl says so."""
    module = f"nested_rows_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(
        "def rows():\n"
        "    yield {'id': 1, 'doc': {'kind': 'a', 'items': [{'sku': 'x', 'n': 2}]}}\n"
        "    yield {'id': 2, 'doc': {'kind': 'b', 'items': []}}\n"
    )
    manifest = {
        "name": "json_py",
        "source": {"type": "python", "callable": f"{module}:rows"},
        "sink": {
            "type": "duckdb",
            "database": "w.duckdb",
            "table": "events",
            "options": {"schema_contract": {"enforcement": "quarantine", "columns": COLUMNS}},
        },
    }
    path = tmp_path / "manifest.yaml"
    path.write_text(json.dumps(manifest))
    doc = run(path)
    assert doc["rows"]["loaded"] == 2
    evidence = json.loads((tmp_path / doc["evidence"]).read_text())
    assert {c["name"]: c["type"] for c in evidence["ddl"]["columns"]}["doc"] == "JSON"
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        rows = con.sql(
            "SELECT id, doc->>'$.kind', doc->'$.items'->'$[0]'->>'$.sku', "
            "json_array_length(doc->'$.items') FROM dpone.events ORDER BY id"
        ).fetchall()
    assert rows == [(1, "a", "x", 1), (2, "b", None, 0)]
