"""``sink.options.system_tables``: ``_dpone_runs`` and ``_dpone_rejected`` in a real DuckDB file
and on the real PostgreSQL server, read back with a connection of the test's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import dpone
from dpone.errors import ConfigError
from dpone.runtime.context import RunOptions
from dpone.runtime.lifecycle import run_pipeline
from dpone.testing import MemorySink
from tests.support.processes import dpone_subprocess
from tests.support.project import CANARY, Project, good
from tests.support.systables import SYSTEM, execute, query

#: Two bad rows: a non-integer id (the column named) and a NULL in a NOT NULL column.
BAD = [("x7", CANARY, "1.00", "2026-01-07T10:00:00Z", "true"), ("8", CANARY, None, None, None)]


def runs(project: Project) -> list[tuple[Any, ...]]:
    return query(
        project,
        "SELECT run_id, pipeline, load_id, execution_status, data_outcome, rows_read, "
        "rows_loaded, rows_quarantined, error_code, error_summary, "
        "finished_at >= started_at FROM {ds}._dpone_runs ORDER BY started_at, run_id",
    )


def rejected(project: Project) -> list[tuple[Any, ...]]:
    return query(
        project,
        "SELECT run_id, record_id, reason, column_name, rule, record_ref, row_json "
        "FROM {ds}._dpone_rejected ORDER BY run_id, record_id",
    )


def dlq_records(project: Project, run_id: str) -> list[tuple[Any, ...]]:
    """What the DLQ holds of a run, as ``_dpone_rejected`` must show it (values apart)."""
    return [
        (
            r.run_id,
            r.record_id,
            str(r.reason.code),
            r.reason.column or r.diagnostics.column,
            r.diagnostics.rule_id,
            r.record_ref,
        )
        for r in project.dlq().iter_records(run_id)
    ]


class SystemTableScenarios:
    kind: str

    def test_a_run_with_rejects_writes_both_tables(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), good(2), *BAD, good(3), good(3, name="dup")])
        project.write_manifest(
            sink_options=SYSTEM,
            assertions={"unique_columns": {"value": ["id"], "on_failure": "quarantine"}},
        )

        report = project.run()

        assert report["status"] == "succeeded"
        run_id, load_id = report["run_id"], report["load_id"]
        [run] = runs(project)
        assert run[:5] == (run_id, project.name, load_id, "succeeded", "passed_with_quarantine")
        assert run[5:] == (6, 3, 3, None, None, True)  # counts, no error, finished >= started
        found = rejected(project)
        assert [row[:6] for row in found] == dlq_records(project, run_id)
        assert sorted((row[2], row[3], row[4]) for row in found) == [
            ("quality.rule_failed", None, "unique_columns"),
            ("schema.required_null", "amount", None),
            ("schema.type_mismatch", "id", None),
        ]
        assert [row[6] for row in found] == [None, None, None]  # reference_only: no values
        # The query a user runs first.
        by_reason = query(
            project, "SELECT reason, count(*) FROM {ds}._dpone_rejected GROUP BY 1 ORDER BY 1"
        )
        assert by_reason == [
            ("quality.rule_failed", 1),
            ("schema.required_null", 1),
            ("schema.type_mismatch", 1),
        ]

    def test_a_rerun_adds_its_own_rows_only(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), BAD[0]])
        project.write_manifest(sink_options=SYSTEM, incremental=True)
        first = project.run()
        project.write_csv("b.csv", [good(2), ("y9", "n", "1.00", "2026-01-09T10:00:00Z", "")])
        second = project.run()
        third = project.run()  # nothing new: a run row, no rejected row

        assert [r[0] for r in runs(project)] == [first["run_id"], second["run_id"], third["run_id"]]
        assert [r[7] for r in runs(project)] == [1, 1, 0]
        per_run = query(
            project, "SELECT run_id, count(*) FROM {ds}._dpone_rejected GROUP BY 1 ORDER BY 1"
        )
        assert per_run == sorted([(first["run_id"], 1), (second["run_id"], 1)])
        assert [row[:6] for row in rejected(project)] == sorted(
            dlq_records(project, first["run_id"]) + dlq_records(project, second["run_id"])
        )

    def test_a_failed_run_records_itself_with_its_error(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), BAD[0]])
        project.write_manifest(sink_options=SYSTEM)
        ok = project.run()
        # The table gains a NOT NULL column the load cannot fill: the sink refuses the commit.
        for statement in (
            "ALTER TABLE {ds}.orders ADD COLUMN extra VARCHAR DEFAULT 'x'",
            "ALTER TABLE {ds}.orders ALTER COLUMN extra SET NOT NULL",
            "ALTER TABLE {ds}.orders ALTER COLUMN extra DROP DEFAULT",
        ):
            execute(project, statement)

        failed = project.run()

        assert failed["status"] == "failed"
        code = failed["error"]["code"]
        assert code.startswith("DPONE_SINK_")
        found = runs(project)
        assert [r[0] for r in found] == [ok["run_id"], failed["run_id"]]
        row = found[1]
        assert row[3:5] == ("failed", failed["data_outcome"])
        assert (row[5], row[6]) == (2, 0)  # read, loaded: nothing of a failed run loads
        assert row[8] == code
        assert row[9].startswith(f"{code}: ")
        assert CANARY not in row[9]
        # A failed run's DLQ run is aborted: none of its records is in _dpone_rejected.
        assert {r[0] for r in rejected(project)} == {ok["run_id"]}

    def test_a_failed_quality_gate_is_recorded(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1)])
        project.write_manifest(sink_options=SYSTEM, assertions={"min_rows_per_load": 5})

        failed = project.run()

        assert failed["error"]["code"] == "DPONE_ASSERTION_FAILED"
        [run] = runs(project)
        assert run[3:9] == ("failed", "failed_quality_gate", 1, 0, 0, "DPONE_ASSERTION_FAILED")
        assert run[9] == f"DPONE_ASSERTION_FAILED: {failed['error']['message']}"
        assert project.rows() is None  # the target was never created; the system table was

    def test_preserve_keeps_the_row_values_and_only_then(self, project: Project) -> None:
        bad = ("x7", "seven", "1.50", "2026-01-07T10:00:00Z", "true")
        project.write_csv("a.csv", [good(1), bad])
        project.write_manifest(sink_options=SYSTEM, dlq={"pii_policy": "masked"})
        project.run()
        project.write_manifest(sink_options=SYSTEM, dlq={"pii_policy": "preserve"})
        project.run()

        masked, preserved = (row[6] for row in rejected(project))
        assert masked is None  # masked keeps a shape in the DLQ, no value here
        assert json.loads(preserved) == {
            "id": "x7",
            "name": "seven",
            "amount": "1.50",
            "updated_at": "2026-01-07T10:00:00Z",
            "active": "true",
        }

    def test_the_cli_entry_runs_with_system_tables(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), BAD[0]])
        project.write_manifest(sink_options=SYSTEM)

        proc = dpone_subprocess(
            ["run", "manifest.yaml", "--format", "json"], cwd=project.root, env=project.env
        )

        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert [r[:4] for r in runs(project)] == [
            (report["run_id"], project.name, report["load_id"], "succeeded")
        ]
        assert len(rejected(project)) == report["rows"]["quarantined"] == 1
        assert CANARY not in proc.stdout + proc.stderr


class TestDuckDb(SystemTableScenarios):
    kind = "duckdb"


class TestPostgres(SystemTableScenarios):
    kind = "postgres"


def test_without_the_option_no_system_table_is_made(project: Project) -> None:
    project.write_csv("a.csv", [good(1), BAD[0]])
    project.write_manifest()
    project.run()
    assert {"_dpone_runs", "_dpone_rejected"}.isdisjoint(project.duckdb_tables())


@pytest.mark.parametrize("kind", ["filesystem", "dlt"])
def test_sinks_that_cannot_hold_them_are_refused_at_validate(kind: str, tmp_path: Path) -> None:
    sink: dict[str, Any] = {"type": kind, "dataset": "analytics", "table": "orders"}
    sink.update({"path": "lake"} if kind == "filesystem" else {"destination": "duckdb"})
    sink["options"] = {"system_tables": True}
    doc = {"kind": "dpone.manifest.v1", "name": "refused_st", "sink": sink}
    doc["source"] = {"type": "file", "format": "csv", "path": "data/*.csv"}
    path = tmp_path / "manifest.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        dpone.compile(path)

    [detail] = caught.value.errors
    assert (detail.code, detail.pointer) == (
        "DPONE_MANIFEST_SINK_OPTION",
        "/sink/options/system_tables",
    )


def test_a_sink_passed_in_that_cannot_hold_them_is_refused_before_reading(
    project: Project,
) -> None:
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(sink_options=SYSTEM)

    options = RunOptions(sink=MemorySink(), watch_signals=False)
    with pytest.raises(ConfigError) as caught:
        run_pipeline(dpone.compile(project.manifest_path), options)

    assert caught.value.code == "DPONE_MANIFEST_SINK_OPTION"
    assert caught.value.exit_code == 2


def test_a_failed_run_that_cannot_record_itself_reports_its_own_error(project: Project) -> None:
    # A table of the user's own under the name: the failed run's row cannot go in.
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(sink_options=SYSTEM, assertions={"min_rows_per_load": 5})
    execute(project, "CREATE SCHEMA {ds}")
    execute(project, "CREATE TABLE {ds}._dpone_runs (note VARCHAR)")

    result = project.cli()

    assert result.exit_code == 1
    assert result.doc["error"]["code"] == "DPONE_ASSERTION_FAILED"
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    [warning] = [e for e in events if e["event"] == "system_tables.run_not_recorded"]
    assert warning["run_id"] == result.doc["run_id"]
    assert warning["code"].startswith("DPONE_SINK_")
    assert query(project, "SELECT count(*) FROM {ds}._dpone_runs") == [(0,)]
