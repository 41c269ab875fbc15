"""What a pipeline holds, read back from its work dir (``dpone pipeline list|info|runs``).

The state and its cursor (``dpone.state.v1``), the run journal, the runs with their outcomes
and counts (from the evidence bundles), the DLQ runs (counts and bytes per run) and the sink
table as the evidence recorded it. Nothing here changes a file; :mod:`dpone.ops.pipeline_changes`
does, under the pipeline's lock. Only names, codes and counts are shown: never a row value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, get_args

from dpone.errors import DponeError
from dpone.ops.pipeline_files import (
    PipelineDirs,
    PipelineNotFound,
    check_name,
    evidence_docs,
)
from dpone.records import frozen

#: How many runs ``info`` shows (``runs`` takes a ``limit``).
INFO_RUNS = 5
INFO_SCHEMA = "dpone.pipeline-info.v1"
#: What reading a state file or a journal found (the schemas' ``status`` enums).
ReadStatus = Literal["none", "ok", "invalid"]
READ_STATUSES: tuple[str, ...] = get_args(ReadStatus)
LIST_SCHEMA = "dpone.pipeline-list.v1"


@frozen
class StateView:
    """The committed state: ``status`` is ``none`` (never committed), ``ok`` or ``invalid``
    (``code`` says why: it does not verify, so no run will start until it is reset)."""

    status: ReadStatus
    revision: int | None = None
    cursor_column: str | None = None
    cursor_type: str | None = None
    cursor_value: str | int | None = None
    last_run_id: str | None = None
    updated_at: str | None = None
    code: str | None = None

    @property
    def cursor_text(self) -> str:
        """The cursor in words, as the run report prints it."""
        if self.status == "none":
            return "none (no state: the next run starts from initial_value, or reads everything)"
        if self.status == "invalid":
            return f"unknown (the state file does not verify: {self.code})"
        if self.cursor_column is None:
            return "none (no incremental cursor committed)"
        value = "none" if self.cursor_value is None else str(self.cursor_value)
        return f"{self.cursor_column} {value} ({self.cursor_type})"

    def to_json(self) -> dict[str, Any]:
        cursor = None
        if self.cursor_column is not None:
            cursor = {
                "column": self.cursor_column,
                "type": self.cursor_type,
                "value": self.cursor_value,
            }
        return {
            "status": self.status,
            "revision": self.revision,
            "cursor": cursor,
            "cursor_text": self.cursor_text,
            "last_run_id": self.last_run_id,
            "updated_at": self.updated_at,
            "code": self.code,
        }


@frozen
class JournalView:
    """The run journal: ``none``, or the last run's ``phase``; ``invalid`` with its code."""

    status: ReadStatus
    phase: str | None = None
    run_id: str | None = None
    code: str | None = None

    @property
    def unfinished(self) -> bool:
        """A run died midway: the next run (or recovery) finishes or rolls it back."""
        return self.status == "ok" and self.phase == "running"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "phase": self.phase,
            "run_id": self.run_id,
            "code": self.code,
        }


