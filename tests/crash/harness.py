"""The fault-injection harness: real ``dpone run`` processes killed at named points, an
independent model of what must survive, and the checks of SPEC §6 against the real sink.

A scenario is three CSV files written over time (chunks of :data:`CHUNK` rows):

- ``a.csv`` (10 rows): loaded by a first, uninterrupted run when the pipeline is incremental,
  so the killed run starts from a committed cursor, an existing table and a state file;
- ``b.csv`` (27 rows, bad rows spread over its chunks): added before the run that is killed
  (a subprocess that SIGKILLs itself at ``DPONE_FAULT_POINT``);
- ``c.csv`` (6 rows, plus two updates of earlier ids under ``merge``): added after the kill,
  so the rerun also sees new rows and the incremental window is exercised.

:func:`simulate` is the oracle. It knows nothing of dpone's code: from the rows, the
enforcement mode and the lifecycle order of SPEC §6 it derives which checkpoints a run passes,
where it dies, which runs commit, what each committed run loads and quarantines, and where the
cursor ends. :func:`check_outcome` then reads the sink, the load markers, the state, the DLQ and
the evidence back from disk and compares.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from dpone import durable
from dpone.dlq.refs import FileRef, parse_ref
from dpone.dlq.store import DlqStore
from dpone.ops.verification import verify_store
from dpone.published import schema_errors
from dpone.runtime.journal import RunJournal
from dpone.runtime.stage_behind import stage_depth
from tests import dltkit
from tests.support.processes import CliRun, dpone_subprocess
from tests.support.project import CANARY, Project

Mode = Literal["strict", "strict_bad", "quarantine", "warn"]
Strategy = Literal["append", "merge"]

CHUNK = 5
BASE_RUN = "base-run"
KILLED_RUN = "killed-run"
SECOND_KILLED_RUN = "killed-again"
RERUN = "rerun"

#: Inside the dlt sink's commit, after its package was recorded: the next run finishes it.
#: ``dlt_before_load`` is a fault point; the others are kills inside dlt's loader
#: (``hooked_run.py dlt_kill``): a job committed but not recorded by dlt, recorded, and every
#: job done without the ``_dlt_loads`` row.
DLT_KILLS = ("dlt_job_committed", "dlt_job_recorded", "dlt_before_dlt_loads")
DLT_POINTS = ("dlt_before_load", *DLT_KILLS)
#: Points at or after which the sink has committed: the run is finished by the next one.
COMMITTED_POINTS = (
    *DLT_POINTS,
    "after_sink_commit",
    "after_evidence",
    "during_state_replace",
    "after_state",
)
#: The checkpoints a run passes after its stream, in lifecycle order (SPEC §6).
TAIL_POINTS = ("after_dlq_close", "before_sink_commit", *COMMITTED_POINTS)

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_NAIVE_TS = "2026-03-01T10:00:00"  # no offset: breaks `timezone: true`, cursor unplaceable


# --- the source rows ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One data row of a CSV file, and what dpone must do with it."""

    file: str
    row: int  # 1-based data row, as in record_ref
    id: int | None
    name: str
    minute: int  # the cursor, in minutes after 2026-01-01T00:00Z
    bad: str | None = None  # amount | active | naive_ts | null_id | None (a good row)

    @property
    def key(self) -> tuple[str, int]:
        return (self.file, self.row)

    @property
    def cursor(self) -> datetime | None:
        """The cursor value dpone can place, or None (an unparseable cursor)."""
        return None if self.bad == "naive_ts" else _EPOCH + timedelta(minutes=self.minute)

    def fields(self) -> tuple[str | None, ...]:
        amount = "12.345" if self.bad == "amount" else f"{self.minute}.{self.row % 100:02d}"
        moment = _EPOCH + timedelta(minutes=self.minute)
        updated = _NAIVE_TS if self.bad == "naive_ts" else moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        active = "maybe" if self.bad == "active" else ("true" if self.row % 2 else "false")
        return (None if self.id is None else str(self.id), self.name, amount, updated, active)


