"""``DataContractEvidenceBundleWriter``: seed 004's evidence of one ``enforce`` call.

The bundle is the real ``dpone.data_contract_evidence.v1`` (the evidence model and writer of
``dpone run``, create-only, checksummed, signed when a key is configured): counts, violations
per column and reason, the DLQ run's record count, reasons, index reference and fingerprint,
and the first record ids (bounded; also in the ``dpone`` OpenLineage facet). It never holds the
target rows or a value. With no manifest, ``manifest_fingerprint`` is the fingerprint of the
contract that was enforced.
"""

from __future__ import annotations

import os
from pathlib import Path

from dpone.evidence import lineage
from dpone.evidence.model import MAX_RECORD_IDS, DlqEvidence, Evidence, Summary
from dpone.evidence.writer import bundle_dir, write_evidence
from dpone.records import frozen
from dpone.type_system.enforcement import EnforcementOutcome


@frozen
class EvidenceArtifact:
    """The published bundle: ``path`` of its JSON (the Markdown is beside it)."""

    path: Path

    def __fspath__(self) -> str:
        return str(self.path)


class DataContractEvidenceBundleWriter:
    """Writes bundles under ``output_dir/<pipeline>/<run_id>/``."""

    def __init__(self, output_dir: str | os.PathLike[str]) -> None:
        self.output_dir = Path(output_dir)

    def write(
        self,
        *,
        run_id: str,
        pipeline: str,
        enforcement: EnforcementOutcome,
        sink_type: str = "python",
        table: str | None = None,
    ) -> EvidenceArtifact:
        """Publish the evidence of ``enforcement`` (refused if this run has a bundle)."""
        outcome = enforcement
        folder = bundle_dir(self.output_dir, pipeline, run_id)
        index_ref = None
        if outcome.index_ref is not None and outcome.dlq_directory is not None:
            # relative to the bundle's folder, never a machine path (SPEC §7)
            index_ref = os.path.relpath(
                Path(outcome.dlq_directory).absolute() / outcome.index_ref, folder.absolute()
            )
        facets = lineage.facets(
            (),
            rows_read=outcome.rows_read,
            rows_loaded=outcome.rows_loaded,
            rows_quarantined=outcome.rows_quarantined,
            enforcement=outcome.enforcement,
        )
        facets["dpone"]["dlqRecordIds"] = list(outcome.dlq_record_ids[:MAX_RECORD_IDS])
        facets["dpone"]["dlqRecordIdsTruncated"] = len(outcome.dlq_record_ids) > MAX_RECORD_IDS
        evidence = Evidence(
            run_id=run_id,
            pipeline=pipeline,
            manifest_fingerprint=outcome.contract_fingerprint,
            enforcement=outcome.enforcement,
            failure_code=outcome.failure_code,
            quality_failure=outcome.data_outcome == "failed_quality_gate",
            summary=Summary(
                rows_read=outcome.rows_read,
                rows_loaded=outcome.rows_loaded,
                rows_quarantined=outcome.rows_quarantined,
                rows_warned=outcome.rows_warned,
                rows_dropped=outcome.rows_dropped,
                chunks=1,
            ),
            violations=dict(outcome.violations),
            assertions=(),
            dlq=DlqEvidence(
                record_count=len(outcome.dlq_record_ids),
                reasons=dict(outcome.dlq_reasons),
                index_ref=index_ref,
                index_fingerprint=outcome.index_fingerprint,
                run_status=outcome.dlq_run_status,
                record_ids=tuple(outcome.dlq_record_ids),
            ),
            sink={"type": sink_type, "table": table or pipeline, "load_id": outcome.load_id},
            state={"advanced": outcome.state_commit_allowed, "from": None, "to": None},
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            facets=facets,
            failure_record_refs=outcome.failure_record_refs,
        )
        return EvidenceArtifact(write_evidence(self.output_dir, evidence))


__all__ = ["MAX_RECORD_IDS", "DataContractEvidenceBundleWriter", "EvidenceArtifact"]
