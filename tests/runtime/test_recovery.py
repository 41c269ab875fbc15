"""Recovering an earlier run of the pipeline that died, and refusing a concurrent one (SPEC §6).

Runs that die are real processes: a DLQ writer that exits without closing its run, and
``dpone run`` killed with SIGKILL at a named point (``DPONE_FAULT_POINT``, ``dpone/faults.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dpone.published import schema_errors
from dpone.runtime.journal import JournalEntry, RunJournal
from tests.support.processes import dpone_killed_at
from tests.support.project import CANARY, PIPELINE, Project, good, loaded, make_project, ts

from .scenarios import LOSSY_AMOUNT, cursor_moment

DEAD_WRITER = textwrap.dedent(
    """
    import os, sys
    from dpone.contracts.reasons import ReasonCode
    from dpone.dlq.rejects import rejected_rows
    from dpone.dlq.refs import file_refs
    from dpone.dlq.store import DlqStore

    root, run_id, load_id, pipeline = sys.argv[1:]
    writer = DlqStore(root).open_run(run_id, load_id, pipeline=pipeline)
    refs = file_refs("data/a.csv", "ab" * 32, [1, 2])
    writer.write_chunk(rejected_rows(refs, ReasonCode.TYPE_MISMATCH, columns="amount"))
    os._exit(0)  # dies without closing its run, as a killed process would
    """
)


def killed_at(project: Project, point: str, run_id: str) -> None:
    """``dpone run`` in a process of its own, SIGKILLed by itself at ``point``."""
    args = ["run", str(project.manifest_path), "--run-id", run_id]
    dpone_killed_at(point, args, cwd=project.root, env=project.env)


def test_a_run_that_died_before_its_sink_commit_is_rolled_back(project: Project) -> None:
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="quarantine")
    # What a run leaves when it dies midway: the journal says running, its DLQ run is open
    # with records in it, and its sink never committed.
    journal = RunJournal(project.work_dir / "runs", PIPELINE)
    journal.write(JournalEntry(PIPELINE, "dead-run", "dead-load", "running", ts(1)))
    dlq_root = str(project.work_dir / "dlq")
    subprocess.run(
        [sys.executable, "-c", DEAD_WRITER, dlq_root, "dead-run", "dead-load", PIPELINE],
        check=True,
    )
    assert project.dlq_index("dead-run")["status"] == "open"

    report = project.run()

    assert report["exit_code"] == 0
    assert [(r["run_id"], r["action"], r["dlq_runs_aborted"]) for r in report["recovered"]] == [
        ("dead-run", "rolled_back", ["dead-run"])
    ]
    index = project.dlq_index("dead-run")
    assert index["status"] == "aborted"
    assert index["record_count"] == 2
    assert project.rows() == [loaded(1), loaded(2)]
    assert project.state()["last_run_id"] == report["run_id"]
    entry = journal.read()
    assert entry is not None
    assert entry.phase == "finished"
    project.check_artifacts()


def test_a_run_killed_before_its_sink_commit_is_rolled_back(project: Project) -> None:
    project.write_csv("a.csv", [good(1), LOSSY_AMOUNT, good(2)])
    project.write_manifest(enforcement="quarantine")
    killed_at(project, "before_sink_commit", "killed-run")
    assert project.state_bytes() is None
    assert [t for t in project.duckdb_tables() if t.startswith("_dpone_stage_")] != []

    report = project.run()

    assert report["exit_code"] == 0
    (recovered,) = report["recovered"]
    assert recovered["run_id"] == "killed-run"
    assert recovered["action"] == "rolled_back"
    assert recovered["dlq_runs_aborted"] == ["killed-run"]
    assert len(recovered["staging_dropped"]) == 1
    assert [t for t in project.duckdb_tables() if t.startswith("_dpone_stage_")] == []
    assert project.rows() == [loaded(1), loaded(2)]
    # The bad row is in exactly one non-aborted DLQ run: this one.
    assert project.dlq_index("killed-run")["status"] == "aborted"
    assert project.dlq_index(report["run_id"])["status"] == "closed"
    assert [r["record_ref"] for r in project.dlq_records(report["run_id"])] == [
        project.file_ref("a.csv", 2)
    ]
    project.check_artifacts()


@pytest.mark.parametrize(
    "kind", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), "filesystem"]
)
def test_a_run_killed_after_its_sink_commit_is_finished_by_the_next(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    project = make_project(request, tmp_path, kind)
    project.write_manifest(enforcement="quarantine", incremental=True)
    project.write_csv("a.csv", [good(1), good(2), good(3)])
    assert project.run()["exit_code"] == 0
    state_before = project.state_bytes()
    late_bad = (LOSSY_AMOUNT[0], CANARY, LOSSY_AMOUNT[2], ts(6), "true")
    project.write_csv("b.csv", [good(4), late_bad, good(5)])

    killed_at(project, "after_sink_commit", "killed-run")

    # Committed but not finished: rows in the sink, state and evidence not yet moved.
    assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5)]
    assert project.state_bytes() == state_before
    bundle = project.work_dir / "evidence" / PIPELINE / "killed-run"
    assert not (bundle / "data_contract_evidence.json").exists()

    report = project.run()

    assert report["exit_code"] == 0
    (recovered,) = report["recovered"]
    assert (recovered["run_id"], recovered["action"]) == ("killed-run", "finished")
    # The state reached the dead run's cursor before this run read: nothing loads twice.
    assert report["state"]["from"] == project.state()["cursor"]["value"]
    assert cursor_moment(project.state()) == datetime(2026, 1, 6, 10, tzinfo=UTC)
    assert report["rows"]["loaded"] == 0
    assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5)]
    evidence = project.evidence("killed-run")
    assert schema_errors(evidence, "dpone.data_contract_evidence.v1") == []
    assert evidence["execution_status"] == "succeeded"
    assert evidence["summary"]["rows_loaded"] == 2
    assert evidence["summary"]["rows_quarantined"] == 1
    assert evidence["state"]["to"] == project.state()["cursor"]["value"]
    # The dead run's DLQ run stands (its load committed); this run quarantined nothing again.
    assert project.dlq_index("killed-run")["status"] == "closed"
    assert report["dlq"]["run_id"] is None
    assert project.dlq().run_ids() == ["killed-run"]
    project.check_artifacts()


def test_a_coerce_run_killed_after_its_sink_commit_stays_held(project: Project) -> None:
    project.write_manifest(enforcement="coerce", mode="merge", unique_key=["id"], incremental=True)
    project.write_csv("a.csv", [good(1), LOSSY_AMOUNT, good(2)])

    killed_at(project, "after_sink_commit", "killed-run")
    assert project.rows() == [loaded(1), loaded(2)]

    report = project.run()

    # Finishing the dead run publishes its evidence but does not advance the state it held:
    # this run reads every row again (merge: none twice) and holds the state too.
    (recovered,) = report["recovered"]
    assert (recovered["run_id"], recovered["action"]) == ("killed-run", "finished")
    assert project.evidence("killed-run")["state"]["advanced"] is False
    assert report["state"]["from"] is None
    assert report["rows"]["loaded"] == 2
    assert report["state"]["advanced"] is False
    assert project.state_bytes() is None
    assert project.rows() == [loaded(1), loaded(2)]
    project.check_artifacts()


def test_a_second_concurrent_run_is_refused(project: Project) -> None:
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(enforcement="strict")
    holder = RunJournal(project.work_dir / "runs", PIPELINE)
    holder.lock()
    try:
        result = project.cli()
    finally:
        holder.unlock()

    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert schema_errors(doc, "dpone.error.v1") == []
    assert doc["code"] == "DPONE_PIPELINE_LOCKED"
    assert "Traceback" not in result.stdout + result.stderr
    assert "run.start" not in result.stderr  # the refused run never began
    assert project.rows() is None
    assert project.state_bytes() is None
    assert not (project.work_dir / "evidence").exists()
    assert project.run()["exit_code"] == 0
    assert project.rows() == [loaded(1)]