#: Bad rows per enforcement mode: (file, row) -> what is wrong with it.
BAD_ROWS: Mapping[Mode, Mapping[tuple[str, int], str]] = {
    "strict": {},
    "strict_bad": {("b.csv", 13): "amount"},  # the third chunk of b.csv breaks the contract
    "quarantine": {
        ("a.csv", 4): "amount",
        ("b.csv", 3): "amount",
        ("b.csv", 9): "null_id",
        ("b.csv", 17): "naive_ts",
        ("b.csv", 26): "active",
        ("c.csv", 2): "active",
    },
    # Every row loads: NULL where the value does not fit. Only `active` is nullable among the
    # typed columns: a bad amount or cursor would reject its row (the table keeps NOT NULL).
    "warn": {
        ("a.csv", 4): "active",
        ("b.csv", 3): "active",
        ("b.csv", 9): "active",
        ("b.csv", 17): "active",
        ("b.csv", 26): "active",
        ("c.csv", 2): "active",
    },
}


def scenario_files(
    mode: Mode, strategy: Strategy, bad: Mapping[tuple[str, int], str] | None = None
) -> dict[str, list[SourceRow]]:
    """The rows of a.csv, b.csv and c.csv (``bad``: other bad rows than the mode's). Cursors
    grow from file to file; inside b.csv neighbours are swapped, so a file's cursor is not
    monotone."""
    bad = BAD_ROWS[mode] if bad is None else bad

    def make(file: str, row: int, ident: int, minute: int, version: int = 1) -> SourceRow:
        kind = bad.get((file, row))
        name = f"{CANARY}-{ident}" if kind else f"n{ident}v{version}"
        return SourceRow(file, row, None if kind == "null_id" else ident, name, minute, kind)

    a = [make("a.csv", i, i, i) for i in range(1, 11)]
    b = [make("b.csv", i, 10 + i, 10 + (i + 1 if i % 2 else i - 1)) for i in range(1, 28)]
    c = [make("c.csv", i, 37 + i, 49 + i) for i in range(1, 7)]
    if strategy == "merge":  # later versions of a row of a.csv and of b.csv
        c += [make("c.csv", 7, 2, 56, version=2), make("c.csv", 8, 12, 57, version=2)]
    return {"a.csv": a, "b.csv": b, "c.csv": c}


# --- the oracle -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the matrix."""

    point: str  # a fault point, ``name`` or ``name:k``
    mode: Mode
    sink: str
    strategy: Strategy
    incremental: bool

    @property
    def id(self) -> str:
        inc = "inc" if self.incremental else "full"
        return f"{self.point}-{self.mode}-{self.sink}-{self.strategy}-{inc}"

    @property
    def enforcement(self) -> str:
        return "strict" if self.mode == "strict_bad" else self.mode


@dataclass(slots=True)
class RunModel:
    """What the oracle says one run does."""

    run_id: str
    files: tuple[str, ...]
    point: str | None = None
    in_recovery: bool = False  # the point is passed while recovering the previous run
    fails: bool = False  # stops with an error before its sink commit (infrastructure, signal)
    killed: bool = False
    failed: bool = False  # stopped by the contract (strict) before its sink commit
    window: list[SourceRow] = field(default_factory=list)
    loaded: list[SourceRow] = field(default_factory=list)
    quarantined: list[SourceRow] = field(default_factory=list)
    # What its DLQ run holds when it ends: at least dlq_min, at most dlq_max (a run killed
    # while its background DLQ write is in flight may or may not have written that chunk).
    dlq_min: list[SourceRow] = field(default_factory=list)
    dlq_max: list[SourceRow] = field(default_factory=list)
    dlq_opened: bool = False  # its DLQ run exists even if it ends with no record
    cursor_to: datetime | None = None

    @property
    def committed(self) -> bool:
        if self.failed or self.in_recovery:
            return False
        return not self.killed or (self.point or "").split(":")[0] in COMMITTED_POINTS

    @property
    def exit_code(self) -> int:
        if self.killed:
            return -signal.SIGKILL
        return 1 if self.failed else 0


