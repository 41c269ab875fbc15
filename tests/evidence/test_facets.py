"""The evidence's SPEC §7 facets through real runs: the DLQ run's first record ids, the ``ddl``
facet (the table the sink holds after the load), the ``compatibility`` facet and the
OpenLineage params. Every bundle is checked against the published schema, and the release gate
reads new bundles and bundles of the shape earlier versions wrote.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpone.ops
from dpone.canonical import verify_checksum, with_checksum
from dpone.evidence.model import MAX_RECORD_IDS
from dpone.published import schema_errors
from tests import dltkit
from tests.support.postgres import PG_URL, pg_query
from tests.support.project import (
    CANARY,
    DATASET,
    HEADER,
    PG_ENV,
    TABLE,
    Project,
    good,
    make_project,
)

EVIDENCE = "dpone.data_contract_evidence.v1"


def bad(i: int) -> tuple[str, ...]:
    """A row whose amount is no decimal: dead-lettered under quarantine."""
    return (str(i), f"n{i}", CANARY, "2026-01-01T10:00:00Z", "true")


def write_rows(project: Project, file: str, header: tuple[str, ...], rows: list[Any]) -> None:
    """``data/<file>`` with a header of the test's choice (an extra column, one missing)."""
    path = project.root / "data" / file
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def run(project: Project) -> dict[str, Any]:
    """One run that must succeed; its evidence, checked against the published schema."""
    report = project.run()
    assert report["status"] == "succeeded", report.get("error")
    doc = project.evidence(report["run_id"])
    assert schema_errors(doc, EVIDENCE) == []
    assert verify_checksum(doc)
    return doc


def catalog(project: Project) -> list[tuple[str, str, bool]]:
    """The target's columns as the database's own catalog reports them, read without dpone."""
    if project.kind == "duckdb":
        con = duckdb.connect(str(project.root / "warehouse.duckdb"), read_only=True)
        try:
            rows = con.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                [DATASET, TABLE],
            ).fetchall()
        finally:
            con.close()
        return [(str(n), str(t), v == "YES") for n, t, v in rows]
    if project.kind == "filesystem":
        schema = pa.unify_schemas([pq.read_schema(f) for f in project.committed_files()])
        return [(f.name, str(f.type), f.nullable) for f in schema]
    rows = pg_query(
        PG_URL,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = '{project.sink['dataset']}' AND c.relname = '{TABLE}' "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
    )
    return [(str(n), str(t), bool(v)) for n, t, v in rows]


def columns_of(doc: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(c["name"], c["type"], c["nullable"]) for c in doc["ddl"]["columns"]]


