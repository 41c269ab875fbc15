"""Exactly-once under SIGKILL (SPEC §6): kill point x enforcement x sink x strategy x cursor.

Each cell runs ``dpone run`` as a real process that SIGKILLs itself at a named point of the
lifecycle (``DPONE_FAULT_POINT``, see ``dpone/faults.py``), adds new rows, runs again to the
end and checks every promise against an independent model (``harness.simulate``) by reading
the sink, its load markers, the state, the DLQ and the evidence back from disk.

``make test`` runs :data:`REPRESENTATIVE` (one point per lifecycle phase, quarantine, every
sink, append and merge, incremental); ``make test-crash`` runs every other cell. What is left
out of the full cross product, and why, is in :data:`POINTS_BY_MODE`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import make_project

from .harness import (
    BASE_RUN,
    DLT_KILLS,
    KILLED_RUN,
    RERUN,
    SECOND_KILLED_RUN,
    Cell,
    Mode,
    RunModel,
    assert_clean_output,
    check_outcome,
    dpone_process,
    expected_recovery,
    in_process,
    killed_process,
    log_events,
    scenario_files,
    simulate,
    write_rows,
)

SINKS = ("duckdb", "postgres", "filesystem")
STRATEGIES = ("append", "merge")

#: Every point of ``dpone.faults.POINTS``; chunk points at chunks of a.csv (all skipped when
#: incremental) and of b.csv, group commits in the first and in a later chunk with bad rows.
ALL_POINTS = (
    "after_recover",
    "after_chunk_dlq:4",
    "during_dlq_group_commit:1",
    "during_dlq_group_commit:3",
    "after_chunk_staged:1",
    "after_chunk_staged:8",
    "after_dlq_close",
    "before_sink_commit",
    "after_sink_commit",
    "after_evidence",
    "during_state_replace",
    "after_state",
)

#: The points each enforcement mode is killed at. Quarantine gets every point. Strict and warn
#: never write a DLQ record, so the group commit is never reached there: a cell killed at it
#: would be a plain uninterrupted run, already covered. With a bad row, strict fails inside
#: the fifth chunk (the third of b.csv): the points before it kill the run; every point after
#: it is unreachable and behaves the same (the run fails, the rerun fails the same way), so
#: two of them stand for the rest.
_NO_DLQ_POINTS = tuple(p for p in ALL_POINTS if not p.startswith("during_dlq_group_commit"))
POINTS_BY_MODE: dict[Mode, tuple[str, ...]] = {
    "quarantine": ALL_POINTS,
    "warn": _NO_DLQ_POINTS,
    "strict": _NO_DLQ_POINTS,
    "strict_bad": (
        "after_recover",
        "after_chunk_dlq:4",
        "after_chunk_staged:1",
        "after_chunk_staged:8",  # unreachable
        "after_state",  # unreachable
    ),
}

#: Cells that run in ``make test`` (no ``crash`` marker): quarantine, incremental, one point
#: per lifecycle phase spread over the sinks and strategies, and both sides of the sink commit
#: on every sink with both strategies.
REPRESENTATIVE = {
    ("after_recover", "duckdb", "append"),
    ("after_chunk_dlq:4", "postgres", "merge"),
    ("during_dlq_group_commit:3", "filesystem", "append"),
    ("after_chunk_staged:1", "filesystem", "merge"),
    ("after_chunk_staged:8", "duckdb", "merge"),
    ("after_dlq_close", "postgres", "append"),
    *(("before_sink_commit", sink, strategy) for sink in SINKS for strategy in STRATEGIES),
    *(("after_sink_commit", sink, strategy) for sink in SINKS for strategy in STRATEGIES),
    ("after_evidence", "duckdb", "append"),
    ("during_state_replace", "postgres", "merge"),
    ("after_state", "filesystem", "append"),
}


#: The dlt sink's cells (``make test-crash``), on dlt's DuckDB destination, quarantine,
#: incremental: its own commit points, and the sink commit's far side (the ``_dlt_loads`` row
#: is there, the state not advanced). Append gets every point inside dlt's loader; merge,
#: whose reruns are idempotent anyway, the two that matter most to it.
DLT_CELLS = (
    *(
        (point, "append")
        for point in ("dlt_before_load", *DLT_KILLS, "after_sink_commit", "before_sink_commit")
    ),
    *((point, "merge") for point in ("dlt_before_load", "dlt_job_committed", "after_sink_commit")),
)


def is_representative(cell: Cell) -> bool:
    return (
        cell.mode == "quarantine"
        and cell.incremental
        and (cell.point, cell.sink, cell.strategy) in REPRESENTATIVE
    )


def matrix() -> list[pytest.ParameterSet]:
    cells = []
    for mode, points in POINTS_BY_MODE.items():
        for point in points:
            for sink in SINKS:
                for strategy in STRATEGIES:
                    for incremental in (True, False):
                        cell = Cell(point, mode, sink, strategy, incremental)  # type: ignore[arg-type]
                        marks = [] if is_representative(cell) else [pytest.mark.crash]
                        if sink == "postgres":
                            marks.append(pytest.mark.postgres)
                        cells.append(pytest.param(cell, id=cell.id, marks=marks))
    for point, strategy in DLT_CELLS:
        cell = Cell(point, "quarantine", "dlt_duckdb", strategy, True)  # type: ignore[arg-type]
        cells.append(pytest.param(cell, id=cell.id, marks=[pytest.mark.crash]))
    return cells


@pytest.mark.parametrize("cell", matrix())
def test_killed_run_then_rerun_is_exactly_once(
    cell: Cell, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, cell.sink)
    project.write_manifest(
        enforcement=cell.enforcement,
        mode=cell.strategy,
        unique_key=["id"] if cell.strategy == "merge" else (),
        incremental=cell.incremental,
        chunk_size=5,
    )
    files = scenario_files(cell.mode, cell.strategy)
    runs = [RunModel(KILLED_RUN, ("a.csv", "b.csv"), cell.point), RunModel(RERUN, tuple(files))]
    if cell.incremental:
        runs.insert(0, RunModel(BASE_RUN, ("a.csv",)))
    model = simulate(cell, files, runs)
    assert any(r.killed for r in model.runs) or cell.mode == "strict_bad", "point never reached"

    write_rows(project, "a.csv", files["a.csv"])
    if cell.incremental:
        assert in_process(project, BASE_RUN).exit_code == 0
    state_before_kill = project.state_bytes()

    # The run that dies: a process of its own, killed by itself at the point.
    write_rows(project, "b.csv", files["b.csv"])
    killed = killed_process(project, KILLED_RUN, cell.point)
    assert killed.returncode == model.run(KILLED_RUN).exit_code, killed.stderr
    assert_clean_output(killed.stdout, killed.stderr)
    if killed.returncode == 1:
        assert '"DPONE_CONTRACT_VIOLATION"' in killed.stdout

    # New rows arrive; the next run recovers and loads them.
    write_rows(project, "c.csv", files["c.csv"])
    result = in_process(project, RERUN)
    report = result.doc
    rerun = model.run(RERUN)
    assert result.exit_code == rerun.exit_code, result.stdout
    if rerun.failed:
        assert report["error"]["code"] == "DPONE_CONTRACT_VIOLATION"
    else:
        assert report["rows"]["loaded"] == len(rerun.loaded)
        assert report["rows"]["quarantined"] == len(rerun.quarantined)

    # Recovery is visible: in the report, and as a log event.
    recovered = [(r["run_id"], r["action"], r["dlq_runs_aborted"]) for r in report["recovered"]]
    assert recovered == expected_recovery(model, dlq_runs=set(project.dlq().run_ids()))
    events = [e for e in log_events(result.stderr) if e["event"] == "run.recovered"]
    assert [(e["run_id"], e["action"]) for e in events] == [(r, a) for r, a, _ in recovered]
    assert all(r["reason"] for r in report["recovered"])

    check_outcome(project, model, files, state_before_kill=state_before_kill)


#: (first kill, second kill, whether the second one is inside the recovery of the first).
SECOND_KILLS = (
    ("after_sink_commit", "during_state_replace", True),
    ("after_evidence", "during_state_replace", True),
    ("before_sink_commit", "after_recover", False),
    ("after_sink_commit", "before_sink_commit", False),
    ("during_dlq_group_commit:2", "after_chunk_staged:4", False),
)


def second_kill_cases() -> list[pytest.ParameterSet]:
    cases = []
    for first, second, in_recovery in SECOND_KILLS:
        for sink in SINKS:
            fast = sink == "duckdb" and in_recovery and first == "after_sink_commit"
            marks = [] if fast else [pytest.mark.crash]
            if sink == "postgres":
                marks.append(pytest.mark.postgres)
            where = "in-recovery" if in_recovery else "next-run"
            ident = f"{first}-then-{second}-{where}-{sink}"
            cases.append(pytest.param(first, second, in_recovery, sink, id=ident, marks=marks))
    return cases


@pytest.mark.parametrize(("first", "second", "in_recovery", "sink"), second_kill_cases())
def test_a_run_killed_while_recovering_is_recovered_by_the_next(
    first: str,
    second: str,
    in_recovery: bool,
    sink: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Recovery is itself interruptible: the run that recovers a dead run dies too (inside its
    recovery, or later in its own stream), and a third run still ends exactly once."""
    cell = Cell(first, "quarantine", sink, "append", incremental=True)
    project = make_project(request, tmp_path, sink)
    project.write_manifest(enforcement="quarantine", incremental=True, chunk_size=5)
    files = scenario_files(cell.mode, cell.strategy)
    model = simulate(
        cell,
        files,
        [
            RunModel(BASE_RUN, ("a.csv",)),
            RunModel(KILLED_RUN, ("a.csv", "b.csv"), first),
            RunModel(SECOND_KILLED_RUN, tuple(files), second, in_recovery=in_recovery),
            RunModel(RERUN, tuple(files)),
        ],
    )
    assert model.run(KILLED_RUN).killed
    assert model.run(SECOND_KILLED_RUN).killed

    write_rows(project, "a.csv", files["a.csv"])
    assert in_process(project, BASE_RUN).exit_code == 0
    write_rows(project, "b.csv", files["b.csv"])
    for run_id, point in ((KILLED_RUN, first), (SECOND_KILLED_RUN, second)):
        killed = dpone_process(project, "--run-id", run_id, fault=point)
        assert killed.returncode == model.run(run_id).exit_code, killed.stderr
        assert_clean_output(killed.stdout, killed.stderr)
        write_rows(project, "c.csv", files["c.csv"])

    result = in_process(project, RERUN)
    assert result.exit_code == 0
    recovered = [(r["run_id"], r["action"], r["dlq_runs_aborted"]) for r in result.doc["recovered"]]
    assert recovered == expected_recovery(model, dlq_runs=set(project.dlq().run_ids()))
    check_outcome(project, model, files, state_before_kill=None)
