"""``dpone pipeline list|info|runs|reset|drop`` against real runs into DuckDB and PostgreSQL:
what the commands print is what the files and the table hold, a reset never loads a row twice,
and nothing changes without a confirmation."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.canonical import with_checksum
from dpone.cli.main import cli
from dpone.published import schema_errors
from tests.support.processes import CliRun, dpone_killed_at, dpone_subprocess
from tests.support.project import PIPELINE, Project, good, make_project, ts


def dpone(project: Project, *args: str, fmt: str = "json") -> CliRun:
    """``dpone ARGS --format FMT`` through click's runner (its stdin is not a terminal)."""
    result = CliRunner().invoke(
        cli, [*args, "--format", fmt], env=project.env, catch_exceptions=False
    )
    run = CliRun(result.exit_code, result.stdout, result.stderr)
    # Every document printed is the one its published schema describes (click's own usage
    # errors, before the command runs, print text to stderr).
    if fmt == "json" and run.stdout.strip():
        doc = run.doc
        schema = doc["schema"] if run.exit_code == 0 else "dpone.error.v1"
        assert schema_errors(doc, schema) == [], (schema, schema_errors(doc, schema))
    return run


def where(project: Project) -> list[str]:
    return ["--work-dir", str(project.work_dir)]


def two_runs(project: Project) -> list[dict[str, Any]]:
    """Day 1: three good rows and a bad one; day 2: two more good rows (incremental)."""
    project.write_csv("a.csv", [good(1), good(2), good(3), ("4", "n4", "not-money", ts(4), "")])
    first = project.run()
    project.write_csv("b.csv", [good(5), good(6)])
    second = project.run()
    assert first["exit_code"] == second["exit_code"] == 0
    return [first, second]


@pytest.fixture
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    return make_project(request, tmp_path)


def test_list_info_and_runs_show_what_the_runs_left(project: Project) -> None:
    project.write_manifest(incremental=True)
    first, second = two_runs(project)

    listed = dpone(project, "pipeline", "list", *where(project))
    assert listed.exit_code == 0, listed.stdout
    [entry] = listed.doc["pipelines"]
    assert entry["pipeline"] == PIPELINE
    assert entry["run_count"] == 2
    assert entry["last_run"]["run_id"] == second["run_id"]
    assert ts(6).replace("Z", "") in entry["cursor_text"]

    info = dpone(project, "pipeline", "info", PIPELINE, *where(project))
    assert info.exit_code == 0, info.stdout
    doc = info.doc
    state = project.state()
    assert doc["state"]["status"] == "ok"
    assert doc["state"]["revision"] == state["revision"] == 2
    assert doc["state"]["cursor"] == state["cursor"]
    assert doc["state"]["last_run_id"] == second["run_id"]
    assert doc["sink"] == {"type": "duckdb", "table": "analytics.orders", "mode": "append"}
    assert [r["run_id"] for r in doc["runs"]] == [second["run_id"], first["run_id"]]
    assert doc["runs"][1]["rows"] == {
        "read": 4,
        "loaded": 3,
        "quarantined": 1,
        "warned": 0,
        "skipped": 0,
    }
    assert doc["runs"][0]["rows"]["loaded"] == 2
    assert doc["runs"][1]["violations"] == [
        {"column": "amount", "reason": "schema.type_mismatch", "count": 1}
    ]
    [dlq] = doc["dlq_runs"]
    assert dlq["run_id"] == first["run_id"]
    assert dlq["records"] == 1
    assert dlq["status"] == "closed"
    segments = project.dlq_root / "runs" / first["run_id"] / "segments"
    assert dlq["bytes"] == sum(p.stat().st_size for p in segments.iterdir()) > 0

    text = dpone(project, "pipeline", "info", PIPELINE, *where(project), fmt="text")
    assert text.exit_code == 0
    assert f"cursor     updated_at {state['cursor']['value']} (timestamp)" in text.stdout
    assert "duckdb analytics.orders  (append)" in text.stdout

    runs = dpone(project, "pipeline", "runs", PIPELINE, *where(project), "--limit", "1")
    assert runs.exit_code == 0
    assert runs.doc["run_count"] == 2
    assert [r["run_id"] for r in runs.doc["runs"]] == [second["run_id"]]
    runs_text = dpone(project, "pipeline", "runs", PIPELINE, *where(project), fmt="text")
    assert first["run_id"] in runs_text.stdout
    assert second["run_id"] in runs_text.stdout

    # The manifest gives the same folders.
    by_manifest = dpone(project, "pipeline", "info", PIPELINE, "--manifest", str(project.root))
    assert by_manifest.exit_code == 2  # a folder is not a manifest
    by_manifest = dpone(
        project, "pipeline", "info", PIPELINE, "--manifest", str(project.manifest_path)
    )
    assert by_manifest.doc["runs"] == doc["runs"]


