"""Ctrl-C and SIGTERM in the middle of a real run (SPEC §9: exit 130, no traceback), and two
runs of one pipeline at once (SPEC §6: the pipeline lock).

The input is large (200,000 rows, chunks of 10,000) so the signal lands while rows stream
through enforcement, the DLQ writer thread and the sink. A test-only custom predicate holds
the stream from the fifth chunk on until the test has sent its signal, so a slow test process
never finds the run already finished; the signal itself lands wherever the run is.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from dpone.connectors.sources.duckdb import interruptible
from dpone.errors import Interrupted
from tests.support.project import Project, make_project

from .harness import (
    RERUN,
    Cell,
    RunModel,
    SourceRow,
    assert_clean_output,
    check_outcome,
    dpone_env,
    dpone_process,
    hooked_args,
    log_events,
    run_args,
    scenario_files,
    simulate,
    write_rows,
)

STOPPED_RUN = "stopped-run"
BIG_ROWS = 200_000
BIG_CHUNK = 10_000
DEADLINE_S = 120.0

PACE = textwrap.dedent(
    '''
    """Test-only: hold the stream from the fifth chunk on until the test has signalled."""
    import signal
    import time
    from pathlib import Path

    import pyarrow as pa

    SIGNALLED = Path(__file__).with_name("signalled")
    HELD = Path(__file__).with_name("held")
    NOTED = Path(__file__).with_name("noted")
    chunks = 0


    def first_signal_noted():
        # The run's InterruptWatch handler is a bound method; its flag says the first
        # signal was handled (and only noted).
        watch = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
        return getattr(watch, "received", None) is not None


    def hold(batch):
        global chunks
        chunks += 1
        if chunks >= 5:
            HELD.touch()
        deadline = time.monotonic() + 120
        while chunks >= 5 and not SIGNALLED.exists() and time.monotonic() < deadline:
            if first_signal_noted():
                NOTED.touch()
            time.sleep(0.005)
        return pa.array([True] * batch.num_rows)
    '''
)


@pytest.fixture(scope="session")
def big_rows() -> list[SourceRow]:
    """200,000 rows; every 1,000th has an amount that does not fit (quarantined)."""
    return [
        SourceRow("big.csv", i, i, f"n{i}v1", i, "amount" if i % 1000 == 0 else None)
        for i in range(1, BIG_ROWS + 1)
    ]


@pytest.fixture(scope="session")
def big_csv(tmp_path_factory: pytest.TempPathFactory, big_rows: list[SourceRow]) -> Path:
    """The CSV of :func:`big_rows`, written once per worker and copied into each project."""
    project = Project(tmp_path_factory.mktemp("big"), "duckdb", {})
    return write_rows(project, "big.csv", big_rows)


def wait_for(what: str, done: object, proc: subprocess.Popen[str]) -> None:
    """Poll ``done()`` until true; fail if the process ends first or the deadline passes."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():  # type: ignore[operator]
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(0.002)


def journal_running(project: Project, run_id: str) -> bool:
    path = project.work_dir / "runs" / f"{project.name}.journal.json"
    try:
        doc = json.loads(path.read_bytes())
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    return bool(doc["run_id"] == run_id and doc["phase"] == "running")