@frozen
class RunView:
    """One run as its evidence bundle recorded it (counts, outcome, sink, state move)."""

    run_id: str
    started_at: str
    finished_at: str
    execution_status: str
    data_outcome: str
    failure_code: str | None
    rows: Mapping[str, int]
    dlq_records: int
    sink_type: str
    table: str
    mode: str | None
    load_id: str | None
    state_advanced: bool
    cursor_from: str | int | None
    cursor_to: str | int | None
    violations: tuple[tuple[str, str, int], ...] = ()
    schema_changes: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> RunView:
        summary, sink, state = doc["summary"], doc["sink"], doc["state"]
        return cls(
            run_id=doc["run_id"],
            started_at=doc["started_at"],
            finished_at=doc["finished_at"],
            execution_status=doc["execution_status"],
            data_outcome=doc["data_outcome"],
            failure_code=doc["failure_code"],
            rows={
                "read": summary["rows_read"],
                "loaded": summary["rows_loaded"],
                "quarantined": summary["rows_quarantined"],
                "warned": summary["rows_warned"],
                "skipped": summary["rows_skipped"],
            },
            dlq_records=doc["dlq"]["record_count"],
            sink_type=sink["type"],
            table=sink["table"],
            mode=sink.get("mode"),
            load_id=sink["load_id"],
            state_advanced=state["advanced"],
            cursor_from=state["from"],
            cursor_to=state["to"],
            violations=tuple((v["column"], v["reason"], v["count"]) for v in doc["violations"]),
            schema_changes=tuple(doc["schema_changes"]),
        )

    @property
    def committed(self) -> bool:
        return self.execution_status == "succeeded" and self.load_id is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "execution_status": self.execution_status,
            "data_outcome": self.data_outcome,
            "failure_code": self.failure_code,
            "rows": dict(self.rows),
            "dlq_records": self.dlq_records,
            "sink": {"type": self.sink_type, "table": self.table, "mode": self.mode},
            "load_id": self.load_id,
            "state": {
                "advanced": self.state_advanced,
                "from": self.cursor_from,
                "to": self.cursor_to,
            },
            "violations": [{"column": c, "reason": r, "count": n} for c, r, n in self.violations],
            "schema_changes": [dict(c) for c in self.schema_changes],
        }


@frozen
class DlqRunView:
    """One DLQ run of the pipeline: its status, records per reason and bytes on disk."""

    run_id: str
    status: str
    records: int
    bytes: int
    by_reason: Mapping[str, int] = field(default_factory=dict)
    code: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "records": self.records,
            "bytes": self.bytes,
            "by_reason": dict(self.by_reason),
            "code": self.code,
        }


@frozen
class PipelineInfo:
    """``dpone pipeline info NAME`` (``runs`` holds the last runs, newest first)."""

    name: str
    work_dir: str
    state: StateView
    journal: JournalView
    runs: tuple[RunView, ...]
    run_count: int
    dlq_runs: tuple[DlqRunView, ...]
    unreadable: tuple[tuple[str, str], ...] = ()

    @property
    def sink(self) -> Mapping[str, Any] | None:
        """The sink table as the newest run's evidence recorded it."""
        if not self.runs:
            return None
        run = self.runs[0]
        return {"type": run.sink_type, "table": run.table, "mode": run.mode}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": INFO_SCHEMA,
            "pipeline": self.name,
            "work_dir": self.work_dir,
            "state": self.state.to_json(),
            "journal": self.journal.to_json(),
            "sink": None if self.sink is None else dict(self.sink),
            "run_count": self.run_count,
            "runs": [r.to_json() for r in self.runs],
            "dlq_runs": [d.to_json() for d in self.dlq_runs],
            "unreadable": [{"run": r, "problem": why} for r, why in self.unreadable],
        }


@frozen
class PipelineList:
    """``dpone pipeline list``: every pipeline of a work dir, with its state and last run."""

    work_dir: str
    pipelines: tuple[PipelineInfo, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": LIST_SCHEMA,
            "work_dir": self.work_dir,
            "pipelines": [
                {
                    "pipeline": p.name,
                    "state": p.state.status,
                    "cursor_text": p.state.cursor_text,
                    "run_count": p.run_count,
                    "last_run": p.runs[0].to_json() if p.runs else None,
                    "sink": None if p.sink is None else dict(p.sink),
                }
                for p in self.pipelines
            ],
        }


def read_state(dirs: PipelineDirs, name: str) -> StateView:
    from dpone.state.store import StateStore

    path = dirs.state_file(name)
    if path.is_symlink():
        return StateView("invalid", code="DPONE_STATE_INVALID")
    try:
        state = StateStore(dirs.state_dir).read(name)
    except DponeError as err:
        return StateView("invalid", code=err.code)
    if state.revision == 0 and not os.path.lexists(path):
        return StateView("none")
    cursor = state.cursor
    return StateView(
        "ok",
        revision=state.revision,
        cursor_column=cursor.column if cursor else None,
        cursor_type=cursor.type if cursor else None,
        cursor_value=cursor.value if cursor else None,
        last_run_id=state.last_run_id,
        updated_at=state.updated_at,
    )


