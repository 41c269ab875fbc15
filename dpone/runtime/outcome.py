"""What a run publishes about itself: its evidence document (SPEC §7), built from the stream.

The same builder serves a run that is about to commit (the evidence goes into the journal
before the sink commit, so recovery can publish it) and a run that failed.
"""

from __future__ import annotations

from typing import Any

from dpone.errors import DponeError
from dpone.evidence import lineage
from dpone.evidence.model import DlqEvidence, Evidence, Summary, schema_changes
from dpone.runtime.stream import Stream
from dpone.runtime.wiring import relative
from dpone.state.model import PipelineState

#: Failures that say the data broke the contract, not that the machinery broke.
QUALITY_CODES_PREFIXES = ("DPONE_CONTRACT_VIOLATION", "DPONE_SCHEMA_FROZEN", "DPONE_ASSERTION")


def evidence(
    stream: Stream,
    *,
    failure: DponeError | None,
    state: PipelineState,
    cursor_to: str | None,
) -> dict[str, Any]:
    """The evidence document of the run ``stream`` belongs to (not yet published)."""
    ctx, engine, pipe, staging = stream.ctx, stream.engine, stream.pipe, stream.staging
    plan, counts = ctx.plan, stream.counts()
    dlq_result = pipe.result
    folder = stream.parts.evidence.bundle(ctx.run_id)
    index_ref = None
    if dlq_result is not None:
        index_ref = relative(ctx.paths.dlq_dir / dlq_result.index_ref, folder)
    failure_code = failure.code if failure is not None else None
    committed_from = state.cursor.value if state.cursor else None
    loaded = counts.loaded if failure is None else 0
    doc = Evidence(
        run_id=ctx.run_id,
        pipeline=plan.name,
        manifest_fingerprint=plan.fingerprint,
        enforcement=plan.sink.contract.enforcement,
        failure_code=failure_code,
        quality_failure=bool(failure_code and failure_code.startswith(QUALITY_CODES_PREFIXES)),
        summary=Summary(
            rows_read=counts.read,
            rows_loaded=loaded,
            rows_quarantined=counts.quarantined,
            rows_warned=counts.warned,
            rows_skipped=counts.skipped,
            chunks=counts.chunks,
        ),
        violations=stream.tally.violations,
        assertions=engine.verdicts(),
        dlq=DlqEvidence(
            record_count=dlq_result.record_count if dlq_result else 0,
            reasons=dict(dlq_result.reason_counts) if dlq_result else {},
            index_ref=index_ref,
            index_fingerprint=dlq_result.fingerprint if dlq_result else None,
            run_status=dlq_result.status if dlq_result else None,
        ),
        sink={
            "type": plan.sink.type,
            "table": ctx.target,
            "load_id": ctx.load_id if failure is None else None,
            "mode": plan.sink.strategy.mode,
        },
        state={
            "advanced": failure is None and plan.state_type == "file",
            "from": committed_from,
            "to": cursor_to if failure is None else committed_from,
            "revision": state.revision + 1 if failure is None else state.revision,
        },
        started_at=ctx.started_at,
        finished_at=ctx.now(),
        schema_changes=()
        if failure is not None
        else schema_changes(
            ctx.target,
            ctx.labels.schema(staging.existing),
            ctx.labels.fields(staging.written),
        ),
        facets=lineage.facets(
            engine.verdicts(),
            rows_read=counts.read,
            rows_loaded=loaded,
            rows_quarantined=counts.quarantined,
            enforcement=plan.sink.contract.enforcement,
        ),
    )
    return doc.to_json()


__all__ = ["evidence"]