def test_plan_shows_the_stored_cursor(project: Project) -> None:
    project.write_manifest(incremental=True)
    two_runs(project)
    shown = CliRunner().invoke(cli, ["plan", str(project.manifest_path)])
    assert shown.exit_code == 0
    value = project.state()["cursor"]["value"]
    assert f"stored       cursor updated_at {value} (timestamp) (state revision 2)" in shown.stdout


def test_reset_of_an_append_table_is_refused(project: Project) -> None:
    project.write_manifest(incremental=True)
    two_runs(project)
    before = project.state_bytes()

    refused = dpone(project, "pipeline", "reset", PIPELINE, *where(project), "--yes")

    assert refused.exit_code == 2
    assert refused.doc["code"] == "DPONE_PIPELINE_RESET_REFUSED"
    assert any("--drop-table" in fix for fix in refused.doc["fixes"])
    assert project.state_bytes() == before
    # Without the manifest the table cannot be reached to empty it.
    no_manifest = dpone(
        project, "pipeline", "reset", PIPELINE, *where(project), "--drop-table", "--yes"
    )
    assert no_manifest.exit_code == 2
    assert project.state_bytes() == before


def test_reset_of_a_merge_table_reloads_without_duplicates(project: Project) -> None:
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    two_runs(project)
    assert len(project.rows() or []) == 5

    reset = dpone(project, "pipeline", "reset", PIPELINE, *where(project), "--yes")

    assert reset.exit_code == 0, reset.stdout
    assert reset.doc["state_removed"] is True
    assert reset.doc["recorded_mode"] == "merge"
    assert not project.state_path.exists()
    again = project.run()
    assert again["rows"]["loaded"] == 5  # the whole source again...
    rows = project.rows() or []
    assert len(rows) == len({r[0] for r in rows}) == 5  # ...each row once


def test_drop_table_empties_an_append_table_and_the_rerun_loads_each_row_once(
    project: Project,
) -> None:
    project.write_manifest(incremental=True)
    first, _ = two_runs(project)
    assert len(project.rows() or []) == 5
    manifest = ["--manifest", str(project.manifest_path)]

    reset = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--drop-table", "--yes")

    assert reset.exit_code == 0, reset.stdout
    assert reset.doc["table_emptied"] is True
    assert reset.doc["earlier_dlq_runs"] == [first["run_id"]]
    assert "replay only the runs after the reset" in reset.stderr
    assert project.rows() == []
    assert not project.state_path.exists()
    markers = project.load_markers()
    assert markers[-1]["load_id"] == reset.doc["reset_load_id"]
    assert markers[-1]["rows"] == 0
    again = project.run()
    assert again["exit_code"] == 0
    rows = project.rows() or []
    assert [r[0] for r in rows] == [1, 2, 3, 5, 6]


