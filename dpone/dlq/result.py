"""What a run's writer reports once the run has ended, for the lifecycle and the evidence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from dpone.dlq.layout import INDEX_FILE, RUNS_DIR
from dpone.records import frozen


@frozen
class RunResult:
    """What the lifecycle and the evidence bundle need once a run has ended."""

    run_id: str
    load_id: str
    status: Literal["closed", "aborted"]
    record_count: int
    reason_counts: Mapping[str, int]
    record_ids: tuple[str, ...]
    fingerprint: str
    index_sha256: str
    index_ref: str  # relative to the DLQ root

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "load_id": self.load_id,
            "status": self.status,
            "record_count": self.record_count,
            "reason_counts": dict(self.reason_counts),
            "fingerprint": self.fingerprint,
            "index_sha256": self.index_sha256,
            "index_ref": self.index_ref,
        }


def result_of(doc: Mapping[str, Any], run_id: str) -> RunResult:
    """The result of an ended run from the index document written for it."""
    return RunResult(
        run_id=run_id,
        load_id=doc["load_id"],
        status=doc["status"],
        record_count=doc["record_count"],
        reason_counts=dict(doc["reason_counts"]),
        record_ids=tuple(e["record_id"] for e in doc["records"]),
        fingerprint=doc["fingerprint"],
        index_sha256=doc["sha256"],
        index_ref=f"{RUNS_DIR}/{run_id}/{INDEX_FILE}",
    )


__all__ = ["RunResult", "result_of"]