def sigint_default() -> None:
    # A child inherits an ignored SIGINT (a test runner may ignore it); dpone must see it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_held_run(
    request: pytest.FixtureRequest, tmp_path: Path, sink: str, big_csv: Path
) -> tuple[Project, subprocess.Popen[str]]:
    """A ``dpone run`` of the big CSV, held at its fifth chunk until ``signalled`` exists,
    once the journal says running and the first chunk's rejects reached the DLQ."""
    project = make_project(request, tmp_path, sink)
    (project.root / "pace.py").write_text(PACE, encoding="utf-8")
    project.write_manifest(
        enforcement="quarantine",
        incremental=True,
        chunk_size=BIG_CHUNK,
        assertions={"custom": [{"predicate": "pace:hold", "vectorized": True}]},
    )
    (project.root / "data").mkdir()
    shutil.copyfile(big_csv, project.root / "data" / "big.csv")
    proc = subprocess.Popen(
        [*run_args(project), "--run-id", STOPPED_RUN],
        cwd=project.root,
        env=dpone_env(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    dlq_run = project.dlq_root / "runs" / STOPPED_RUN
    wait_for("streaming", lambda: journal_running(project, STOPPED_RUN) and dlq_run.exists(), proc)
    return project, proc


def check_stopped_then_exactly_once(
    project: Project, proc: subprocess.Popen[str], sink: str, big_rows: list[SourceRow]
) -> list[dict[str, object]]:
    """The stopped run: exit 130, nothing committed, its DLQ run aborted; then a rerun ends
    exactly once. The stopped run's log events."""
    stdout, stderr = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130, stderr
    assert_clean_output(stdout, stderr)
    events = log_events(stderr)  # every line of stderr is a log event
    report = json.loads(stdout)
    assert report["error"]["code"] == "DPONE_INTERRUPTED"
    assert report["sink"]["committed"] is False
    assert project.state_bytes() is None
    assert project.load_markers() == []
    assert project.dlq_index(STOPPED_RUN)["status"] == "aborted"
    assert project.evidence(STOPPED_RUN)["execution_status"] == "failed"

    files = {"big.csv": big_rows}
    model = simulate(
        Cell("", "quarantine", sink, "append", incremental=True),
        files,
        [RunModel(STOPPED_RUN, ("big.csv",), fails=True), RunModel(RERUN, ("big.csv",))],
    )
    rerun = dpone_process(project, "--run-id", RERUN)
    assert rerun.returncode == 0, rerun.stderr
    assert_clean_output(rerun.stdout, rerun.stderr)
    assert json.loads(rerun.stdout)["recovered"] == []  # the stopped run rolled itself back
    check_outcome(project, model, files, state_before_kill=None)
    return events


@pytest.mark.parametrize(
    "sink", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), "filesystem"]
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_stream_stops_the_run_and_the_rerun_is_exactly_once(
    signum: signal.Signals,
    sink: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    big_rows: list[SourceRow],
    big_csv: Path,
) -> None:
    """The first signal is deferred to the next safe point (the end of the held chunk): the
    run stops through its own failure path, never from the middle of a driver call."""
    project, proc = start_held_run(request, tmp_path, sink, big_csv)
    proc.send_signal(signum)
    (project.root / "signalled").touch()
    events = check_stopped_then_exactly_once(project, proc, sink, big_rows)
    stopping = [e for e in events if e["event"] == "run.stopping"]
    assert [e["signal"] for e in stopping] == [signum.name]


def test_a_second_signal_stops_the_run_where_it_is(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    big_rows: list[SourceRow],
    big_csv: Path,
) -> None:
    """Ctrl-C twice while the run is held inside an assertion: the second one interrupts that
    call instead of waiting for the chunk to end; the outcome is the same clean stop."""
    project, proc = start_held_run(request, tmp_path, "duckdb", big_csv)
    wait_for("the hold", (project.root / "held").exists, proc)
    proc.send_signal(signal.SIGINT)
    # The first handler has run (two signals before it runs would merge into one) and the
    # run is still held: the first Ctrl-C only noted the stop.
    wait_for("the first Ctrl-C noted", (project.root / "noted").exists, proc)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=DEADLINE_S)
    (project.root / "signalled").touch()  # lets the rerun through the hold
    events = check_stopped_then_exactly_once(project, proc, "duckdb", big_rows)
    # Stopped inside the held chunk, never reaching the safe point that logs run.stopping.
    assert not [e for e in events if e["event"] == "run.stopping"]


