"""scd2 under SIGKILL (SPEC §6, §13): a run killed just before and just after its sink commit,
then run again, leaves the same history as runs never interrupted, on a DuckDB file and on
PostgreSQL. The versions close and open in the load's one transaction with its marker: a
killed run's are either all there (and the rerun, seeing identical rows, opens nothing) or
none (the rerun opens them)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.processes import dpone_killed_at, dpone_subprocess
from tests.support.replay_pipeline import Pipeline, make_pipeline
from tests.support.scd2 import history, write_scd2_manifest

FIRST = (("1", "a", "10.50"), ("2", "b", "12.345"), ("3", "c", "7.25"), ("4", "d", "1.00"))
#: 1 changes, 2 still quarantined, 3 identical, 4 absent (stays open), 5 new
SECOND = (("1", "A", "11.00"), ("2", "b", "12.345"), ("3", "c", "7.25"), ("5", "e", "5.00"))
EXPECTED = [
    (1, "A", "11.00", 1, None),
    (1, "a", "10.50", 0, 1),
    (3, "c", "7.25", 0, None),
    (4, "d", "1.00", 0, None),
    (5, "e", "5.00", 1, None),
]


def _run(pipeline: Pipeline) -> None:
    args = ["run", str(pipeline.manifest), "--run-id", f"r-{uuid.uuid4().hex[:12]}"]
    proc = dpone_subprocess(args, cwd=pipeline.root, env=pipeline.env)
    assert proc.returncode == 0, proc.stderr


def _two_loads(pipeline: Pipeline, kill_at: str | None) -> None:
    pipeline.write_csv(FIRST)
    write_scd2_manifest(pipeline)
    _run(pipeline)
    pipeline.write_csv(SECOND)
    if kill_at is not None:
        dpone_killed_at(
            kill_at, ["run", str(pipeline.manifest)], cwd=pipeline.root, env=pipeline.env
        )
    _run(pipeline)


#: ``make test`` runs these two; ``make test-crash`` all four.
CELLS = [
    pytest.param("after_sink_commit", "duckdb"),
    pytest.param("before_sink_commit", "duckdb", marks=pytest.mark.crash),
    pytest.param("before_sink_commit", "postgres", marks=pytest.mark.postgres),
    pytest.param("after_sink_commit", "postgres", marks=[pytest.mark.postgres, pytest.mark.crash]),
]


@pytest.mark.parametrize(("point", "sink"), CELLS)
def test_a_killed_scd2_run_and_its_rerun_leave_the_uninterrupted_history(
    point: str, sink: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    killed = make_pipeline(request, tmp_path / "killed", sink)
    _two_loads(killed, point)
    assert history(killed) == EXPECTED
    if sink == "duckdb":  # the same pipeline never interrupted (PostgreSQL: one schema each)
        straight = make_pipeline(request, tmp_path / "straight", sink)
        _two_loads(straight, None)
        assert history(straight) == history(killed)
    # one marker per load that committed: the first, the killed one if it got that far, the
    # rerun's
    assert len(killed.load_ids()) == (3 if point == "after_sink_commit" else 2)
