"""Retention of the dead-letter store: mark and sweep, plan first (SPEC §8).

* :mod:`~dpone.ops.retention.model`: the plan and result documents, the errors, a plan file
  read back;
* :mod:`~dpone.ops.retention.mark`: ``dpone ops retention plan`` decides what may go;
* :mod:`~dpone.ops.retention.sweep`: ``dpone ops retention apply`` deletes exactly that,
  after deciding again from the store.

The names below are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.ops.retention.mark import pinned_runs, plan_retention, segment_records
    from dpone.ops.retention.model import (
        PLAN_SCHEMA,
        PROTECTIONS,
        RESULT_SCHEMA,
        Cut,
        Protection,
        RetentionError,
        RetentionEvidenceInvalid,
        RetentionPlan,
        RetentionPlanInvalid,
        RetentionResult,
        RetentionSnapshotDrift,
        RunDecision,
        RunSnapshot,
        RunSweep,
        acks_fingerprint,
        load_plan,
        snapshot_fingerprint,
    )
    from dpone.ops.retention.sweep import apply_retention

_MODEL = "dpone.ops.retention.model"
__getattr__, __dir__ = exports(
    __name__,
    {
        "pinned_runs": "dpone.ops.retention.mark",
        "plan_retention": "dpone.ops.retention.mark",
        "segment_records": "dpone.ops.retention.mark",
        "apply_retention": "dpone.ops.retention.sweep",
        **dict.fromkeys(
            (
                "PLAN_SCHEMA",
                "PROTECTIONS",
                "RESULT_SCHEMA",
                "Cut",
                "Protection",
                "RetentionError",
                "RetentionEvidenceInvalid",
                "RetentionPlan",
                "RetentionPlanInvalid",
                "RetentionResult",
                "RetentionSnapshotDrift",
                "RunDecision",
                "RunSnapshot",
                "RunSweep",
                "acks_fingerprint",
                "load_plan",
                "snapshot_fingerprint",
            ),
            _MODEL,
        ),
    },
    ("mark", "model", "sweep"),
)

__all__ = [
    "PLAN_SCHEMA",
    "PROTECTIONS",
    "RESULT_SCHEMA",
    "Cut",
    "Protection",
    "RetentionError",
    "RetentionEvidenceInvalid",
    "RetentionPlan",
    "RetentionPlanInvalid",
    "RetentionResult",
    "RetentionSnapshotDrift",
    "RunDecision",
    "RunSnapshot",
    "RunSweep",
    "acks_fingerprint",
    "apply_retention",
    "load_plan",
    "pinned_runs",
    "plan_retention",
    "segment_records",
    "snapshot_fingerprint",
]
