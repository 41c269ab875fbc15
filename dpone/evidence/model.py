"""``dpone.data_contract_evidence.v1``: one run's outcome, without a single row value (SPEC §7).

Pure data. ``execution_status`` and ``data_outcome`` are computed from the counts and
verdicts, never passed in, so a bundle cannot claim more than it shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

import pyarrow as pa

from dpone.assertions.spec import AssertionVerdict
from dpone.contracts.spec import VARIANT_PREFIX
from dpone.contracts.types import TYPE_METADATA_KEY
from dpone.records import frozen

EVIDENCE_SCHEMA_ID = "dpone.data_contract_evidence.v1"
ExecutionStatus = Literal["succeeded", "failed"]
DataOutcome = Literal[
    "passed", "passed_with_quarantine", "passed_with_warnings", "failed_quality_gate"
]


@frozen
class Summary:
    """The run's row counts and its number of chunks (the evidence's ``summary``)."""

    rows_read: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0
    rows_warned: int = 0
    rows_skipped: int = 0
    rows_late_skipped: int = 0
    chunks: int = 0
    #: bad rows kept out of the load with no DLQ record (``dlq.enabled: false``)
    rows_dropped: int = 0

    def to_json(self) -> dict[str, int]:
        doc = {
            "rows_read": self.rows_read,
            "rows_loaded": self.rows_loaded,
            "rows_quarantined": self.rows_quarantined,
            "rows_warned": self.rows_warned,
            "rows_skipped": self.rows_skipped,
            "rows_late_skipped": self.rows_late_skipped,
            "chunks": self.chunks,
        }
        if self.rows_dropped:  # only with dlq.enabled false, and then only when rows were rejected
            doc["rows_dropped"] = self.rows_dropped
        return doc


#: How many record ids of the DLQ run the evidence names (SPEC §7: bounded).
MAX_RECORD_IDS = 100


@frozen
class DlqEvidence:
    """The evidence's ``dlq``: the run's DLQ records by reason, and the index that lists them."""

    record_count: int
    reasons: Mapping[str, int]
    index_ref: str | None
    index_fingerprint: str | None
    run_status: str | None
    #: the run's record ids in the index's order (sorted); the bundle names the first
    #: :data:`MAX_RECORD_IDS`, ``record_count`` is the total
    record_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "record_count": self.record_count,
            "reasons": dict(sorted(self.reasons.items())),
            "index_ref": self.index_ref,
            "index_fingerprint": self.index_fingerprint,
            "run_status": self.run_status,
            "record_ids": list(self.record_ids[:MAX_RECORD_IDS]),
            "record_ids_truncated": len(self.record_ids) > MAX_RECORD_IDS,
        }


SchemaChangeKind = Literal["table_created", "column_added", "variant_column_created"]


@frozen
class SchemaChange:
    """One change this run made to the sink's schema (SPEC §7); names and types, no values."""

    change: SchemaChangeKind
    table: str
    column: str | None = None
    type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "table": self.table,
            "column": self.column,
            "type": self.type,
        }


def schema_changes(
    table: str, existing: pa.Schema | None, written: Mapping[str, pa.Field]
) -> tuple[SchemaChange, ...]:
    """What a load of the ``written`` columns changes in ``table`` (``existing``: its schema
    before the load, None when absent): the table it creates, or the columns it adds to an
    existing one; variant columns are named as such either way."""
    changes: list[SchemaChange] = []
    if existing is None:
        changes.append(SchemaChange("table_created", table))
    before = set(existing.names) if existing is not None else set()
    for name, f in written.items():
        if name in before:
            continue
        if name.startswith(VARIANT_PREFIX):
            changes.append(SchemaChange("variant_column_created", table, name, "string"))
        elif existing is not None:
            label = (f.metadata or {}).get(TYPE_METADATA_KEY, str(f.type).encode())
            changes.append(SchemaChange("column_added", table, name, label.decode()))
    return tuple(changes)


