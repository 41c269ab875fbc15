"""``dpone.run.v1``: what ``dpone run`` prints (and keeps under ``<work_dir>/runs/``).

The report is frozen data, one frozen dataclass per section, built once when the run ends;
each section's ``to_json`` is that section of the document, so the published schema
(``schemas/dpone.run.v1.schema.json``) describes exactly these types.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any, Literal

from dpone.errors import ErrorDetail
from dpone.records import frozen

if TYPE_CHECKING:  # the report stays importable without pyarrow (evidence.model needs it)
    from dpone.contracts.names import Renamed
    from dpone.evidence.model import DataOutcome, SchemaChange

RUN_SCHEMA_ID = "dpone.run.v1"
RecoveryKind = Literal["finished", "rolled_back"]
RunStatus = Literal["succeeded", "failed"]
CursorValue = str | int | None


@frozen
class Recovery:
    """What the start of a run did about an earlier run of the pipeline that died."""

    run_id: str
    action: RecoveryKind
    reason: str
    dlq_runs_aborted: tuple[str, ...] = ()
    staging_dropped: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "action": self.action,
            "reason": self.reason,
            "dlq_runs_aborted": list(self.dlq_runs_aborted),
            "staging_dropped": list(self.staging_dropped),
        }


@frozen
class RowCounts:
    """``rows``: what the run read, loaded, quarantined, warned about and skipped."""

    read: int = 0
    loaded: int = 0
    quarantined: int = 0
    warned: int = 0
    skipped: int = 0
    #: rows older than the incremental window that no committed run read: not loaded
    late_skipped: int = 0
    chunks: int = 0
    #: bad rows kept out of the load with no DLQ record (``dlq.enabled: false``)
    dropped: int = 0

    def to_json(self) -> dict[str, int]:
        doc = {
            "read": self.read,
            "loaded": self.loaded,
            "quarantined": self.quarantined,
            "warned": self.warned,
            "skipped": self.skipped,
            "late_skipped": self.late_skipped,
            "chunks": self.chunks,
        }
        if self.dropped:  # only with dlq.enabled false, and then only when rows were rejected
            doc["dropped"] = self.dropped
        return doc


@frozen
class RunProgress(RowCounts):
    """What a run's progress callback gets after each chunk: the counts so far and, when the
    source knows its size (file sources), the bytes read of it and its total size."""

    bytes_read: int | None = None
    bytes_total: int | None = None

    @classmethod
    def of(
        cls, counts: RowCounts, *, bytes_read: int | None, bytes_total: int | None
    ) -> RunProgress:
        rows = {f.name: getattr(counts, f.name) for f in fields(RowCounts)}
        return cls(**rows, bytes_read=bytes_read, bytes_total=bytes_total)


@frozen
class DlqSection:
    """``dlq``: where the run's dead letters are (``directory`` None: ``dlq.enabled`` false;
    ``run_id`` None: nothing reached the DLQ)."""

    directory: str | None
    run_id: str | None = None
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"directory": self.directory, "run_id": self.run_id, "records": self.records}


@frozen
class SinkSection:
    """``sink``: the run's load and whether it committed."""

    type: str
    table: str
    load_id: str
    committed: bool = False
    #: with child tables: each one the load committed rows into, and how many
    child_tables: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": self.type,
            "table": self.table,
            "load_id": self.load_id,
            "committed": self.committed,
        }
        if self.child_tables:
            doc["child_tables"] = [{"table": t, "rows_loaded": n} for t, n in self.child_tables]
        return doc


@frozen
class StateSection:
    """``state``: the move of the pipeline's state (``from``/``to`` are its cursor)."""

    advanced: bool
    cursor_from: CursorValue
    cursor_to: CursorValue
    revision: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "advanced": self.advanced,
            "from": self.cursor_from,
            "to": self.cursor_to,
            "revision": self.revision,
        }