def read_journal(dirs: PipelineDirs, name: str) -> JournalView:
    from dpone.runtime.journal import RunJournal

    try:
        entry = RunJournal(dirs.runs_dir, check_name(name)).read()
    except DponeError as err:
        return JournalView("invalid", code=err.code)
    if entry is None:
        return JournalView("none")
    return JournalView("ok", phase=entry.phase, run_id=entry.run_id)


#: Every DLQ run of a store with the pipeline its index names (None: it does not verify,
#: so whose run it is cannot be told; it is shown with every pipeline).
DlqRuns = tuple[tuple[str | None, DlqRunView], ...]


def dlq_runs(dirs: PipelineDirs) -> DlqRuns:
    """Every run of the DLQ store, each index read (and verified) once."""
    from dpone.dlq.layout import RUNS_DIR
    from dpone.dlq.segments import SEGMENTS_DIR
    from dpone.dlq.store import DlqStore

    root = dirs.dlq_dir
    if not (root / RUNS_DIR).is_dir():
        return ()
    store = DlqStore(root)
    try:
        run_ids = store.run_ids()
    except DponeError as err:  # runs/ itself is not a plain folder: no run can be trusted
        return ((None, DlqRunView("(the store)", "unreadable", 0, 0, code=err.code)),)
    views: list[tuple[str | None, DlqRunView]] = []
    for run_id in run_ids:
        try:
            index = store.read_index(run_id)
        except DponeError as err:
            views.append((None, DlqRunView(run_id, "unreadable", 0, 0, code=err.code)))
            continue
        folder = root / RUNS_DIR / run_id / SEGMENTS_DIR
        size = sum(_size(folder / seg.name) for seg in index.segments)
        view = DlqRunView(run_id, index.status, index.record_count, size, index.reason_counts)
        views.append((index.pipeline, view))
    return tuple(views)


def read_dlq_runs(
    dirs: PipelineDirs, name: str, runs: DlqRuns | None = None
) -> tuple[DlqRunView, ...]:
    """The pipeline's DLQ runs (those whose index names it), oldest first."""
    every = dlq_runs(dirs) if runs is None else runs
    return tuple(view for pipeline, view in every if pipeline in (name, None))


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def pipeline_info(
    name: str,
    dirs: PipelineDirs,
    *,
    limit: int | None = INFO_RUNS,
    must_exist: bool = True,
    dlq: DlqRuns | None = None,
) -> PipelineInfo:
    """Everything ``info`` shows; ``limit`` runs (None: all of them), newest first. ``dlq``:
    the store's runs already read (:func:`dlq_runs`), for many pipelines at once."""
    check_name(name)
    if must_exist and name not in dirs.names():
        raise PipelineNotFound(
            f"the work dir {dirs.work_dir} holds no pipeline '{name}'",
            fixes=("`dpone pipeline list --work-dir DIR` lists the pipelines it holds",),
        )
    docs, problems = evidence_docs(dirs, name)
    runs = tuple(RunView.of(d) for d in reversed(docs))
    return PipelineInfo(
        name=name,
        work_dir=os.fspath(dirs.work_dir),
        state=read_state(dirs, name),
        journal=read_journal(dirs, name),
        runs=runs if limit is None else runs[:limit],
        run_count=len(runs),
        dlq_runs=read_dlq_runs(dirs, name, dlq),
        unreadable=tuple(problems),
    )


def pipeline_list(dirs: PipelineDirs) -> PipelineList:
    dlq = dlq_runs(dirs)
    return PipelineList(
        os.fspath(dirs.work_dir),
        tuple(pipeline_info(n, dirs, limit=1, must_exist=False, dlq=dlq) for n in dirs.names()),
    )


__all__ = [
    "INFO_SCHEMA",
    "LIST_SCHEMA",
    "READ_STATUSES",
    "DlqRunView",
    "JournalView",
    "PipelineInfo",
    "PipelineList",
    "RunView",
    "StateView",
    "dlq_runs",
    "pipeline_info",
    "pipeline_list",
    "read_dlq_runs",
    "read_journal",
    "read_state",
]