@frozen
class Evidence:
    """One run's ``dpone.data_contract_evidence.v1`` bundle: what it did, without a row value."""

    run_id: str
    pipeline: str
    manifest_fingerprint: str
    enforcement: str
    failure_code: str | None
    """The code of the error that failed the run, or None when it succeeded."""
    quality_failure: bool
    """Whether that failure was the data's (contract, assertion, frozen schema), not the infra's."""
    summary: Summary
    violations: Mapping[tuple[str, str], int]
    assertions: tuple[AssertionVerdict, ...]
    dlq: DlqEvidence
    sink: Mapping[str, Any]
    state: Mapping[str, Any]
    started_at: str
    finished_at: str
    facets: Mapping[str, Any] = field(default_factory=dict)
    schema_changes: tuple[SchemaChange, ...] = ()
    #: ``engine: dask`` only (SPEC §12): per-partition counts, and why the source ran as one
    #: partition when it did
    scale_out: Mapping[str, Any] | None = None
    #: ``source.prevalidated`` only: the contract fingerprint, the checks every file passed,
    #: and the files (as the manifest's glob spells them) with their rows and SHA-256
    prevalidated: Mapping[str, Any] | None = None
    #: a strict contract failure's first failing rows, by record_ref (never values)
    failure_record_refs: tuple[str, ...] = ()
    #: the run report's hints (``dpone.run.v1`` ``hints``), when it has any
    hints: tuple[Mapping[str, Any], ...] = ()
    #: the target table as the sink reports it after the load (``TableDefinition.to_json``);
    #: None when the run failed or the sink cannot describe its table
    ddl: Mapping[str, Any] | None = None
    #: the schema changes classified additive or breaking (``CompatibilityReport.to_json``);
    #: None when the run failed (nothing committed)
    compatibility: Mapping[str, Any] | None = None

    @property
    def execution_status(self) -> ExecutionStatus:
        return "failed" if self.failure_code else "succeeded"

    @property
    def data_outcome(self) -> DataOutcome:
        """Independent of execution: a run that lost its sink can still hold clean data."""
        if self.quality_failure or any(a.verdict == "failed" for a in self.assertions):
            return "failed_quality_gate"
        # Rows kept out of the load (dead-lettered, or counted only without a DLQ): coerce's
        # rejects read as quarantine's, the state being held is the evidence's `state`.
        if self.summary.rows_quarantined or self.dlq.record_count or self.summary.rows_dropped:
            return "passed_with_quarantine"
        if self.summary.rows_warned or any(a.verdict == "warned" for a in self.assertions):
            return "passed_with_warnings"
        return "passed"

    def to_json(self) -> dict[str, Any]:
        doc = self._doc()
        if self.scale_out is not None:
            doc["scale_out"] = dict(self.scale_out)
        if self.prevalidated is not None:
            doc["prevalidated"] = dict(self.prevalidated)
        if self.failure_record_refs:
            doc["failure_record_refs"] = list(self.failure_record_refs)
        if self.hints:
            doc["hints"] = [dict(h) for h in self.hints]
        if self.ddl is not None:
            doc["ddl"] = dict(self.ddl)
        if self.compatibility is not None:
            doc["compatibility"] = dict(self.compatibility)
        return doc

    def _doc(self) -> dict[str, Any]:
        return {
            "schema": EVIDENCE_SCHEMA_ID,
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "manifest_fingerprint": self.manifest_fingerprint,
            "execution_status": self.execution_status,
            "data_outcome": self.data_outcome,
            "failure_code": self.failure_code,
            "enforcement": self.enforcement,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "summary": self.summary.to_json(),
            "violations": [
                {"column": column, "reason": reason, "count": count}
                for (column, reason), count in sorted(self.violations.items())
            ],
            "assertions": [a.to_json() for a in self.assertions],
            "dlq": self.dlq.to_json(),
            "sink": dict(self.sink),
            "state": dict(self.state),
            "schema_changes": [c.to_json() for c in self.schema_changes],
            "openlineage_facets": dict(self.facets),
        }
