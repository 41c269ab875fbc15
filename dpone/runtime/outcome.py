"""What a run publishes about itself: its evidence (SPEC §7), built from the stream.

The same builder serves a run that is about to commit (the evidence goes into the journal
before the sink commit, so recovery can publish it) and a run that failed.
"""

from __future__ import annotations

from typing import Any

from dpone.assertions.engine import AssertionFailed
from dpone.connectors.errors import PrevalidatedFileError
from dpone.contracts.errors import ContractViolation, SchemaFrozen
from dpone.errors import DponeError
from dpone.evidence import lineage
from dpone.evidence.compatibility import compatibility
from dpone.evidence.model import DlqEvidence, Evidence, Summary, schema_changes
from dpone.runtime.report import StateSection
from dpone.runtime.stream import Stream
from dpone.runtime.wiring import relative

#: Failures that say the data broke the contract or an assertion, not that the machinery broke
#: (the evidence's ``failed_quality_gate``).
QUALITY_FAILURES: tuple[type[DponeError], ...] = (ContractViolation, SchemaFrozen, AssertionFailed)
#: A prevalidated file whose columns, types or NULLs break the contract: the data's failure
#: too (an unreadable, unmarked or foreign-marked file is the producer's machinery's).
PREVALIDATED_QUALITY_CODES = ("DPONE_PREVALIDATED_SCHEMA", "DPONE_PREVALIDATED_NULLS")


def is_quality_failure(failure: DponeError | None) -> bool:
    if isinstance(failure, PrevalidatedFileError):
        return failure.code in PREVALIDATED_QUALITY_CODES
    return isinstance(failure, QUALITY_FAILURES)


def evidence(
    stream: Stream,
    *,
    failure: DponeError | None,
    move: StateSection,
) -> Evidence:
    """The evidence of the run ``stream`` belongs to (not yet published); ``move`` is the
    state move the run decided (``runtime/commit.py``)."""
    ctx, engine, pipe, staging = stream.ctx, stream.engine, stream.pipe, stream.staging
    plan, counts = ctx.plan, stream.counts()
    dlq_result = pipe.result
    folder = stream.parts.evidence.bundle(ctx.run_id)
    index_ref = None
    if dlq_result is not None:
        index_ref = relative(ctx.paths.dlq_dir / dlq_result.index_ref, folder)
    loaded = counts.loaded if failure is None else 0
    root_changes = (
        () if failure is not None else schema_changes(ctx.target, staging.existing, staging.written)
    )
    changes = root_changes
    if failure is None and stream.children is not None:
        changes += stream.children.schema_changes()  # the compatibility judges the root's
    ddl = staging.target_definition() if failure is None else None
    return Evidence(
        run_id=ctx.run_id,
        pipeline=plan.name,
        manifest_fingerprint=plan.fingerprint,
        enforcement=plan.sink.contract.enforcement,
        failure_code=failure.code if failure is not None else None,
        failure_record_refs=failure.record_refs if failure is not None else (),
        quality_failure=is_quality_failure(failure),
        summary=Summary(
            rows_read=counts.read,
            rows_loaded=loaded,
            rows_quarantined=counts.quarantined,
            rows_warned=counts.warned,
            rows_skipped=counts.skipped,
            rows_late_skipped=counts.late_skipped,
            chunks=counts.chunks,
            rows_dropped=counts.dropped,
        ),
        violations=dict(stream.tally.violations),
        assertions=engine.verdicts(),
        dlq=DlqEvidence(
            record_count=dlq_result.record_count if dlq_result else 0,
            reasons=dict(dlq_result.reason_counts) if dlq_result else {},
            index_ref=index_ref,
            index_fingerprint=dlq_result.fingerprint if dlq_result else None,
            run_status=dlq_result.status if dlq_result else None,
            record_ids=dlq_result.record_ids if dlq_result else (),
        ),
        sink={
            "type": plan.sink.type,
            "table": ctx.target,
            "load_id": ctx.load_id if failure is None else None,
            "mode": plan.sink.strategy.mode,
        },
        state=move.to_json(),
        started_at=ctx.started_at,
        finished_at=ctx.now(),
        schema_changes=changes,
        ddl=ddl.to_json() if ddl is not None else None,
        compatibility=None
        if failure is not None
        else compatibility(ctx.target, staging.existing, staging.written, root_changes).to_json(),
        scale_out=_section(stream, "scale_out"),
        prevalidated=_section(stream, "prevalidated"),
        hints=tuple(h.to_json() for h in stream.hints(loaded=loaded)),
        facets=lineage.facets(
            engine.verdicts(),
            rows_read=counts.read,
            rows_loaded=loaded,
            rows_quarantined=counts.quarantined,
            enforcement=plan.sink.contract.enforcement,
            params=lineage.run_params(
                manifest_fingerprint=plan.fingerprint,
                mode=plan.sink.strategy.mode,
                engine=plan.runtime.engine,
            ),
            assertion_params_by_name={a.name: a.params for a in plan.quality.assertions},
        ),
    )


def _section(stream: Stream, name: str) -> dict[str, Any] | None:
    """The evidence section ``name`` of the stream's other reader, when it has that one."""
    reader = stream.scale_out
    return reader.evidence() if reader is not None and reader.section == name else None


__all__ = ["QUALITY_FAILURES", "evidence", "is_quality_failure"]