@pytest.mark.parametrize("kind", ["duckdb", "postgres", "filesystem"])
def test_ddl_is_the_table_after_the_load_and_compatibility_classifies_each_change(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    project = make_project(request, tmp_path, kind)
    project.write_csv("a.csv", [good(1), good(2), bad(3)])
    project.write_manifest()
    first = run(project)
    dataset = project.sink["dataset"]
    assert first["ddl"]["table"] == f"{dataset}.{TABLE}"
    assert first["ddl"]["dialect"] == {"filesystem": "parquet"}.get(kind, kind)
    assert columns_of(first) == catalog(project)
    assert [c[0] for c in columns_of(first)] == list(HEADER)
    # the contract's NOT NULLs are the table's
    assert {n: v for n, _, v in columns_of(first)}["amount"] is False
    assert first["compatibility"] == {
        "level": "additive",
        "changes": [
            {
                "change": "table_created",
                "table": f"{dataset}.{TABLE}",
                "column": None,
                "before": None,
                "after": None,
                "compatibility": "additive",
            }
        ],
    }

    # A second run brings a column the contract does not declare: added, additive.
    (project.root / "data" / "a.csv").unlink()
    write_rows(project, "b.csv", (*HEADER, "note"), [(*good(4), "x")])
    second = run(project)
    assert columns_of(second) == catalog(project)
    assert columns_of(second)[-1][0] == "note"
    assert second["compatibility"]["level"] == "additive"
    assert [(c["change"], c["column"], c["after"]) for c in second["compatibility"]["changes"]] == [
        ("column_added", "note", "string")
    ]

    # A third run no longer carries it: the table keeps the column, the change is breaking.
    (project.root / "data" / "b.csv").unlink()
    project.write_csv("c.csv", [good(5)])
    third = run(project)
    assert columns_of(third) == catalog(project)
    assert third["compatibility"]["level"] == "breaking"
    assert third["compatibility"]["changes"] == [
        {
            "change": "column_missing",
            "table": f"{dataset}.{TABLE}",
            "column": "note",
            "before": "string",
            "after": None,
            "compatibility": "breaking",
        }
    ]
    project.check_artifacts()


@pytest.mark.parametrize("kind", ["dlt_duckdb", "dlt_postgres"])
def test_the_dlt_sinks_ddl_is_dlts_schema_of_the_table_the_destination_holds(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    project = make_project(request, tmp_path, kind)
    project.write_csv("a.csv", [good(1), good(2), bad(3)])
    project.write_manifest()
    first = run(project)
    assert first["ddl"]["dialect"] == "dlt"
    held = dltkit.nullable(kind, project.root, project.sink)
    names = [c[0] for c in columns_of(first)]
    assert names == list(HEADER)
    assert {n: held[n] for n in names} == {n: v for n, _, v in columns_of(first)}
    assert dict((n, t) for n, t, _ in columns_of(first))["amount"].startswith("decimal(")

    # a second load with a new column: dlt's known columns first, then the new one
    (project.root / "data" / "a.csv").unlink()
    write_rows(project, "b.csv", (*HEADER, "note"), [(*good(4), "x")])
    second = run(project)
    assert [c[0] for c in columns_of(second)] == [*HEADER, "note"]
    assert columns_of(second)[-1] == ("note", "text", True)
    assert set(dltkit.nullable(kind, project.root, project.sink)) >= {*HEADER, "note"}
    assert second["compatibility"]["level"] == "additive"


def test_a_failed_run_names_no_ddl_and_no_compatibility(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("a.csv", [good(1), bad(2)])
    project.write_manifest(enforcement="strict")
    report = project.run()
    assert report["status"] == "failed"
    doc = project.evidence(report["run_id"])
    assert schema_errors(doc, EVIDENCE) == []
    assert "ddl" not in doc
    assert "compatibility" not in doc


def test_record_ids_are_the_dlq_runs_first_ids_bounded_with_the_total(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    bad_rows = MAX_RECORD_IDS + 20
    project.write_csv("a.csv", [good(1)] + [bad(i) for i in range(2, 2 + bad_rows)])
    project.write_manifest(chunk_size=50)
    doc = run(project)
    index = project.dlq_index(doc["run_id"])
    every_id = [r["record_id"] for r in index["records"]]
    assert doc["dlq"]["record_count"] == bad_rows == len(every_id)
    assert doc["dlq"]["record_ids"] == sorted(every_id)[:MAX_RECORD_IDS]
    assert doc["dlq"]["record_ids_truncated"] is True
    project.check_artifacts()


def test_record_ids_of_a_small_run_are_all_of_them(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("a.csv", [good(1), bad(2), bad(3)])
    project.write_manifest()
    doc = run(project)
    ids = sorted(r["record_id"] for r in project.dlq_index(doc["run_id"])["records"])
    assert doc["dlq"]["record_ids"] == ids
    assert doc["dlq"]["record_ids_truncated"] is False
    assert "Record ids" in project.evidence_path(doc["run_id"]).with_suffix(".md").read_text()


def test_the_gate_passes_new_bundles_and_bundles_without_the_new_facets(tmp_path: Path) -> None:
    """A bundle an earlier dpone wrote (no record ids, ddl or compatibility) still validates
    against the published schema and passes the gate beside a new one."""
    project = make_project(None, tmp_path, "duckdb")  # type: ignore[arg-type]
    project.write_csv("a.csv", [good(i, day=1) for i in range(1, 200)] + [bad(200)])
    project.write_manifest()
    doc = run(project)
    assert {"ddl", "compatibility"} <= doc.keys()
    assert doc["dlq"]["record_ids"]

    old = {k: v for k, v in doc.items() if k not in ("ddl", "compatibility", "sha256")}
    old["dlq"] = {
        k: v for k, v in doc["dlq"].items() if k not in ("record_ids", "record_ids_truncated")
    }
    sealed = with_checksum(old)
    assert schema_errors(sealed, EVIDENCE) == []
    # Beside the new bundle at the same depth, so its relative index_ref still resolves.
    new_path = project.evidence_path(doc["run_id"])
    old_path = (
        project.work_dir / "evidence-old" / new_path.relative_to(project.work_dir / "evidence")
    )
    old_path.parent.mkdir(parents=True)
    old_path.write_text(json.dumps(sealed))

    report = dpone.ops.release_gate(
        [new_path, old_path], roots=[project.root], allow_unsigned=True, max_quarantine_ratio="0.01"
    )
    assert [b["findings"] for b in report.to_json()["bundles"]] == [[], []]
    assert report.decision == "pass"


LINEAGE = {
    "namespace": "shop",
    "transport": {"type": "file", "log_file_path": ".dpone/lineage.jsonl"},
}
#: A password in the sink's DSN (PostgreSQL trusts the test client, so any password connects).
SECRET = "pw-9c41e7d2b8"


def test_openlineage_params_name_the_run_and_never_a_secret(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "postgres")
    project.env[PG_ENV] = PG_URL.replace("postgres@", f"postgres:{SECRET}@")
    project.write_csv("a.csv", [good(1), good(2), bad(3)])
    project.write_manifest(
        assertions={"min_rows_per_load": 1, "required_columns": ["id", "amount"]}
    )
    manifest = json.loads(project.manifest_path.read_text())
    manifest["observability"] = {"openlineage": LINEAGE}
    project.manifest_path.write_text(json.dumps(manifest))

    doc = run(project)
    facet = doc["openlineage_facets"]["dpone"]
    assert facet["params"] == {
        "manifestFingerprint": doc["manifest_fingerprint"],
        "mode": "append",
        "engine": "local",
    }
    params = {
        a["name"]: a["params"]
        for a in doc["openlineage_facets"]["dataQualityAssertions"]["assertions"]
    }
    assert params == {
        "min_rows_per_load": {"value": 1},
        "required_columns": {"value": ["id", "amount"]},
    }

    raw = (tmp_path / ".dpone" / "lineage.jsonl").read_text()
    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    complete = events[-1]
    assert complete["eventType"] == "COMPLETE"
    assert complete["run"]["facets"]["dpone"]["params"] == facet["params"]
    emitted = {
        a["name"]: a.get("params")
        for a in complete["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
    }
    assert emitted == params
    for artifact in [raw, *(p.read_text() for p in (tmp_path / ".dpone").rglob("*.json"))]:
        assert SECRET not in artifact
        assert CANARY not in artifact
