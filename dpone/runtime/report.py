"""``dpone.run.v1``: what ``dpone run`` prints (and keeps under ``<work_dir>/runs/``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

RUN_SCHEMA_ID = "dpone.run.v1"
RecoveryKind = Literal["finished", "rolled_back"]


@dataclass(frozen=True, slots=True)
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


@dataclass(slots=True)
class RowCounts:
    read: int = 0
    loaded: int = 0
    quarantined: int = 0
    warned: int = 0
    skipped: int = 0
    chunks: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "read": self.read,
            "loaded": self.loaded,
            "quarantined": self.quarantined,
            "warned": self.warned,
            "skipped": self.skipped,
            "chunks": self.chunks,
        }


@dataclass(slots=True)
class RunReport:
    run_id: str
    load_id: str
    pipeline: str
    started_at: str
    status: Literal["succeeded", "failed"] = "failed"
    data_outcome: str | None = None
    exit_code: int = 1
    finished_at: str | None = None
    duration_s: float = 0.0
    rows: RowCounts = field(default_factory=RowCounts)
    dlq: dict[str, Any] = field(default_factory=dict)
    evidence: str | None = None
    sink: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    recovered: list[Recovery] = field(default_factory=list)
    error: dict[str, Any] | None = None
    schema_changes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return round(self.rows.read / self.duration_s, 1) if self.duration_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RUN_SCHEMA_ID,
            "run_id": self.run_id,
            "load_id": self.load_id,
            "pipeline": self.pipeline,
            "status": self.status,
            "data_outcome": self.data_outcome,
            "exit_code": self.exit_code,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration_s": round(self.duration_s, 3),
            "rows_per_s": self.rows_per_s,
            "rows": self.rows.to_json(),
            "dlq": self.dlq,
            "evidence": self.evidence,
            "sink": self.sink,
            "state": self.state,
            "schema_changes": self.schema_changes,
            "recovered": [r.to_json() for r in self.recovered],
            "error": self.error,
        }


def render_text(doc: dict[str, Any]) -> str:
    rows = doc["rows"]
    head = "succeeded" if doc["status"] == "succeeded" else "FAILED"
    lines = [
        f"dpone run {doc['pipeline']} {head}"
        + (f" ({doc['data_outcome']})" if doc["data_outcome"] else ""),
        f"  run        {doc['run_id']}",
        f"  rows       read {rows['read']:,}  loaded {rows['loaded']:,}  "
        f"quarantined {rows['quarantined']:,}  warned {rows['warned']:,}  "
        f"skipped {rows['skipped']:,}",
        f"  time       {doc['duration_s']:.2f}s  ({doc['rows_per_s']:,.0f} rows/s)",
    ]
    sink = doc["sink"]
    if sink:
        committed = "committed" if sink.get("committed") else "not committed"
        lines.append(
            f"  sink       {sink['type']} {sink['table']}  load {sink['load_id']} {committed}"
        )
    dlq = doc["dlq"]
    if dlq.get("records"):
        lines.append(
            f"  dlq        {dlq['records']} record(s) in {dlq['directory']}  (run {dlq['run_id']})"
        )
    for change in doc.get("schema_changes", []):
        what = change["change"].replace("_", " ")
        column = f" {change['column']} {change['type']}" if change["column"] else ""
        lines.append(f"  schema     {change['table']}{column}: {what}")
    if doc["evidence"]:
        lines.append(f"  evidence   {doc['evidence']}")
    state = doc["state"]
    if state:
        moved = "advanced" if state.get("advanced") else "unchanged"
        lines.append(f"  state      {moved}  {state.get('from')!r} → {state.get('to')!r}")
    for rec in doc["recovered"]:
        lines.append(f"  recovered  run {rec['run_id']}: {rec['action']} ({rec['reason']})")
    if doc["error"]:
        err = doc["error"]
        lines.append(f"  error      {err['code']}: {err['message']}")
        lines.extend(f"             fix: {fix}" for fix in err.get("fixes", []))
    return "\n".join(lines)
