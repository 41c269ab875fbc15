"""Incremental loads lose nothing at the boundary (SPEC §6): ``>=`` the committed cursor with
the boundary rows a committed run took de-duplicated, ``lag``, ``initial_value``,
``end_value``, and rows too late for the window counted as ``late_skipped``, never silently.

Every run goes through the CLI against a real DuckDB file; what loaded is read back from the
table, the state file and the evidence bundle.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dpone.canonical import with_checksum
from tests.support.processes import dpone_killed_at, dpone_subprocess
from tests.support.project import Project

DAY1, DAY2, DAY3 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"
LATE = "2026-01-01T12:00:00Z"


def row(i: int, at: str, name: str | None = None) -> tuple[str, ...]:
    return (str(i), name or f"n{i}", "10.00", at, "true")


def ids(project: Project) -> list[int]:
    return [r[0] for r in project.rows() or []]


def counts(report: dict[str, Any]) -> tuple[int, int, int]:
    rows = report["rows"]
    return rows["loaded"], rows["skipped"], rows["late_skipped"]


def evidence_summary(project: Project, report: dict[str, Any]) -> dict[str, int]:
    summary: dict[str, int] = project.evidence(report["run_id"])["summary"]
    return summary


def test_a_row_at_the_committed_cursor_loads_once_and_a_restated_one_not_again(
    project: Project,
) -> None:
    project.write_manifest(enforcement="strict", incremental=True)
    project.write_csv("a.csv", [row(1, DAY1), row(2, DAY2)])
    first = project.run()
    assert first["exit_code"] == 0
    assert project.state()["cursor"]["value"] == "2026-01-02T00:00:00.000000Z"

    # A new row exactly at the committed cursor, and a row restating a loaded boundary row.
    project.write_csv("b.csv", [row(2, DAY2), row(3, DAY2)])
    second = project.run()

    assert second["exit_code"] == 0
    assert counts(second) == (1, 3, 0)  # a.csv's two rows and b.csv's restated row
    assert ids(project) == [1, 2, 3]  # an append table: the count of rows is the proof
    assert project.state()["cursor"]["value"] == "2026-01-02T00:00:00.000000Z"

    # A rerun over the unchanged input loads nothing twice.
    third = project.run()
    assert third["exit_code"] == 0
    assert counts(third) == (0, 4, 0)
    assert ids(project) == [1, 2, 3]
    project.check_artifacts()


def test_a_row_updated_to_the_boundary_value_is_new_data(project: Project) -> None:
    """Same id, same cursor, other values: not the committed row, so it loads (an append
    table keeps both versions; merge would upsert)."""
    project.write_manifest(enforcement="strict", incremental=True)
    project.write_csv("a.csv", [row(1, DAY2)])
    project.run()
    project.write_csv("a.csv", [row(1, DAY2), row(1, DAY2, name="renamed")])

    report = project.run()

    assert counts(report) == (1, 1, 0)
    assert sorted(r[1] for r in project.rows() or []) == ["n1", "renamed"]


def test_a_late_row_is_counted_without_lag(project: Project) -> None:
    project.write_manifest(enforcement="strict", incremental=True)
    project.write_csv("a.csv", [row(1, DAY1), row(2, DAY2)])
    project.run()
    project.write_csv("b.csv", [row(3, LATE), row(4, DAY3)])

    report = project.run()

    assert report["exit_code"] == 0
    assert counts(report) == (1, 2, 1)
    assert ids(project) == [1, 2, 4]
    summary = evidence_summary(project, report)
    assert (summary["rows_late_skipped"], summary["rows_skipped"]) == (1, 2)

    # Counted once, in the run that first read it: its file is known to the next run.
    again = project.run()
    assert counts(again) == (0, 4, 0)


def test_a_late_row_within_the_lag_loads(project: Project) -> None:
    project.write_manifest(enforcement="strict", incremental={"lag": 86400})
    project.write_csv("a.csv", [row(1, DAY1), row(2, DAY2)])
    first = project.run()
    project.write_csv("b.csv", [row(3, LATE), row(4, DAY3)])

    second = project.run()

    assert (first["exit_code"], second["exit_code"]) == (0, 0)
    # a.csv: row 1 is older than the window (its file is known: skipped), row 2 a boundary row
    assert counts(second) == (2, 2, 0)
    assert ids(project) == [1, 2, 3, 4]
    assert evidence_summary(project, second)["rows_late_skipped"] == 0
    state = project.state()
    assert state["cursor"]["value"] == "2026-01-03T00:00:00.000000Z"
    assert state["boundary"]["from"] == "2026-01-02T00:00:00.000000Z"
    assert sorted(state["boundary"]["digests"]) == [
        "2026-01-02T00:00:00.000000Z",
        "2026-01-03T00:00:00.000000Z",
    ]
    # A rerun reads the window again (rows 2 and 4) and loads neither twice.
    third = project.run()
    assert counts(third) == (0, 4, 0)
    assert ids(project) == [1, 2, 3, 4]


def test_late_rows_are_reported_in_text_and_logged_as_a_count(project: Project) -> None:
    project.write_manifest(enforcement="strict", incremental=True)
    project.write_csv("a.csv", [row(1, DAY2)])
    assert project.run()["exit_code"] == 0
    project.write_csv("b.csv", [row(2, LATE), row(3, LATE)])

    proc = dpone_subprocess(["run", str(project.manifest_path)], cwd=project.root, env={})

    assert proc.returncode == 0, proc.stderr
    assert "late_skipped 2" in proc.stdout
    [event] = [
        json.loads(line)
        for line in proc.stderr.splitlines()
        if line.startswith("{") and "incremental.late_rows" in line
    ]
    assert event["late_skipped"] == 2
    assert LATE not in proc.stderr  # a count, never the rows' values


def test_end_value_bounds_a_backfill_and_the_cursor_stays_below_it(project: Project) -> None:
    days = [row(i, f"2026-01-0{i}T10:00:00Z") for i in range(1, 6)]
    project.write_csv("a.csv", days)
    project.write_manifest(enforcement="strict", incremental={"end_value": DAY3})

    backfill = project.run()

    assert backfill["exit_code"] == 0
    assert counts(backfill) == (2, 3, 0)  # rows at or after end_value are not loaded
    assert ids(project) == [1, 2]
    assert project.state()["cursor"]["value"] == "2026-01-02T10:00:00.000000Z"

    # The next bounded run moves on from there; then an unbounded one takes the rest, once.
    project.write_manifest(enforcement="strict", incremental={"end_value": "2026-01-04T10:00:00Z"})
    assert counts(project.run()) == (1, 4, 0)
    assert project.state()["cursor"]["value"] == "2026-01-03T10:00:00.000000Z"
    project.write_manifest(enforcement="strict", incremental=True)
    assert counts(project.run()) == (2, 3, 0)
    assert ids(project) == [1, 2, 3, 4, 5]


def test_an_end_value_at_or_below_the_committed_cursor_reads_nothing_new(
    project: Project,
) -> None:
    project.write_csv("a.csv", [row(i, f"2026-01-0{i}T10:00:00Z") for i in range(1, 4)])
    project.write_manifest(enforcement="strict", incremental=True)
    project.run()
    project.write_manifest(enforcement="strict", incremental={"end_value": DAY2})

    report = project.run()

    assert counts(report) == (0, 3, 0)
    assert project.state()["cursor"]["value"] == "2026-01-03T10:00:00.000000Z"


def test_initial_value_is_the_first_runs_inclusive_start(project: Project) -> None:
    project.write_csv("a.csv", [row(1, DAY1), row(2, DAY2), row(3, DAY3)])
    project.write_manifest(enforcement="strict", incremental={"initial_value": DAY2})

    first = project.run()

    assert counts(first) == (2, 1, 0)  # before the start: skipped, not late
    assert ids(project) == [2, 3]
    assert counts(project.run()) == (0, 3, 0)


def test_a_state_without_a_boundary_still_loads_and_gains_one(project: Project) -> None:
    """A state file of an earlier dpone has no boundary: it loads, the rows at its cursor
    count as committed (the strict > loaded them all), and the next state has a boundary."""
    project.write_manifest(enforcement="strict", incremental=True)
    project.write_csv("a.csv", [row(1, DAY1), row(2, DAY2)])
    project.run()
    doc = project.state()
    del doc["boundary"], doc["sha256"]
    project.state_path.write_bytes(json.dumps(with_checksum(doc)).encode())
    project.write_csv("b.csv", [row(3, DAY3)])

    report = project.run()

    assert report["exit_code"] == 0
    assert counts(report) == (1, 2, 0)
    assert ids(project) == [1, 2, 3]
    assert project.state()["boundary"]["from"] == "2026-01-03T00:00:00.000000Z"


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_boundary_beyond_the_cap_fails_an_append_and_a_merge_reloads_it(
    project: Project, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr("dpone.runtime.window.MAX_BOUNDARY_ROWS", 2)
    project.write_manifest(
        enforcement="strict",
        incremental=True,
        mode=mode,
        unique_key=("id",) if mode == "merge" else (),
    )
    project.write_csv("a.csv", [row(i, DAY2) for i in (1, 2, 3)])

    report = project.run()

    if mode == "append":
        assert report["exit_code"] != 0
        assert report["error"]["code"] == "DPONE_CURSOR_BOUNDARY_LIMIT"
        assert project.rows() is None
        assert project.state_bytes() is None
        return
    assert report["exit_code"] == 0
    assert project.state()["boundary"]["complete"] is False
    again = project.run()
    assert counts(again) == (3, 0, 0)  # loaded again: the merge makes it harmless
    assert ids(project) == [1, 2, 3]


def test_lag_on_a_string_cursor_is_refused_before_reading(project: Project) -> None:
    project.write_csv("a.csv", [row(1, DAY1)])
    path = project.write_manifest(enforcement="strict", incremental={"lag": 10})
    doc = json.loads(path.read_text())
    doc["sink"]["options"]["schema_contract"]["columns"]["updated_at"] = {"type": "string"}
    path.write_text(json.dumps(doc))

    result = project.cli()

    assert result.exit_code == 2
    assert result.doc["code"] == "DPONE_MANIFEST_INCREMENTAL_LAG"
    assert not project.work_dir.exists()


@pytest.mark.parametrize("point", ["after_sink_commit", "during_state_replace"])
def test_a_run_killed_after_its_commit_leaves_the_boundary_to_the_next_run(
    project: Project, point: str
) -> None:
    """The boundary is in the run journal before the sink commits: the run that recovers a
    killed one advances the state with it, and nothing at the boundary loads twice."""
    project.write_manifest(enforcement="strict", incremental=True)
    project.write_csv("a.csv", [row(1, DAY1), row(2, DAY2)])
    dpone_killed_at(point, ["run", str(project.manifest_path)], cwd=project.root, env={})
    project.write_csv("b.csv", [row(2, DAY2), row(3, DAY2)])

    report = project.run()

    assert report["exit_code"] == 0
    assert [r["action"] for r in report["recovered"]] == ["finished"]
    assert counts(report) == (1, 3, 0)
    assert ids(project) == [1, 2, 3]
    assert sorted(project.state()["boundary"]["digests"]) == ["2026-01-02T00:00:00.000000Z"]


def test_the_plan_names_the_window(project: Project) -> None:
    project.write_manifest(incremental={"lag": 3600, "end_value": DAY3})

    proc = dpone_subprocess(["plan", str(project.manifest_path)], cwd=project.root, env={})

    assert proc.returncode == 0, proc.stderr
    assert (
        "incremental  updated_at (initial none: reads everything; reads >= cursor - lag 3600; "
        f"end {DAY3} (exclusive))\n" in proc.stdout
    )