def test_every_change_needs_yes_when_stdin_is_not_a_terminal(project: Project) -> None:
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    two_runs(project)
    before = project.state_bytes()
    for command in ("reset", "drop"):
        proc = dpone_subprocess(
            ["pipeline", command, PIPELINE, *where(project), "--format", "json"],
            cwd=project.root,
            env={},
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["code"] == "DPONE_CONFIRMATION_REQUIRED"
        assert project.state_bytes() == before
        assert (project.work_dir / "runs" / f"{PIPELINE}.journal.json").exists()


def test_drop_removes_state_and_journal_and_with_evidence_the_rest(project: Project) -> None:
    project.write_manifest(incremental=True)
    first, _ = two_runs(project)
    journal = project.work_dir / "runs" / f"{PIPELINE}.journal.json"

    dropped = dpone(project, "pipeline", "drop", PIPELINE, *where(project), "--yes")

    assert dropped.exit_code == 0, dropped.stdout
    assert not project.state_path.exists()
    assert not journal.exists()
    assert (project.dlq_root / "runs" / first["run_id"]).is_dir()
    # Its evidence is still there, so the pipeline still shows, without state.
    info = dpone(project, "pipeline", "info", PIPELINE, *where(project))
    assert info.doc["state"]["status"] == "none"
    assert info.doc["run_count"] == 2

    everything = dpone(
        project, "pipeline", "drop", PIPELINE, *where(project), "--with-evidence", "--yes"
    )
    assert everything.exit_code == 0, everything.stdout
    assert not (project.work_dir / "evidence" / PIPELINE).exists()
    assert not (project.dlq_root / "runs" / first["run_id"]).exists()
    assert dpone(project, "pipeline", "list", *where(project)).doc["pipelines"] == []
    gone = dpone(project, "pipeline", "info", PIPELINE, *where(project))
    assert gone.exit_code == 2
    assert gone.doc["code"] == "DPONE_PIPELINE_NOT_FOUND"


def test_read_back_files_are_untrusted(project: Project) -> None:
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    first, second = two_runs(project)
    bad_name = dpone(project, "pipeline", "info", "../state", *where(project))
    assert bad_name.exit_code == 2
    assert bad_name.doc["code"] == "DPONE_PIPELINE_NAME_INVALID"
    # An edited bundle is reported, not counted; an edited state does not verify.
    path = project.evidence_path(first["run_id"])
    doc = json.loads(path.read_bytes())
    doc["summary"]["rows_loaded"] = 1000
    path.write_text(json.dumps(doc))
    state = json.loads(project.state_path.read_bytes())
    state["cursor"]["value"] = "2020-01-01T00:00:00Z"
    project.state_path.write_text(json.dumps(state))

    info = dpone(project, "pipeline", "info", PIPELINE, *where(project)).doc

    assert [r["run_id"] for r in info["runs"]] == [second["run_id"]]
    assert info["unreadable"] == [
        {"run": first["run_id"], "problem": "its evidence does not match its checksum"}
    ]
    assert info["state"]["status"] == "invalid"
    assert info["state"]["code"] == "DPONE_STATE_CHECKSUM_MISMATCH"
    # The run refuses the edited state and its fix names the reset; the reset (merge) works.
    failed = project.cli()
    assert failed.exit_code == 1
    error = failed.doc.get("error") or failed.doc
    assert error["code"] == "DPONE_STATE_CHECKSUM_MISMATCH"
    assert any("dpone pipeline reset" in fix for fix in error["fixes"])
    assert dpone(project, "pipeline", "reset", PIPELINE, *where(project), "--yes").exit_code == 0
    assert project.run()["exit_code"] == 0
    rows = project.rows() or []
    assert len(rows) == len({r[0] for r in rows}) == 5


def test_a_planted_state_of_another_pipeline_is_not_read_as_this_one(project: Project) -> None:
    project.write_manifest(incremental=True)
    two_runs(project)
    doc = json.loads(project.state_path.read_bytes())
    del doc["sha256"]
    doc["pipeline"] = "other_pipeline"
    (project.work_dir / "state" / f"{PIPELINE}.json").write_text(json.dumps(with_checksum(doc)))
    info = dpone(project, "pipeline", "info", PIPELINE, *where(project)).doc
    assert info["state"]["status"] == "invalid"
    assert info["state"]["code"] == "DPONE_STATE_INVALID"


@pytest.mark.postgres
def test_drop_table_on_postgres_empties_the_table_and_reloads_once(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "postgres")
    project.write_manifest(incremental=True)
    two_runs(project)
    assert len(project.rows() or []) == 5
    manifest = ["--manifest", str(project.manifest_path)]
    refused = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--yes")
    assert refused.exit_code == 2
    assert refused.doc["code"] == "DPONE_PIPELINE_RESET_REFUSED"

    reset = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--drop-table", "--yes")

    assert reset.exit_code == 0, reset.stdout
    assert project.rows() == []
    assert project.run()["exit_code"] == 0
    assert [r[0] for r in project.rows() or []] == [1, 2, 3, 5, 6]


@pytest.mark.parametrize("kind", ["filesystem"])
def test_drop_table_through_the_filesystem_sink(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    project = make_project(request, tmp_path, kind)
    project.write_manifest(incremental=True)
    two_runs(project)
    manifest = ["--manifest", str(project.manifest_path)]

    reset = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--drop-table", "--yes")

    assert reset.exit_code == 0, reset.stdout
    assert project.committed_files() == []
    assert project.run()["exit_code"] == 0
    assert [r[0] for r in project.rows() or []] == [1, 2, 3, 5, 6]


def test_drop_table_is_refused_for_a_dlt_sink(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_manifest(incremental=True)
    project.write_csv("a.csv", [good(1), good(2)])
    assert project.run()["exit_code"] == 0
    before = project.state_bytes()
    manifest = ["--manifest", str(project.manifest_path)]

    refused = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--drop-table", "--yes")

    assert refused.exit_code == 2
    assert refused.doc["code"] == "DPONE_PIPELINE_DROP_TABLE_UNSUPPORTED"
    assert project.state_bytes() == before


def test_no_change_while_a_run_holds_the_pipeline_or_died_midway(project: Project) -> None:
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    two_runs(project)
    before = project.state_bytes()
    lock = project.work_dir / "runs" / f"{PIPELINE}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a run of the pipeline in progress
        busy = dpone(project, "pipeline", "reset", PIPELINE, *where(project), "--yes")
    finally:
        os.close(fd)
    assert busy.exit_code == 1
    assert busy.doc["code"] == "DPONE_PIPELINE_LOCKED"
    assert project.state_bytes() == before

    project.write_csv("c.csv", [good(7)])
    dpone_killed_at(
        "after_sink_commit",
        ["run", str(project.manifest_path)],
        cwd=project.root,
        env=project.env,
    )
    for command in ("reset", "drop"):
        refused = dpone(project, "pipeline", command, PIPELINE, *where(project), "--yes")
        assert refused.exit_code == 2
        assert refused.doc["code"] == "DPONE_PIPELINE_RUN_UNFINISHED"
    assert project.state_bytes() == before
    info = dpone(project, "pipeline", "info", PIPELINE, *where(project), fmt="text")
    assert "died midway: the next run recovers it" in info.stdout


def _on_a_terminal(project: Project, answer: bytes, *args: str) -> tuple[int, str]:
    """``python -m dpone ARGS`` with a pseudo-terminal as stdin, answering ``answer``."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dpone", *args],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=project.root,
            env={k: v for k, v in os.environ.items() if not k.startswith("DPONE_")},
        )
        os.write(controller, answer)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(controller)
        os.close(terminal)
    return proc.returncode, out.decode() + err.decode()


def test_on_a_terminal_the_change_is_asked_for(project: Project) -> None:
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    two_runs(project)
    before = project.state_bytes()
    args = ("pipeline", "reset", PIPELINE, *where(project))

    declined, said = _on_a_terminal(project, b"n\n", *args)

    assert declined == 2
    assert "reset pipeline orders_rt: forget the state. Go on?" in said
    assert "DPONE_CANCELLED" in said
    assert project.state_bytes() == before
    accepted, said = _on_a_terminal(project, b"y\n", *args)
    assert accepted == 0, said
    assert "forgot the state of orders_rt" in said
    assert not project.state_path.exists()


def test_the_strategy_comes_from_the_manifest_else_the_evidence_never_a_guess(
    project: Project,
) -> None:
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    first, second = two_runs(project)
    before = project.state_bytes()
    # The manifest now appends: its next run would load the source twice.
    project.write_manifest(incremental=True)
    manifest = ["--manifest", str(project.manifest_path)]
    refused = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--yes")
    assert refused.exit_code == 2
    assert refused.doc["code"] == "DPONE_PIPELINE_RESET_REFUSED"
    assert project.state_bytes() == before
    # Evidence that does not record the strategy: refused without a manifest.
    for run in (first, second):
        path = project.evidence_path(str(run["run_id"]))
        doc = json.loads(path.read_bytes())
        del doc["sha256"]
        del doc["sink"]["mode"]
        path.write_text(json.dumps(with_checksum(doc)))
    unknown = dpone(project, "pipeline", "reset", PIPELINE, *where(project), "--yes")
    assert unknown.exit_code == 2
    assert unknown.doc["code"] == "DPONE_PIPELINE_RESET_REFUSED"
    assert "records its sink strategy" in unknown.doc["message"]
    assert project.state_bytes() == before
    # A manifest that merges says what the next run does.
    project.write_manifest(mode="merge", unique_key=["id"], incremental=True)
    allowed = dpone(project, "pipeline", "reset", PIPELINE, *manifest, "--yes")
    assert allowed.exit_code == 0, allowed.stdout
    assert allowed.doc["manifest_mode"] == "merge"
    assert allowed.doc["recorded_mode"] is None
    assert not project.state_path.exists()
