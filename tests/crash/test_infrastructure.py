"""Infrastructure that fails under a run (SPEC §9, STYLE habit 4): a PostgreSQL backend that
goes away mid-run, a DuckDB file another process holds or that sits on a read-only mount, a
DLQ on a full disk. Each is a typed, transient error (exit 1, no traceback), never a DLQ
record; the state does not move; and once the infrastructure is back, the next run ends
exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpone.dlq.store import DlqStore
from dpone.ops.verification import verify_store
from tests.support.project import DATASET, PG_ENV, TABLE, Project, make_project

from .harness import (
    BASE_RUN,
    RERUN,
    Cell,
    Model,
    RunModel,
    assert_clean_output,
    check_outcome,
    dpone_env,
    dpone_process,
    hooked_args,
    in_process,
    scenario_files,
    simulate,
    sink_rows,
    write_rows,
)

FAILED_RUN = "failed-run"


def failing_model(files: dict[str, Any], *, incremental: bool = True) -> Model:
    """base (a.csv) -> a run of a.csv and b.csv that fails before its sink commit -> a rerun of
    every file. The failing run writes evidence of its failure and aborts its own DLQ run."""
    cell = Cell("", "quarantine", "any", "append", incremental)
    return simulate(
        cell,
        files,
        [
            RunModel(BASE_RUN, ("a.csv",)),
            RunModel(FAILED_RUN, ("a.csv", "b.csv"), fails=True),
            RunModel(RERUN, tuple(files)),
        ],
    )


def error_of(stdout: str) -> dict[str, Any]:
    """The error of a failed ``dpone run``: from its run report, or the error document when
    the run stopped before it had one."""
    doc: dict[str, Any] = json.loads(stdout)
    if doc.get("schema") == "dpone.error.v1":
        return doc
    assert doc["status"] == "failed"
    assert doc["sink"]["committed"] is False
    error: dict[str, Any] = doc["error"]
    return error


def assert_no_infrastructure_records(store: DlqStore, run_id: str) -> None:
    """An infrastructure failure is never a DLQ record: the run's DLQ run (if it has one) is
    aborted and holds only the contract's rejects."""
    if run_id not in store.run_ids():
        return
    assert store.read_index(run_id).status == "aborted"
    codes = {r.reason.code.value for r in store.iter_records(run_id)}
    assert all(code.startswith("schema.") for code in codes), codes


