"""The system tables under SIGKILL: a run killed right after its sink commit has its
``_dpone_runs`` row and its ``_dpone_rejected`` rows exactly once (they committed with the
load), and one killed before the commit has none; the next runs add only their own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.processes import dpone_killed_at, dpone_subprocess
from tests.support.project import Project, good, make_project
from tests.support.systables import SYSTEM, query

KILLED, RERUN, LAST = "killed-run", "rerun", "last-run"


def bad(i: int) -> tuple[str, str, str, str, str]:
    return (f"x{i}", f"n{i}", "1.00", f"2026-01-{i:02d}T10:00:00Z", "true")


def run(project: Project, run_id: str) -> dict[str, Any]:
    args = ["run", "manifest.yaml", "--format", "json", "--run-id", run_id]
    proc = dpone_subprocess(args, cwd=project.root, env=project.env)
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def standing_records(project: Project) -> list[tuple[str, str]]:
    """(run id, record id) of every record of a DLQ run that was not aborted."""
    store = project.dlq()
    return sorted(
        (r.run_id, r.record_id)
        for run_id in store.run_ids()
        if store.read_index(run_id).status != "aborted"
        for r in store.iter_records(run_id)
    )


@pytest.mark.parametrize("point", ["after_sink_commit", "before_sink_commit"])
@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_a_killed_run_then_reruns_leave_each_row_once(
    kind: str, point: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project = make_project(request, tmp_path_factory.mktemp("st"), kind)
    project.write_csv("a.csv", [good(1), bad(2), good(3), bad(4)])
    project.write_manifest(sink_options=SYSTEM, incremental=True, chunk_size=2)
    args = ["run", "manifest.yaml", "--format", "json", "--run-id", KILLED]

    dpone_killed_at(point, args, cwd=project.root, env=project.env)
    project.write_csv("b.csv", [good(5), bad(6)])
    rerun = run(project, RERUN)
    last = run(project, LAST)  # nothing new to read

    committed = point == "after_sink_commit"
    assert [r["run_id"] for r in rerun["recovered"]] == [KILLED]
    found = query(
        project,
        "SELECT run_id, execution_status, rows_read, rows_loaded, rows_quarantined "
        "FROM {ds}._dpone_runs ORDER BY run_id",
    )
    counts = ("read", "loaded", "quarantined")
    expected = [(r["run_id"], "succeeded", *(r["rows"][k] for k in counts)) for r in (rerun, last)]
    # The rerun loads what the killed run did not commit: b.csv alone, or every file.
    assert expected[0][3:] == ((1, 1) if committed else (3, 3))
    assert expected[1][3:] == (0, 0)
    if committed:
        expected.append((KILLED, "succeeded", 4, 2, 2))
    assert found == sorted(expected)
    # Every standing DLQ record once; an aborted run's records (the killed run's when it
    # died before its commit) not at all.
    rejected = query(project, "SELECT run_id, record_id FROM {ds}._dpone_rejected ORDER BY 1, 2")
    assert rejected == standing_records(project)
    assert len({row[0] for row in rejected}) == (2 if committed else 1)
