"""The dlt sink's ``replace`` killed inside dlt's loader, after the staging job committed
and before dlt recorded it: the next run finishes the package with each row once (dlt would
rerun the job into its staging dataset), and the table is the dead run's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import dltkit
from tests.support.project import CANARY, good, loaded, make_project, ts

from .harness import in_process, killed_process


@pytest.mark.crash
def test_a_replace_killed_mid_load_is_finished_once(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_manifest(enforcement="strict", mode="replace")
    project.write_csv("a.csv", [good(1), good(2), good(3)])
    assert in_process(project, "base").exit_code == 0
    project.write_csv("b.csv", [good(4), good(5)])

    killed = killed_process(project, "killed", "dlt_job_committed")
    assert killed.returncode < 0, killed.stderr
    assert project.rows() == [loaded(1), loaded(2), loaded(3)]  # the swap never happened

    # The next run breaks the contract: it recovers the dead run, then fails before its own
    # sink commit, so the table shows exactly what the recovery left.
    project.write_csv("c.csv", [(" 6 ", CANARY, "1", ts(6), "t")])
    failed = in_process(project, "breaks-contract")
    assert failed.exit_code == 1
    report = failed.doc
    assert [(r["run_id"], r["action"]) for r in report["recovered"]] == [("killed", "finished")]
    assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5)]
    assert [m["run_id"] for m in project.load_markers()] == ["base", "killed"]
    assert project.state()["last_run_id"] == "killed"

    project.write_csv("c.csv", [good(6)])
    assert in_process(project, "rerun").exit_code == 0
    assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5, 6)]
    assert dltkit.pending_packages(project.work_dir, project.name) == []
    project.check_artifacts()