# --- PostgreSQL goes away -----------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("point", ["after_chunk_staged:4", "before_sink_commit"])
def test_postgres_backend_terminated_mid_run(
    point: str, request: pytest.FixtureRequest, tmp_path: Path, pg_url: str
) -> None:
    project = make_project(request, tmp_path, "postgres")
    app = f"dpone_crash_{uuid.uuid4().hex[:16]}"
    project.env[PG_ENV] = f"{pg_url}?application_name={app}"
    project.write_manifest(enforcement="quarantine", incremental=True, chunk_size=5)
    files = scenario_files("quarantine", "append")
    model = failing_model(files)
    write_rows(project, "a.csv", files["a.csv"])
    assert in_process(project, BASE_RUN).exit_code == 0
    state_before, rows_before = project.state_bytes(), sink_rows(project)
    write_rows(project, "b.csv", files["b.csv"])

    # The sink's backend is terminated from another connection at the point; the run goes on.
    proc = subprocess.run(
        [*hooked_args(project, "pg_terminate", point, pg_url, app), "--run-id", FAILED_RUN],
        cwd=project.root,
        env=dpone_env(project),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert "terminated 1 backend(s)" in proc.stderr
    assert proc.returncode == 1, proc.stderr
    assert_clean_output(proc.stdout, proc.stderr)
    error = error_of(proc.stdout)
    assert (error["code"], error["stage"]) == ("DPONE_SINK_UNAVAILABLE", "sink")
    assert project.state_bytes() == state_before
    assert sink_rows(project) == rows_before
    assert [m["run_id"] for m in project.load_markers()] == [BASE_RUN]
    assert_no_infrastructure_records(project.dlq(), FAILED_RUN)
    evidence = project.evidence(FAILED_RUN)
    assert evidence["execution_status"] == "failed"
    assert evidence["state"]["advanced"] is False

    write_rows(project, "c.csv", files["c.csv"])
    result = in_process(project, RERUN)
    assert result.exit_code == 0
    assert result.doc["recovered"] == []  # the failed run cleaned up after itself
    check_outcome(project, model, files, state_before_kill=state_before)


# --- DuckDB file held or read-only -----------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, duckdb
    con = duckdb.connect(sys.argv[1])  # a read-write connection: DuckDB's one writer
    print("holding", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    con.close()
    """
)


@pytest.fixture
def duckdb_project(tmp_path: Path) -> Project:
    """A DuckDB project whose database sits in a folder of its own (``db/``)."""
    sink = {"type": "duckdb", "database": "db/warehouse.duckdb", "dataset": DATASET}
    return Project(tmp_path, "duckdb", {**sink, "table": TABLE})


def run_against_unusable_duckdb(project: Project, code: str) -> None:
    """The run fails with ``code`` and touches nothing."""
    state_before = project.state_bytes()
    runs_before = project.dlq().run_ids()
    proc = dpone_process(project, "--run-id", FAILED_RUN)
    assert proc.returncode == 1, proc.stderr
    assert_clean_output(proc.stdout, proc.stderr)
    error = error_of(proc.stdout)
    assert (error["code"], error["stage"]) == (code, "sink")
    assert project.state_bytes() == state_before
    assert project.dlq().run_ids() == runs_before


def test_duckdb_file_held_by_another_writer(duckdb_project: Project) -> None:
    project = duckdb_project
    cell = Cell("after_recover", "quarantine", "duckdb", "append", incremental=True)
    files = scenario_files(cell.mode, cell.strategy)
    project.write_manifest(enforcement="quarantine", incremental=True, chunk_size=5)
    write_rows(project, "a.csv", files["a.csv"])
    assert in_process(project, BASE_RUN).exit_code == 0
    rows_before = sink_rows(project)
    write_rows(project, "b.csv", files["b.csv"])

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(project.root / "db" / "warehouse.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        run_against_unusable_duckdb(project, "DPONE_SINK_LOCKED")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
        if holder.stdout is not None:
            holder.stdout.close()
    assert sink_rows(project) == rows_before

    write_rows(project, "c.csv", files["c.csv"])
    assert in_process(project, RERUN).exit_code == 0
    model = _model_without(cell, files)
    check_outcome(project, model, files, state_before_kill=None)


def _model_without(cell: Cell, files: dict[str, Any]) -> Model:
    """base -> a run that could not start (nothing of it exists) -> a rerun of every file."""
    model = simulate(
        cell,
        files,
        [
            RunModel(BASE_RUN, ("a.csv",)),
            RunModel(FAILED_RUN, ("a.csv", "b.csv"), "after_recover"),
            RunModel(RERUN, tuple(files)),
        ],
    )
    assert model.run(FAILED_RUN).killed
    assert not model.run(FAILED_RUN).committed
    return model


@pytest.fixture
def read_only_mount() -> Iterator[list[Path]]:
    """Bind-mounts made read-only by the test (root ignores file modes, not a read-only
    mount); unmounted afterwards."""
    mounts: list[Path] = []
    yield mounts
    for path in reversed(mounts):
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def mount_read_only(folder: Path, mounts: list[Path]) -> None:
    bind = subprocess.run(
        ["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True, check=False
    )
    if bind.returncode != 0:
        pytest.fail(f"cannot bind-mount here (CI runs as root): {bind.stderr.strip()}")
    mounts.append(folder)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, check=True)


def test_duckdb_file_on_a_read_only_mount(
    duckdb_project: Project, read_only_mount: list[Path]
) -> None:
    project = duckdb_project
    cell = Cell("after_recover", "quarantine", "duckdb", "append", incremental=True)
    files = scenario_files(cell.mode, cell.strategy)
    project.write_manifest(enforcement="quarantine", incremental=True, chunk_size=5)
    write_rows(project, "a.csv", files["a.csv"])
    assert in_process(project, BASE_RUN).exit_code == 0
    rows_before = sink_rows(project)
    write_rows(project, "b.csv", files["b.csv"])

    mount_read_only(project.root / "db", read_only_mount)
    run_against_unusable_duckdb(project, "DPONE_SINK_READ_ONLY")
    subprocess.run(["umount", str(project.root / "db")], check=True)
    read_only_mount.clear()
    assert sink_rows(project) == rows_before

    write_rows(project, "c.csv", files["c.csv"])
    assert in_process(project, RERUN).exit_code == 0
    check_outcome(project, _model_without(cell, files), files, state_before_kill=None)


# --- the DLQ's disk is full -----------------------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs for the DLQ (real ENOSPC from the kernel), unmounted afterwards."""
    mount = tmp_path / "dlqfs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs here (CI runs as root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def _fill(path: Path, *, leave: int) -> None:
    """Fill the filesystem ``path`` is on (unbuffered writes until ENOSPC), then give back
    ``leave`` bytes."""
    block = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError:
                break
        os.ftruncate(fd, max(os.fstat(fd).st_size - leave, 0))
    finally:
        os.close(fd)


def test_dlq_disk_full_fails_typed_then_the_rerun_is_exactly_once(
    request: pytest.FixtureRequest, tmp_path: Path, small_tmpfs: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_manifest(
        enforcement="quarantine", incremental=True, chunk_size=5, dlq={"directory": "dlqfs"}
    )
    # Every other row of b.csv is bad: far more records than 64 KiB of 4 KiB pages hold.
    bad = {("a.csv", 4): "amount", **{("b.csv", i): "amount" for i in range(1, 28, 2)}}
    files = scenario_files("quarantine", "append", bad)
    model = failing_model(files)
    write_rows(project, "a.csv", files["a.csv"])
    assert in_process(project, BASE_RUN).exit_code == 0
    state_before, rows_before = project.state_bytes(), sink_rows(project)
    write_rows(project, "b.csv", files["b.csv"])
    # A reject costs bytes, not a file (one segment per chunk): leave room for the run's
    # folder, its open index and a segment or two, not for all of them.
    _fill(small_tmpfs / "ballast", leave=3 * 4096)

    proc = dpone_process(project, "--run-id", FAILED_RUN)

    assert proc.returncode == 1, proc.stderr
    assert_clean_output(proc.stdout, proc.stderr)
    # The run's own report, with its first error (writing the records), even though the
    # full disk also refused the aborted index.
    assert json.loads(proc.stdout)["schema"] == "dpone.run.v1"
    error = error_of(proc.stdout)
    assert (error["code"], error["stage"]) == ("DPONE_DLQ_DISK_FULL", "dlq")
    assert project.state_bytes() == state_before
    assert sink_rows(project) == rows_before
    store = project.dlq()
    # Nothing half-indexed: the run's records are all in its aborted index, or (if even the
    # aborted index could not be written) the next run closes it as aborted.
    index = store.read_index(FAILED_RUN)
    if index.status == "aborted":
        assert verify_store(store) == []
    else:
        assert index.status == "open"

    # Space comes back; the next run aborts what is left and loads exactly once.
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_tmpfs)], check=True)
    write_rows(project, "c.csv", files["c.csv"])
    result = in_process(project, RERUN)
    assert result.exit_code == 0
    assert result.doc["recovered"] == []  # the run ended (failed); only its DLQ run was open
    assert store.read_index(FAILED_RUN).status == "aborted"
    assert_no_infrastructure_records(store, FAILED_RUN)
    check_outcome(project, model, files, state_before_kill=state_before)