@frozen
class StageSeconds:
    """Seconds the run's main thread spent in each stage (``time.perf_counter``, always on).

    ``read``: waiting for the source's next chunk (with read-ahead, only the wait the reading
    thread did not hide); ``enforce``: the contract and the assertions; ``dlq``: building the
    rejected rows' records, handing them to the DLQ writer thread, waiting for it and closing
    the DLQ run; ``dlq_writer``: the writer thread's own time writing records (it overlaps
    the other stages, so it is not part of their sum); ``sink_write``: staging valid rows in
    the sink, or with a staging thread handing them to it and waiting for it;
    ``sink_writer``: the staging thread's own time (overlapping, not part of the sum);
    ``commit``: the sink commit."""

    read: float = 0.0
    enforce: float = 0.0
    dlq: float = 0.0
    dlq_writer: float = 0.0
    sink_write: float = 0.0
    sink_writer: float = 0.0
    commit: float = 0.0

    def to_json(self, total: float) -> dict[str, float]:
        doc = {f.name: round(getattr(self, f.name), 6) for f in fields(StageSeconds)}
        return doc | {"total": round(total, 6)}


@frozen
class Timings:
    """When the run started and finished (ISO-8601 UTC), its wall time and its stages."""

    started_at: str
    finished_at: str | None = None
    duration_s: float = 0.0
    stages: StageSeconds = StageSeconds()


@frozen
class Hint:
    """What to change so that rejected rows load, or a warning the counts alone hide.

    Built from counts and from the fixed null markers only: never a row value."""

    code: str
    message: str
    column: str | None = None
    fix: str | None = None
    rows: int | None = None

    @property
    def warning(self) -> bool:
        """A warning of its own line (the run loaded nothing, a column rejected every row)."""
        return self.code in WARNING_HINTS

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "column": self.column,
            "fix": self.fix,
            "rows": self.rows,
        }


#: Hints that are warnings: the run's counts look like success and are not.
WARNING_HINTS = frozenset({"nothing_loaded", "column_all_rejected"})


@frozen
class RunReport:
    """One run's outcome (``dpone.run.v1``); ``error`` is None when it succeeded."""

    run_id: str
    load_id: str
    pipeline: str
    status: RunStatus
    data_outcome: DataOutcome | None
    exit_code: int
    timings: Timings
    rows: RowCounts
    dlq: DlqSection
    sink: SinkSection
    state: StateSection
    evidence: str | None = None
    schema_changes: tuple[SchemaChange, ...] = ()
    recovered: tuple[Recovery, ...] = ()
    error: ErrorDetail | None = None
    #: source columns the run names otherwise than the source wrote them (docs/sinks.md)
    renamed_columns: tuple[Renamed, ...] = ()
    hints: tuple[Hint, ...] = ()

    @property
    def started_at(self) -> str:
        return self.timings.started_at

    @property
    def finished_at(self) -> str | None:
        return self.timings.finished_at

    @property
    def duration_s(self) -> float:
        return self.timings.duration_s

    @property
    def rows_per_s(self) -> float:
        duration = self.timings.duration_s
        return round(self.rows.read / duration, 1) if duration > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RUN_SCHEMA_ID,
            "run_id": self.run_id,
            "load_id": self.load_id,
            "pipeline": self.pipeline,
            "status": self.status,
            "data_outcome": self.data_outcome,
            "exit_code": self.exit_code,
            "started_at": self.timings.started_at,
            "finished_at": self.timings.finished_at,
            "duration_s": round(self.timings.duration_s, 3),
            "rows_per_s": self.rows_per_s,
            "timings": self.timings.stages.to_json(self.timings.duration_s),
            "rows": self.rows.to_json(),
            "dlq": self.dlq.to_json(),
            "evidence": self.evidence,
            "sink": self.sink.to_json(),
            "state": self.state.to_json(),
            "schema_changes": [c.to_json() for c in self.schema_changes],
            "renamed_columns": [r.to_json() for r in self.renamed_columns],
            "recovered": [r.to_json() for r in self.recovered],
            "error": None if self.error is None else self.error.to_json(),
            "hints": [h.to_json() for h in self.hints],
        }
