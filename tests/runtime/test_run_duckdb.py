"""Every end-to-end scenario against a DuckDB database file, and known gaps found with it."""

from __future__ import annotations

from .conftest import Project, good, ts
from .scenarios import SinkScenarios


class TestDuckDbRuns(SinkScenarios):
    kind = "duckdb"

    def assert_no_staging(self, project: Project) -> None:
        assert [t for t in project.duckdb_tables() if t.startswith("_dpone_stage_")] == []


def test_warned_rows_are_rows_not_values_beyond_five_per_column(project: Project) -> None:
    bad = [(str(i), f"n{i}", "x", ts(i), "maybe") for i in range(7, 13)]  # two bad values each
    project.write_csv("a.csv", [good(i) for i in range(1, 7)] + bad)
    project.write_manifest(enforcement="warn")

    report = project.run()

    assert report["rows"]["loaded"] == 12
    assert report["rows"]["warned"] == 6


def test_a_row_with_a_bad_cursor_is_quarantined_once_across_runs(project: Project) -> None:
    naive_cursor = ("7", "n7", "7.00", "2026-01-07T10:00:00", "true")
    project.write_csv("a.csv", [good(1), naive_cursor, good(2)])
    project.write_manifest(enforcement="quarantine", incremental=True)

    first = project.run()
    second = project.run()

    assert first["rows"]["quarantined"] == 1
    standing = [
        run_id
        for run_id in project.dlq().run_ids()
        if project.dlq_index(run_id)["status"] != "aborted"
    ]
    assert standing == [first["run_id"]]
    assert second["rows"]["quarantined"] == 0
    assert second["rows"]["skipped"] == 3

    # A rewritten file is new data: its rows are read again, the bad one quarantined anew.
    project.write_csv("a.csv", [good(1), naive_cursor, good(2), good(3)])
    third = project.run()
    assert third["rows"]["quarantined"] == 1
    assert third["rows"]["loaded"] == 1
