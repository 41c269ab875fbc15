"""``source.prevalidated: true`` end to end through ``dpone run`` (the CLI) against a DuckDB
file on disk and the PostgreSQL server: marked files load natively and whole; a file that is
unreadable, unmarked, marked for another contract, of another schema or holding NULL in a NOT
NULL column fails the run before anything loads."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dpone
from dpone.contracts.prevalidated import MARK_KEY, MARK_SCHEMA, mark_value
from tests.support import prevalidated as pv
from tests.support.project import Project


class PrevalidatedRuns:
    kind = "duckdb"

    def test_marked_files_load_whole(self, project: Project) -> None:
        pv.write_manifest(project)
        pv.write_good(project, "a.parquet", 1, 700)
        pv.write_good(project, "b.parquet", 701, 300)

        report = project.run()

        assert report["status"] == "succeeded"
        assert report["exit_code"] == 0
        assert report["data_outcome"] == "passed"
        rows = report["rows"]
        assert (rows["read"], rows["loaded"], rows["quarantined"]) == (1000, 1000, 0)
        assert report["dlq"]["run_id"] is None  # no DLQ record: nothing was rejected
        assert project.rows() == pv.expected(1, 1000)
        assert [m["rows"] for m in project.load_markers()] == [1000]
        assert project.state()["revision"] == 1
        evidence = project.evidence(report["run_id"])
        section = evidence["prevalidated"]
        plan = dpone.compile(project.manifest_path)
        assert section["contract_fingerprint"] == plan.contract_fingerprint
        assert section["checks"] == ["readable", "marked", "fingerprint", "schema", "not_null"]
        assert [(f["path"], f["rows"]) for f in section["files"]] == [
            ("data/a.parquet", 700),
            ("data/b.parquet", 300),
        ]
        assert evidence["summary"]["rows_loaded"] == 1000
        assert evidence["dlq"]["record_count"] == 0
        # The contract's NOT NULL holds in the table the native load made.
        assert project.nullable() == {
            "id": False,
            "name": True,
            "amount": False,
            "updated_at": False,
            "active": True,
        }
        project.check_artifacts()

    def test_a_second_run_appends_its_own_load(self, project: Project) -> None:
        pv.write_manifest(project)
        pv.write_good(project, "a.parquet", 1, 10)
        assert project.run()["status"] == "succeeded"
        (project.root / "data" / "a.parquet").unlink()
        pv.write_good(project, "b.parquet", 11, 5)

        report = project.run()

        assert report["rows"]["loaded"] == 5
        assert project.rows() == pv.expected(1, 15)
        assert [m["rows"] for m in project.load_markers()] == [10, 5]
        assert project.state()["revision"] == 2

    def test_required_parquet_columns_are_accepted(self, project: Project) -> None:
        """A producer that writes NOT NULL columns as REQUIRED needs no statistics."""
        pv.write_manifest(project)
        schema = pv.contract_schema(project)
        pv.write_file(project, "a.parquet", pv.table(1, 20, schema), write_statistics=False)

        assert project.run()["status"] == "succeeded"
        assert project.rows() == pv.expected(1, 20)

    @pytest.mark.parametrize(
        ("code", "breakage"),
        [
            ("DPONE_PREVALIDATED_FILE", "garbage"),
            ("DPONE_PREVALIDATED_FILE", "truncated"),
            ("DPONE_PREVALIDATED_NOT_MARKED", "unmarked"),
            ("DPONE_PREVALIDATED_NOT_MARKED", "malformed_mark"),
            ("DPONE_PREVALIDATED_FINGERPRINT", "other_contract"),
            ("DPONE_PREVALIDATED_SCHEMA", "retyped"),
            ("DPONE_PREVALIDATED_SCHEMA", "missing_column"),
            ("DPONE_PREVALIDATED_SCHEMA", "extra_column"),
            ("DPONE_PREVALIDATED_SCHEMA", "reordered"),
            ("DPONE_PREVALIDATED_NULLS", "null_in_not_null"),
            ("DPONE_PREVALIDATED_NULLS", "null_without_statistics"),
        ],
    )
    def test_a_bad_file_fails_the_run_with_nothing_loaded(
        self, project: Project, code: str, breakage: str
    ) -> None:
        pv.write_manifest(project)
        pv.write_good(project, "a.parquet", 1, 50)  # a good file first: it must not load either
        _write_broken(project, "b.parquet", breakage)

        report = project.run()

        assert report["status"] == "failed"
        assert report["exit_code"] == 1
        assert report["error"]["code"] == code
        assert report["error"]["path"] == "data/b.parquet"
        assert report["rows"]["loaded"] == 0
        assert report["sink"]["committed"] is False
        assert project.rows() is None
        assert project.load_markers() == []
        assert project.state_bytes() is None
        evidence = project.evidence(report["run_id"])
        assert evidence["execution_status"] == "failed"
        assert evidence["failure_code"] == code
        quality = code in ("DPONE_PREVALIDATED_SCHEMA", "DPONE_PREVALIDATED_NULLS")
        assert (evidence["data_outcome"] == "failed_quality_gate") is quality
        # the files checked before the one that failed
        assert [f["path"] for f in evidence["prevalidated"]["files"]] == ["data/a.parquet"]
        project.check_artifacts()

    def test_a_failed_run_leaves_an_existing_table_as_it_was(self, project: Project) -> None:
        pv.write_manifest(project)
        pv.write_good(project, "a.parquet", 1, 10)
        assert project.run()["status"] == "succeeded"
        _write_broken(project, "b.parquet", "null_in_not_null")

        report = project.run()

        assert report["error"]["code"] == "DPONE_PREVALIDATED_NULLS"
        assert project.rows() == pv.expected(1, 10)
        assert [m["rows"] for m in project.load_markers()] == [10]
        assert project.state()["revision"] == 1


def _write_broken(project: Project, name: str, breakage: str) -> None:
    schema = pv.contract_schema(project)
    nullable = pa.schema([f.with_nullable(True) for f in schema])
    good = pv.table(1000, 30, nullable)
    path = project.root / "data" / name
    if breakage == "garbage":
        path.write_bytes(b"PAR1 this is not a parquet file PAR1")
        return
    if breakage == "truncated":
        pv.write_file(project, name, good)
        path.write_bytes(path.read_bytes()[:-40])
        return
    if breakage == "unmarked":
        pv.write_file(project, name, good, marked=False)
        return
    if breakage == "malformed_mark":
        pv.write_file(project, name, good, mark={MARK_KEY: '{"schema": "' + MARK_SCHEMA + '"}'})
        return
    if breakage == "other_contract":
        pv.write_file(project, name, good, mark={MARK_KEY: mark_value("sha256:" + "0" * 64)})
        return
    data: pa.Table = good
    options: dict[str, Any] = {}
    if breakage == "retyped":
        data = good.set_column(2, "amount", pc.cast(good["amount"], pa.float64()))
    elif breakage == "missing_column":
        data = good.drop_columns(["active"])
    elif breakage == "extra_column":
        data = good.append_column("extra", pa.array([1] * good.num_rows, pa.int64()))
    elif breakage == "reordered":
        data = good.select(["name", "id", "amount", "updated_at", "active"])
    elif breakage in ("null_in_not_null", "null_without_statistics"):
        ids = pa.array([None, *range(1001, 1001 + good.num_rows - 1)], pa.int64())
        data = good.set_column(0, pa.field("id", pa.int64()), ids)
        options["write_statistics"] = breakage == "null_in_not_null"
    else:
        raise ValueError(breakage)
    pv.write_file(project, name, data, **options)


class TestPrevalidatedDuckDb(PrevalidatedRuns):
    kind = "duckdb"


@pytest.mark.postgres
class TestPrevalidatedPostgres(PrevalidatedRuns):
    kind = "postgres"


# --- the manifest and the mark ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "pointer"),
    [
        ({"source": {"format": "csv", "path": "data/*.csv"}}, "/source/format"),
        ({"source": {"path": "s3://bucket-a/data/*.parquet"}}, "/source/path"),
        ({"source": {"incremental": {"cursor_column": "updated_at"}}}, "/source/incremental"),
        ({"runtime": {"engine": "dask"}}, "/runtime/engine"),
        ({"quality": {"assertions": {"min_rows_per_load": 1}}}, "/quality/assertions"),
        (
            {"sink": {"type": "filesystem", "path": "lake", "database": None}},
            "/sink/type",
        ),
    ],
)
def test_what_a_prevalidated_load_cannot_honour_is_refused(
    project: Project, edit: dict[str, Any], pointer: str
) -> None:
    pv.write_manifest(project)
    doc = json.loads(project.manifest_path.read_text(encoding="utf-8"))
    for section, values in edit.items():
        target = doc.setdefault(section, {})
        for key, value in values.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
    project.manifest_path.write_text(json.dumps(doc), encoding="utf-8")

    result = project.cli()

    assert result.exit_code == 2
    found = [e for e in dpone.validate(project.manifest_path).errors]
    codes = {(e.code, e.pointer) for e in found}
    assert ("DPONE_MANIFEST_PREVALIDATED_UNSUPPORTED", pointer) in codes
    assert result.doc["code"] in {e.code for e in found}


def test_the_mark_is_a_small_versioned_document(project: Project) -> None:
    pv.write_manifest(project)
    plan = dpone.compile(project.manifest_path)

    mark = dpone.prevalidated_metadata(project.manifest_path)

    assert mark == dpone.prevalidated_metadata(plan)
    assert list(mark) == ["dpone.prevalidated"]
    doc = json.loads(mark["dpone.prevalidated"])
    assert doc == {
        "schema": "dpone.prevalidated.v1",
        "contract_fingerprint": plan.contract_fingerprint,
    }


def _fingerprint(project: Project, columns: dict[str, Any], enforcement: str = "strict") -> str:
    doc = json.loads(project.manifest_path.read_text(encoding="utf-8"))
    contract = doc["sink"]["options"]["schema_contract"]
    contract["columns"] = columns
    contract["enforcement"] = enforcement
    project.manifest_path.write_text(json.dumps(doc), encoding="utf-8")
    return dpone.compile(project.manifest_path).contract_fingerprint


def test_the_contract_fingerprint_covers_columns_types_and_nullability(project: Project) -> None:
    pv.write_manifest(project)
    base: dict[str, Any] = {
        "id": {"type": "integer", "nullable": False},
        "v": {"type": "decimal", "precision": 9, "scale": 2},
    }
    first = _fingerprint(project, base)

    assert first.startswith("sha256:")
    assert len(first) == 71
    assert _fingerprint(project, base) == first  # stable
    assert _fingerprint(project, base, enforcement="quarantine") == first  # mode is not the data
    assert _fingerprint(project, {**base, "id": {"type": "bigint", "nullable": False}}) == first
    changed = [
        {**base, "id": {"type": "integer"}},  # nullability
        {**base, "v": {"type": "decimal", "precision": 9, "scale": 3}},  # a type parameter
        {**base, "id": {"type": "string", "nullable": False}},  # a type
        {"v": base["v"], "id": base["id"]},  # the order of the columns
        {**base, "w": {"type": "string"}},  # one more column
    ]
    assert len({first, *(_fingerprint(project, c) for c in changed)}) == 1 + len(changed)
