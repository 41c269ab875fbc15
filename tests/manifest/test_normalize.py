"""``source.normalize``: child tables validate for a JSONL file, a python, rest_api or dlt
source into DuckDB or PostgreSQL by append, replace or upsert; every other source, sink, merge
strategy and engine is refused by validation with the code that says why, and a run stops
before reading a row (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.errors import ManifestError
from dpone.manifest.compiler import compile_text

SINK = "sink: {type: duckdb, table: t}\n"
SOURCES = {
    "jsonl": "{type: file, format: jsonl, path: 'data/*.jsonl', NORMALIZE}",
    "python": "{type: python, callable: 'rows:rows', NORMALIZE}",
    "dlt": "{type: dlt, ref: 'rows:rows', NORMALIZE}",
    "rest_api": "{type: rest_api, client: {base_url: 'http://h/'}, "
    "resource: {name: r, endpoint: {path: r}}, NORMALIZE}",
    "csv": "{type: file, format: csv, path: 'data/*.csv', NORMALIZE}",
    "parquet": "{type: file, format: parquet, path: 'data/*.parquet', NORMALIZE}",
    "duckdb": "{type: duckdb, database: src.duckdb, table: t, NORMALIZE}",
    "sqlite": "{type: sqlite, database: s.db, query: SELECT 1, NORMALIZE}",
    "postgres": "{type: postgres, connection: '${PG_URL}', table: t, NORMALIZE}",
}
NESTED = ("jsonl", "python", "dlt", "rest_api")


def manifest(
    source: str, normalize: str = "{nested: child_tables, max_nesting: 2}", sink: str = SINK
) -> str:
    block = SOURCES[source].replace("NORMALIZE", f"normalize: {normalize}")
    return f"name: nested\nsource: {block}\n{sink}"


def codes(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ManifestError) as caught:
        compile_text(text, allow_any_import=True)
    return [(e.code, e.pointer or "") for e in caught.value.errors]


@pytest.mark.parametrize("source", list(SOURCES))
def test_child_tables_are_refused_with_the_reason(source: str) -> None:
    if source in NESTED:
        assert compile_text(manifest(source), allow_any_import=True).name == "nested"
        postgres = "sink: {type: postgres, connection: '${PG_URL}', table: t}\n"
        assert compile_text(manifest(source, sink=postgres), allow_any_import=True).name
    else:
        assert codes(manifest(source)) == [("DPONE_MANIFEST_SOURCE_OPTION", "/source/normalize")]


@pytest.mark.parametrize(
    ("normalize", "code"),
    [
        ("{nested: flatten}", "DPONE_MANIFEST_ENUM"),
        ("{max_nesting: 1}", "DPONE_MANIFEST_MISSING_KEY"),
        ("{nested: child_tables, max_nesting: -1}", "DPONE_MANIFEST_RANGE"),
        ("{nested: child_tables, depth: 1}", "DPONE_MANIFEST_UNKNOWN_KEY"),
    ],
)
def test_the_normalize_block_is_schema_checked(normalize: str, code: str) -> None:
    assert code in [c for c, _ in codes(manifest("jsonl", normalize))]


@pytest.mark.parametrize(
    ("sink", "says"),
    [
        ("sink: {type: filesystem, path: out, table: t}\n", "the filesystem sink"),
        (
            "sink: {type: duckdb, table: t, strategy: {mode: merge, merge_strategy: scd2, "
            "unique_key: [id]}}\n",
            "merge_strategy scd2",
        ),
        (
            "sink: {type: duckdb, table: t, strategy: {mode: merge, "
            "merge_strategy: delete-insert, merge_key: [id]}}\n",
            "merge_strategy delete-insert",
        ),
        ("runtime: {engine: dask}\nsink: {type: duckdb, table: t}\n", "engine dask"),
    ],
)
def test_child_tables_elsewhere_are_refused_saying_what(sink: str, says: str) -> None:
    with pytest.raises(ManifestError) as caught:
        compile_text(manifest("jsonl", sink=sink), allow_any_import=True)
    found = [e for e in caught.value.errors if e.code == "DPONE_MANIFEST_CHILD_TABLES_UNSUPPORTED"]
    assert len(found) == 1
    assert found[0].pointer == "/source/normalize/nested"
    assert says in found[0].message


def test_a_run_asking_for_child_tables_stops_before_reading(tmp_path: Path) -> None:
    (tmp_path / "rows.py").write_text("def rows():\n    yield {'id': 1}\n")
    path = tmp_path / "manifest.yaml"
    path.write_text(manifest("python", sink="sink: {type: filesystem, path: out, table: t}\n"))
    result = CliRunner().invoke(cli, ["run", str(path), "--format", "json"], env={})
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["code"] == "DPONE_MANIFEST_CHILD_TABLES_UNSUPPORTED"
    assert "the filesystem sink" in error["message"]
    assert not (tmp_path / ".dpone").exists()  # nothing read, nothing written