@dataclass(slots=True)
class Model:
    runs: list[RunModel]
    incremental: bool
    strategy: Strategy
    cursor: datetime | None = None

    def run(self, run_id: str) -> RunModel:
        return next(r for r in self.runs if r.run_id == run_id)

    @property
    def committed(self) -> list[RunModel]:
        return [r for r in self.runs if r.committed]

    def sink_rows(self) -> Counter[tuple[int | None, str]]:
        """(id, name) of every row the sink must hold, with multiplicity."""
        if self.strategy == "append":
            return Counter((r.id, r.name) for run in self.committed for r in run.loaded)
        latest: dict[int | None, str] = {}
        for run in self.committed:
            for r in run.loaded:
                latest[r.id] = r.name
        return Counter(latest.items())


def simulate(
    cell: Cell, files: Mapping[str, Sequence[SourceRow]], runs: Sequence[RunModel]
) -> Model:
    """Play the runs in order. A run reads every file present, chunk by chunk; with an
    incremental cursor it keeps the rows above the committed cursor, and the rows whose cursor
    cannot be placed that no committed run has seen yet."""
    model = Model(list(runs), cell.incremental, cell.strategy)
    unplaced: set[tuple[str, int]] = set()
    for run in model.runs:
        chunks: list[list[SourceRow]] = []  # the window's rows of each chunk read
        for file in sorted(run.files):
            rows = list(files[file])
            for start in range(0, len(rows), CHUNK):
                chunk = [r for r in rows[start : start + CHUNK] if _in_window(r, model, unplaced)]
                if cell.mode == "strict_bad" and any(r.bad for r in chunk):
                    run.failed = True  # the contract fails the run inside this chunk
                    break
                chunks.append(chunk)
            if run.failed:
                break
        run.window = [r for chunk in chunks for r in chunk]
        rejects = [[r for r in c if r.bad] if cell.mode == "quarantine" else [] for c in chunks]
        if run.fails:  # its DLQ run may hold the rejects of any chunk it reached
            run.failed = True
            run.dlq_max = [r for c in rejects for r in c]
        else:
            _play(run, rejects)
            run.failed = run.failed and not run.killed  # killed before the failing chunk
            if not run.killed:
                run.dlq_min = run.dlq_max = [r for c in rejects for r in c]
        if cell.mode == "quarantine":
            run.quarantined = [r for r in run.window if r.bad]
        run.loaded = [r for r in run.window if not r.bad or cell.mode == "warn"]
        if run.committed:
            placed = [r.cursor for r in run.window if r.cursor is not None]
            if cell.incremental:
                model.cursor = max(
                    [*placed, *([model.cursor] if model.cursor else [])], default=None
                )
                unplaced |= {r.key for r in run.window if r.cursor is None}
            run.cursor_to = model.cursor
    return model


def _in_window(row: SourceRow, model: Model, unplaced: set[tuple[str, int]]) -> bool:
    if not model.incremental:
        return True
    if row.cursor is None:
        return row.key not in unplaced
    return model.cursor is None or row.cursor > model.cursor


