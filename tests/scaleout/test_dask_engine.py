"""engine: dask on a LocalCluster of 2 worker processes gives what engine: local gives (SPEC §12):
the same loaded rows, DLQ records (by record_ref and reason) and evidence counts. The module's
tests share one cluster (``local_cluster``); a run that starts its own is in test_dask_faults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dpone import api
from tests.support.postgres import pg_query
from tests.support.scaleout import csv_files, outcome, same_result, write_manifest

pytestmark = [pytest.mark.dask, pytest.mark.slow]


def test_csv_glob_gives_the_local_result(tmp_path: Path, local_cluster: dict[str, Any]) -> None:
    csv_files(tmp_path)
    source = {"type": "file", "format": "csv", "path": "data/*.csv"}
    local = outcome(write_manifest(tmp_path, "csv_local", "local", source))
    dask = outcome(write_manifest(tmp_path, "csv_dask", "dask", source, **local_cluster))
    same_result(local, dask)
    assert dask["report"]["rows"]["quarantined"] == 3 * 13
    parts = dask["scale_out"]["partitions"]
    assert [(p["source_partition"], p["rows_read"], p["rows_quarantined"]) for p in parts] == [
        (f"data/part{f}.csv", 1200, 13) for f in range(3)
    ]
    assert dask["scale_out"]["single_partition_reason"] is None
    assert "scale_out" not in local["evidence_doc"]
    # the tasks' segments are named by partition and chunk; the staged files are gone
    names = sorted(p.name for p in (dask["work"] / "dlq" / "runs").glob("*/segments/*.jsonl"))
    assert names[0] == "p00000-c000000.jsonl"
    assert not list((dask["work"] / "scaleout").glob("*/staged"))


def test_parquet_row_groups_give_the_local_result(
    tmp_path: Path, local_cluster: dict[str, Any]
) -> None:
    (tmp_path / "data").mkdir()
    n = 9000
    amounts = [None if i % 101 == 0 else f"{i}.5" for i in range(n)]
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "amount": pa.array(
                [a if a is None or i % 53 else "bad" for i, a in enumerate(amounts)]
            ),
            "kind": pa.array([f"k{i % 4}" for i in range(n)]),
        }
    )
    pq.write_table(table, tmp_path / "data" / "big.parquet", row_group_size=1000)
    assert pq.ParquetFile(tmp_path / "data" / "big.parquet").num_row_groups == 9
    source = {"type": "file", "format": "parquet", "path": "data/big.parquet"}
    local = outcome(write_manifest(tmp_path, "pq_local", "local", source))
    dask = outcome(write_manifest(tmp_path, "pq_dask", "dask", source, **local_cluster))
    same_result(local, dask)
    assert local["report"]["rows"]["quarantined"] > 0
    # 9 row groups of 1000 rows, taken together up to 4 chunks of 500 rows: 5 partitions
    segments = {p.name[:6] for p in (dask["work"] / "dlq" / "runs").glob("*/segments/*.jsonl")}
    assert segments == {f"p{i:05d}" for i in range(5)}


def test_postgres_key_ranges_give_the_local_result(
    tmp_path: Path, pg_url: str, pg_schema: str, local_cluster: dict[str, Any]
) -> None:
    pg_query(pg_url, f'CREATE SCHEMA "{pg_schema}"')
    pg_query(
        pg_url,
        f'CREATE TABLE "{pg_schema}".src AS SELECT i AS id, '
        "CASE WHEN i % 89 = 0 THEN 'x' ELSE i || '.75' END AS amount, 'k' || (i % 5) AS kind "
        "FROM generate_series(1, 5000) AS i ORDER BY i",
    )
    source = {
        "type": "postgres",
        "connection": "${DPONE_TEST_PG_URL}",
        "table": f"{pg_schema}.src",
        "partition_column": "id",
        "partitions": 3,
    }
    env = {"DPONE_TEST_PG_URL": pg_url}
    local_source = {k: v for k, v in source.items() if k not in ("partition_column", "partitions")}
    local = outcome(write_manifest(tmp_path, "pg_local", "local", local_source), env)
    dask = outcome(write_manifest(tmp_path, "pg_dask", "dask", source, **local_cluster), env)
    same_result(local, dask)
    assert dask["report"]["rows"]["quarantined"] == 5000 // 89
    parts = {p.name[:6] for p in (dask["work"] / "dlq" / "runs").glob("*/segments/*.jsonl")}
    assert parts == {"p00000", "p00001", "p00002"}


def test_an_empty_header_gets_the_local_runs_name(
    tmp_path: Path, local_cluster: dict[str, Any]
) -> None:
    # R's export: an empty first header. Every task names it as the local run does.
    csv_files(tmp_path, files=2, rows=300)
    for path in (tmp_path / "data").glob("*.csv"):
        lines = path.read_text().splitlines()
        path.write_text("\n".join(f'"{i or ""}",{line}' for i, line in enumerate(lines)) + "\n")
    source = {"type": "file", "format": "csv", "path": "data/*.csv"}
    local = outcome(write_manifest(tmp_path, "r_local", "local", source))
    dask_manifest = write_manifest(tmp_path, "r_dask", "dask", source, **local_cluster)
    dask = outcome(dask_manifest)
    same_result(local, dask)
    renamed = [{"position": 1, "source": "", "name": "column_1"}]
    assert local["report"]["renamed_columns"] == dask["report"]["renamed_columns"] == renamed
    again = outcome(dask_manifest)  # the second run into the same table
    assert len(again["rows"]) == 2 * len(dask["rows"])


def test_header_only_files_make_the_local_runs_table(
    tmp_path: Path, local_cluster: dict[str, Any]
) -> None:
    (tmp_path / "data").mkdir()
    for name in ("a.csv", "b.csv"):
        (tmp_path / "data" / name).write_text("id,amount,kind,extra\n")
    source = {"type": "file", "format": "csv", "path": "data/*.csv"}
    tables = []
    for engine, runtime in (("local", {}), ("dask", local_cluster)):
        manifest = write_manifest(tmp_path, f"h_{engine}", engine, source, **runtime)
        manifest.write_text(manifest.read_text().replace("min_rows_per_load: 1", "{}"))
        report = api.run(manifest).to_json()
        assert (report["exit_code"], report["rows"]["loaded"]) == (0, 0)
        with duckdb.connect(str(tmp_path / f".h_{engine}" / f"h_{engine}.duckdb")) as con:
            tables.append(con.sql("DESCRIBE dpone.t").fetchall())
    assert tables[0] == tables[1]
    # The declared columns (the manifest lists them sorted), then the header's other one.
    assert [(c[0], c[1]) for c in tables[0]] == [
        ("amount", "DECIMAL(18,2)"),
        ("id", "BIGINT"),
        ("kind", "VARCHAR"),
        ("extra", "VARCHAR"),
    ]


def test_a_variant_column_of_one_task_only_loads_as_local_does(
    tmp_path: Path, local_cluster: dict[str, Any]
) -> None:
    """Each task stages the variant columns its own chunks needed: the load holds them all
    (a task's files used to decide the load's columns: the others' did not fit)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("id,amount,kind\n1,1.50,x\n2,2.50,y\n", encoding="utf-8")
    (data / "b.csv").write_text("id,amount,kind\n3,lots,x\n4,4.50,y\n", encoding="utf-8")
    source = {"type": "file", "format": "csv", "path": "data/*.csv"}
    results = []
    for name, engine, extra in (("var_local", "local", {}), ("var_dask", "dask", local_cluster)):
        path = write_manifest(tmp_path, name, engine, source, **extra)
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        doc["sink"]["options"]["type_inference"] = {"conflict_policy": "variant_column"}
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        report = api.run(path).to_json()
        assert report["exit_code"] == 0, report.get("error")
        con = duckdb.connect(str(tmp_path / f".{name}" / f"{name}.duckdb"), read_only=True)
        try:
            results.append(con.sql("SELECT * FROM dpone.t ORDER BY id").fetchall())
        finally:
            con.close()
    local, dask = results
    assert dask == local
    assert [row[-1] for row in local] == [None, None, "lots", None]
