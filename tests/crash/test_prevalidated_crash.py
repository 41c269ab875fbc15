"""A prevalidated run SIGKILLed at each point of its lifecycle, then run again: every row of
the marked files is in the sink exactly once, under one load marker, with the state advanced
once (SPEC §6), on a DuckDB file and on the PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import prevalidated as pv
from tests.support.project import make_project

from .harness import in_process, killed_process

#: Points a prevalidated run passes: before the sink commit nothing is loaded and the rerun
#: loads everything; from the commit on, the next run finishes the dead one.
BEFORE_COMMIT = ("after_recover", "after_dlq_close", "before_sink_commit")
AFTER_COMMIT = ("after_sink_commit", "after_evidence", "during_state_replace", "after_state")


@pytest.mark.crash
@pytest.mark.parametrize("kind", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.parametrize("point", [*BEFORE_COMMIT, *AFTER_COMMIT])
def test_a_killed_prevalidated_run_loads_each_row_once(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, point: str
) -> None:
    project = make_project(request, tmp_path, kind)
    pv.write_manifest(project)
    pv.write_good(project, "a.parquet", 1, 40)
    pv.write_good(project, "b.parquet", 41, 20)

    killed = killed_process(project, "killed", point)
    assert killed.returncode < 0, killed.stderr
    committed = point in AFTER_COMMIT
    assert (project.rows() == pv.expected(1, 60)) is committed
    if not committed:
        assert project.load_markers() == []

    # The producer's next export: after a committed run its files are gone (they loaded);
    # after a dead one they are still there, and the rerun loads them with the new file.
    if committed:
        for name in ("a.parquet", "b.parquet"):
            (project.root / "data" / name).unlink()
    pv.write_good(project, "c.parquet", 61, 10)

    rerun = in_process(project, "rerun")

    report = rerun.doc
    assert report["status"] == "succeeded"
    markers = [(m["run_id"], m["rows"]) for m in project.load_markers()]
    if committed:
        recovered = [(r["run_id"], r["action"]) for r in report["recovered"]]
        # killed after its state moved, the run only lacks its journal's "finished"
        assert recovered == [("killed", "finished")] or point == "after_state", recovered
        assert markers == [("killed", 60), ("rerun", 10)]
        assert project.state()["revision"] == 2
    else:
        assert markers == [("rerun", 70)]
        assert project.state()["revision"] == 1
    assert project.rows() == pv.expected(1, 70)  # every row once
    assert project.state()["last_run_id"] == "rerun"
    project.check_artifacts()