def _play(run: RunModel, rejects: list[list[SourceRow]]) -> None:
    """Find where the run dies (the k-th pass of its fault point) and bound what its DLQ run
    holds then.

    The main thread passes ``after_recover``, per chunk ``after_chunk_staged`` (and
    ``after_chunk_dlq`` for a chunk without rejects), then the tail points. A chunk's rejects
    are written by one background thread (``DlqPipe``): ``during_dlq_group_commit`` then
    ``after_chunk_dlq`` there, while the main thread goes on; the next chunk with rejects, or
    the DLQ close, waits for it. So at a main-thread point every chunk with rejects handed
    over before the last one is durable, and the last one may or may not be.

    On more than one core a chunk is staged by a thread of its own (``StageBehind``), which
    passes ``after_chunk_staged`` there: by then the main thread may have handed up to
    ``stage_depth(CHUNK)`` more chunks to staging and the rejects of the one after them to
    the DLQ pipe (it hands a chunk to staging after its rejects), so they may be on disk too;
    they are never required to be. The last chunks may even be staged after the main thread
    closed the DLQ run (it closes the run while they are staged): the k-th
    ``after_chunk_staged`` then finds every reject durable, which the bounds below allow.
    """
    name, _, nth = (run.point or "").partition(":")
    wanted = int(nth) if nth else 1
    if run.in_recovery:  # dies before its own journal entry: nothing of it happens
        run.killed = True
        return
    with_rejects = [c for c in rejects if c]
    if name == "during_dlq_group_commit":
        # Inside the k-th segment publish: the segment is durable under its temporary name,
        # not linked yet. Recovery removes it: the DLQ run holds the k-1 chunks before it
        # (and exists, possibly empty: the writer opened it).
        if len(with_rejects) >= wanted:
            run.killed = True
            run.dlq_opened = True
            run.dlq_min = run.dlq_max = [r for c in with_rejects[: wanted - 1] for r in c]
        return
    if name == "after_chunk_dlq":  # passed once per chunk, by either thread: order varies
        if len(rejects) >= wanted:
            run.killed = True
            run.dlq_max = [r for c in rejects for r in c]
        return
    main: list[tuple[str, int]] = [("after_recover", 0)]
    for i in range(1, len(rejects) + 1):
        main.append(("after_chunk_staged", i))
    if not run.failed:
        main += [(point, len(rejects) + 1) for point in TAIL_POINTS]
    hits = [chunk for point, chunk in main if point == name]
    if len(hits) < wanted:
        return
    run.killed = True
    handed = [c for c in rejects[: hits[wanted - 1]] if c]
    staged_ahead = stage_depth(CHUNK) if name == "after_chunk_staged" else 0
    ahead = hits[wanted - 1] + staged_ahead
    run.dlq_max = [r for c in rejects[:ahead] for r in c]
    drained = handed if hits[wanted - 1] > len(rejects) else handed[:-1]
    run.dlq_min = [r for c in drained for r in c]


def expected_recovery(model: Model, *, dlq_runs: set[str]) -> list[tuple[str, str, list[str]]]:
    """(run id, action, DLQ runs aborted) the last run must report: about the run its journal
    left ``running`` (``dlq_runs``: the DLQ run folders on disk)."""
    pending: RunModel | None = None
    for run in model.runs[:-1]:
        if run.killed and run.in_recovery:
            continue  # died recovering ``pending``: the journal still names it
        # Died after its journal entry (which says running), or else recovered ``pending``
        # and then finished, failed or died before writing its own.
        pending = run if run.killed and run.point != "after_recover" else None
    if pending is None:
        return []
    if pending.committed:
        return [(pending.run_id, "finished", [])]
    aborted = [pending.run_id] if pending.run_id in dlq_runs else []
    return [(pending.run_id, "rolled_back", aborted)]


# --- processes ------------------------------------------------------------------------------------


def dpone_env(project: Project, **extra: str) -> dict[str, str]:
    """The environment of a ``dpone`` subprocess: no inherited ``DPONE_*`` variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update(project.env)
    env.update(extra)
    return env


def run_args(project: Project) -> list[str]:
    """The command line of ``dpone run`` on the project's manifest, JSON on stdout."""
    return [sys.executable, "-m", "dpone", "run", str(project.manifest_path), "--format", "json"]


HOOKED_RUN = Path(__file__).with_name("hooked_run.py")


def hooked_args(project: Project, *hook: str) -> list[str]:
    """The command line of ``dpone run`` under a test hook (see ``hooked_run.py``)."""
    return [sys.executable, str(HOOKED_RUN), *hook, "--", *run_args(project)[3:]]


