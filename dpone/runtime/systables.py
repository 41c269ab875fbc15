"""A run's rows for the sink's system tables (``sink.options.system_tables``, SPEC §7).

A run that commits hands its ``_dpone_runs`` row and one ``_dpone_rejected`` row per record
of its DLQ run (read back from the closed run, verified) to its load, which inserts them in
the commit's own transaction. A run that fails records its row afterwards, in a transaction of
its own and on a best-effort basis: if even that fails, it is logged and the run reports its
own error, never this one.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from dpone.connectors.base import RecordsRuns, Sink
from dpone.connectors.errors import SinkConfigError
from dpone.errors import DponeError
from dpone.logs import get_logger
from dpone.manifest.plan import Plan
from dpone.runtime.context import RunContext
from dpone.runtime.report import RowCounts
from dpone.runtime.stream import Stream

if TYPE_CHECKING:
    from dpone.connectors.systables import RunRow, SystemRows

log = get_logger("dpone.run")


def preflight(plan: Plan, sink: Sink) -> None:
    """Refuse, before anything is read, a sink that cannot keep the system tables (the
    compiler refuses such a manifest; a sink passed in by a caller may still be one)."""
    if plan.sink.system_tables and not isinstance(sink, RecordsRuns):
        raise SinkConfigError(
            "sink.options.system_tables is on, but this sink cannot keep the system tables",
            code="DPONE_MANIFEST_SINK_OPTION",
            fixes=("load into a duckdb or postgres sink, or remove system_tables",),
        )


def _row(
    ctx: RunContext,
    counts: RowCounts,
    *,
    data_outcome: str | None,
    error: DponeError | None = None,
) -> RunRow:
    # The system tables' module is imported by a run that keeps them, not by every run.
    from dpone.connectors.systables import RunRow, error_summary

    return RunRow(
        run_id=ctx.run_id,
        pipeline=ctx.plan.name,
        load_id=ctx.load_id,
        target=ctx.target,
        started_at=datetime.fromisoformat(ctx.started_at),
        finished_at=ctx.clock(),
        execution_status="succeeded" if error is None else "failed",
        data_outcome=data_outcome,
        rows_read=counts.read,
        rows_loaded=counts.loaded,
        rows_quarantined=counts.quarantined,
        error_code=None if error is None else error.code,
        error_summary=None if error is None else error_summary(error.code, error.message),
    )


def committed_rows(ctx: RunContext, stream: Stream, data_outcome: str) -> SystemRows:
    """What the run's commit adds to the system tables. Reads the run's DLQ records back
    through the store (checksums verified); their values only under ``preserve``."""
    from dpone.connectors.systables import SystemRows, rejected_table

    plan, dlq = ctx.plan, stream.parts.dlq
    records = dlq.iter_records(ctx.run_id) if dlq is not None and stream.pipe.used else ()
    preserve = plan.sink.dlq.pii_policy == "preserve"
    return SystemRows(
        run=_row(ctx, stream.counts(), data_outcome=data_outcome),
        rejected=rejected_table(plan.name, records, with_values=preserve),
    )


def record_failure(
    ctx: RunContext, sink: Sink, counts: RowCounts, err: DponeError, data_outcome: str | None
) -> None:
    """The failed run's ``_dpone_runs`` row, in a transaction of its own; best effort."""
    if not ctx.plan.sink.system_tables or not isinstance(sink, RecordsRuns):
        return
    try:
        sink.record_run(_row(ctx, counts, data_outcome=data_outcome, error=err))
    except Exception as exc:  # the run's own error is what the run reports
        code = exc.code if isinstance(exc, DponeError) else type(exc).__name__
        log.warning("system_tables.run_not_recorded", run_id=ctx.run_id, code=code)


__all__ = ["committed_rows", "preflight", "record_failure"]