# --- two runs at once ---------------------------------------------------------------------------


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; killed if the test fails before they end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_two_runs_at_once_one_proceeds_the_other_is_refused(
    request: pytest.FixtureRequest, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """Both start together; whichever takes the pipeline lock first is held mid-stream (a test
    hook at its third chunk) while the other tries: that one exits DPONE_PIPELINE_LOCKED having
    touched nothing. Then the first is let go and finishes exactly once."""
    project = make_project(request, tmp_path, "duckdb")
    project.write_manifest(enforcement="quarantine", incremental=True, chunk_size=5)
    files = {k: v for k, v in scenario_files("quarantine", "append").items() if k != "c.csv"}
    for name, rows in files.items():
        write_rows(project, name, rows)
    gate = tmp_path / "gate"
    gate.mkdir()
    run_ids = ("run-one", "run-two")
    for run_id in run_ids:
        processes.append(
            subprocess.Popen(
                [
                    *hooked_args(project, "pause", "after_chunk_staged:3", str(gate)),
                    "--run-id",
                    run_id,
                ],
                cwd=project.root,
                env=dpone_env(project),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )

    # One is held with the lock; the other has been refused and has exited.
    deadline = time.monotonic() + DEADLINE_S
    while not ((gate / "ready").exists() and any(p.poll() is not None for p in processes)):
        assert all(p.poll() in (None, 1) for p in processes)
        assert time.monotonic() < deadline, "the runs did not get to the lock"
        time.sleep(0.01)
    (loser,) = [p for p in processes if p.poll() is not None]
    (winner,) = [p for p in processes if p.poll() is None]
    loser_out, loser_err = loser.communicate()
    assert loser.returncode == 1, loser_err
    assert_clean_output(loser_out, loser_err)
    error = json.loads(loser_out)
    assert (error["schema"], error["code"]) == ("dpone.error.v1", "DPONE_PIPELINE_LOCKED")
    winner_id = run_ids[processes.index(winner)]
    loser_id = run_ids[processes.index(loser)]
    # The refused run wrote nothing: no state, no DLQ run, no evidence, no journal entry.
    assert project.state_bytes() is None
    assert project.dlq().run_ids() in ([], [winner_id])
    assert not (project.work_dir / "evidence" / project.name / loser_id).exists()
    assert journal_running(project, winner_id)

    (gate / "go").touch()
    winner_out, winner_err = winner.communicate(timeout=DEADLINE_S)
    assert winner.returncode == 0, winner_err
    assert_clean_output(winner_out, winner_err)
    model = simulate(
        Cell("", "quarantine", "duckdb", "append", incremental=True),
        files,
        [RunModel(winner_id, ("a.csv", "b.csv"))],
    )
    check_outcome(project, model, files, state_before_kill=None)


# --- where a signal lands inside a driver ---------------------------------------------------------

DRIVER_INTERRUPTED = textwrap.dedent(
    """
    import os, signal, sys, threading

    import duckdb
    import pyarrow as pa

    from dpone.connectors.sql import postgres as pg
    from dpone.connectors.sources.duckdb import interruptible


    def ctrl_c_soon():
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()


    try:
        if sys.argv[1] == "duckdb":
            # Staging a large Arrow table: the scan calls back into Python, where the signal
            # is seen (a pure SQL query may not look at signals at all).
            con = duckdb.connect()
            con.execute("CREATE TABLE t (i VARCHAR)")
            batch = pa.record_batch([pa.repeat("x" * 20, 100_000)], ["i"])
            rows = pa.Table.from_batches([batch] * 500)  # 50M rows, one batch's memory
            with interruptible("staging rows"):
                con.register("batch", rows)
                ctrl_c_soon()
                con.execute("INSERT INTO t SELECT * FROM batch")
        else:
            conn = pg.connect(sys.argv[2])
            try:
                with conn.cursor() as cur:
                    ctrl_c_soon()
                    cur.execute("SELECT pg_sleep(60)")
                    cur.fetchall()
            except pg.DRIVER_ERRORS as exc:
                raise pg.sink_error(exc, "a long statement") from None
    except BaseException as exc:
        print(type(exc).__name__, getattr(exc, "code", ""))
    else:
        print("not interrupted")
    """
)


@pytest.mark.parametrize("driver", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_ctrl_c_inside_a_driver_call_is_an_interrupt(driver: str, pg_url: str) -> None:
    """DuckDB answers a signal during a query with RuntimeError('Query interrupted') and ADBC
    with a cancelled statement (SQLSTATE 57014); neither is KeyboardInterrupt. The connectors
    give it back as DPONE_INTERRUPTED (exit 130) rather than an internal or a sink error."""
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER_INTERRUPTED, driver, pg_url],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        preexec_fn=sigint_default,
    )
    assert proc.stdout.split() == ["Interrupted", "DPONE_INTERRUPTED"], proc.stderr


@pytest.mark.parametrize(
    "raised",
    [
        RuntimeError("Query interrupted"),
        duckdb.InterruptException("INTERRUPT Error: Interrupted!"),
        duckdb.InvalidInputException(
            "Invalid Input Error: reading the schema of the object registered as 'b' failed: "
            "KeyboardInterrupt: "
        ),
    ],
    ids=["runtime-error", "interrupt-exception", "wrapped-keyboard-interrupt"],
)
def test_every_form_of_a_duckdb_interrupt_is_an_interrupt(raised: Exception) -> None:
    with pytest.raises(Interrupted), interruptible("a query"):
        raise raised


@pytest.mark.parametrize(
    "raised", [RuntimeError("something else"), duckdb.IOException("IO Error: disk")]
)
def test_other_duckdb_errors_pass_through(raised: Exception) -> None:
    with pytest.raises(type(raised)), interruptible("a query"):
        raise raised