def dpone_process(
    project: Project, *args: str, fault: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``dpone run MANIFEST --format json ARGS`` as a process of its own; SIGKILLed by itself
    at ``fault`` when it gets there."""
    return dpone_subprocess(
        ["run", str(project.manifest_path), "--format", "json", *args],
        cwd=project.root,
        env=project.env,
        fault=fault,
        timeout=timeout,
    )


def killed_process(project: Project, run_id: str, point: str) -> subprocess.CompletedProcess[str]:
    """``dpone run`` as a process of its own that SIGKILLs itself at ``point``: a fault point
    of dpone, or one of :data:`DLT_KILLS` inside dlt's loader."""
    if point not in DLT_KILLS:
        return dpone_process(project, "--run-id", run_id, fault=point)
    where = point.removeprefix("dlt_")
    return subprocess.run(
        [*hooked_args(project, "dlt_kill", where, project.sink["table"]), "--run-id", run_id],
        cwd=project.root,
        env=dpone_env(project),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def in_process(project: Project, run_id: str) -> CliRun:
    """A run through the CLI in this process (what the user types, without the start-up cost);
    its report validates against ``dpone.run.v1`` and matches the exit code."""
    result = project.cli("--run-id", run_id)
    doc = result.doc
    assert schema_errors(doc, "dpone.run.v1") == []
    assert result.exit_code == doc["exit_code"], result.stderr
    assert_clean_output(result.stdout, result.stderr)
    return result


def assert_clean_output(stdout: str, stderr: str) -> None:
    """No traceback reaches a user, and no row value reaches any output."""
    assert "Traceback" not in stdout + stderr, stderr
    assert CANARY not in stdout + stderr


def log_events(stderr: str) -> list[dict[str, Any]]:
    """stderr as structlog JSON events (lines that are not JSON fail the test)."""
    events = []
    for line in stderr.splitlines():
        if line.strip():
            event = json.loads(line)
            assert isinstance(event, dict), line
            assert "event" in event, line
            events.append(event)
    return events


# --- reading the outcome --------------------------------------------------------------------------


def sink_rows(project: Project) -> Counter[tuple[int | None, str]]:
    table = project.read_table()
    if table is None:
        return Counter()
    return Counter((r["id"], r["name"]) for r in table.select(["id", "name"]).to_pylist())


def dlq_refs(store: DlqStore, run_id: str) -> list[tuple[str, int]]:
    """(file, row) of every record of a DLQ run, read through its verified index."""
    keys = []
    for record in store.iter_records(run_id):
        ref = parse_ref(record.record_ref)
        assert isinstance(ref, FileRef)
        assert ref.path.startswith("data/")
        keys.append((ref.path.removeprefix("data/"), ref.row))
    return sorted(keys)


def moment_of(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_outcome(  # noqa: C901 (one invariant per block, checked in order)
    project: Project,
    model: Model,
    files: Mapping[str, Sequence[SourceRow]],
    *,
    state_before_kill: bytes | None,
) -> None:
    """Everything SPEC §6 promises, read back from disk and the sink, against the model."""
    committed = model.committed

    # The sink: exactly the rows of the committed loads, each load committed once.
    assert sink_rows(project) == model.sink_rows()
    markers = project.load_markers()
    assert [m["run_id"] for m in markers] == [r.run_id for r in committed]
    for marker, run in zip(markers, committed, strict=True):
        assert marker["rows"] == len(run.loaded)
        assert moment_of(marker["cursor_to"]) == run.cursor_to
    _assert_no_staging(project)

    # The state: one revision per committed load, the cursor at the highest committed value.
    if not committed:
        assert project.state_bytes() is None
    elif committed[-1].run_id == BASE_RUN:
        assert project.state_bytes() == state_before_kill
    if committed:
        state = project.state()
        assert state["revision"] == len(committed)
        assert state["last_run_id"] == committed[-1].run_id
        assert state["last_load_id"] == markers[-1]["load_id"]
        cursor = state["cursor"]
        assert moment_of(cursor["value"] if cursor else None) == model.cursor
        assert (cursor["value"] if cursor else None) == markers[-1]["cursor_to"]

    # The DLQ: a closed run per committed load with bad rows, holding exactly them; the dead
    # run's records (if any) in an aborted run; nothing unindexed.
    store = project.dlq()
    assert verify_store(store) == []
    on_disk = set(store.run_ids())
    for run in model.runs:
        if run.run_id not in on_disk:
            assert run.dlq_min == [], run.run_id
            continue
        assert run.dlq_max != [] or run.dlq_opened, run.run_id
        index = project.dlq_index(run.run_id)
        assert index["status"] == ("closed" if run.committed else "aborted")
        keys = set(dlq_refs(store, run.run_id))
        assert {r.key for r in run.dlq_min} <= keys <= {r.key for r in run.dlq_max}
    assert on_disk <= {r.run_id for r in model.runs}

    # Evidence: each committed run's bundle agrees with the sink and the DLQ on disk.
    for run, marker in zip(committed, markers, strict=True):
        evidence = project.evidence(run.run_id)
        assert evidence["execution_status"] == "succeeded"
        assert evidence["summary"]["rows_loaded"] == len(run.loaded)
        assert evidence["summary"]["rows_quarantined"] == len(run.quarantined)
        assert evidence["dlq"]["record_count"] == len(run.quarantined)
        assert evidence["sink"]["load_id"] == marker["load_id"]
        assert evidence["state"]["to"] == marker["cursor_to"]
        if run.quarantined:
            index = project.dlq_index(run.run_id)
            assert evidence["dlq"]["index_fingerprint"] == index["fingerprint"]
            bundle = project.evidence_path(run.run_id).parent
            ref = (bundle / evidence["dlq"]["index_ref"]).resolve()
            assert ref == project.dlq_index_path(run.run_id)
        else:
            assert evidence["dlq"]["index_fingerprint"] is None
    for run in model.runs:
        if run.killed and not run.committed:
            assert not project.evidence_path(run.run_id).exists()
        if run.failed:
            assert project.evidence(run.run_id)["execution_status"] == "failed"

    # SPEC §6 word for word, where every row is read by one committed run (incremental): each
    # source row is in the sink once (by id) or in exactly one non-aborted DLQ run.
    if model.incremental and not model.runs[-1].failed:
        in_sink = Counter(ident for ident, _ in sink_rows(project).elements())
        in_dlq: Counter[tuple[str, int]] = Counter()
        for run_id in store.run_ids():
            if project.dlq_index(run_id)["status"] != "aborted":
                in_dlq.update(dlq_refs(store, run_id))
        for rows in files.values():
            for row in rows:
                placed = (in_sink[row.id] if row.id is not None else 0) + in_dlq[row.key]
                assert placed == 1, (row, in_sink[row.id], in_dlq[row.key])
                if in_dlq[row.key]:
                    assert row.id is None or in_sink[row.id] == 0

    # The journal names the last run; nothing dpone wrote is torn, invalid or leaks a value.
    entry = RunJournal(project.work_dir / "runs", project.name).read()
    assert entry is not None
    assert (entry.run_id, entry.phase) == (
        model.runs[-1].run_id,
        "failed" if model.runs[-1].failed else "finished",
    )
    leftovers = [p for p in project.work_dir.rglob("*") if durable.is_temp_name(p.name)]
    assert leftovers == []
    project.check_artifacts()


def _assert_no_staging(project: Project) -> None:
    if project.kind.startswith("dlt_"):
        assert dltkit.staging_left(project.work_dir, project.name) == []
        assert dltkit.pending_packages(project.work_dir, project.name) == []
    if project.kind == "duckdb":
        assert [t for t in project.duckdb_tables() if t.startswith("_dpone_stage_")] == []
    if project.kind == "filesystem":
        staging = project.lake / "_dpone_staging"
        assert not staging.exists() or list(staging.iterdir()) == []


def write_rows(project: Project, file: str, rows: Sequence[SourceRow]) -> Path:
    return project.write_csv(file, [r.fields() for r in rows])
