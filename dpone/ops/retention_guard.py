"""What ``dpone ops retention apply`` checks before it deletes anything, besides the snapshot.

A plan file is written by one command and read by another, so it is input: someone who can
write it can rebuild a consistent one (``plan_id`` is only a checksum). So apply

* verifies the plan's keyed signature (required whenever a signing key is configured, unless
  ``--allow-unsigned``): :func:`check_plan_signature`;
* takes the protections that decide what may go from its own command line, not from the plan:
  the evidence folders it pins are the plan's *and* its own ``--pin-evidence``, and the plan
  may delete unacknowledged records only when apply's own ``--include-unacknowledged`` says so
  too (:func:`effective_flags`);
* reads every segment it is about to delete from or compact through the store, its bytes
  against the index and each line against its checksum (:func:`verify_touched`): a tampered
  segment is evidence of tampering, and its records are not deleted (``DPONE_DLQ_CHECKSUM_
  MISMATCH``, nothing deleted), as the store's runbook says: stop replay and retention.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpone import signing

if TYPE_CHECKING:
    from dpone.dlq.index import DlqIndex
    from dpone.dlq.store import DlqStore
    from dpone.ops.retention import RetentionPlan


def check_plan_signature(doc: Mapping[str, Any], name: str, *, require: bool) -> None:
    """The plan's signature verifies (when present, or ``require``d); else refused."""
    from dpone.ops.retention import RetentionPlanInvalid

    found = signing.problem(
        doc, signing.keyring(), require=require, what=f"the retention plan {name}"
    )
    if found is not None:
        code, message = found
        raise RetentionPlanInvalid(
            f"{message} ({code}); nothing was deleted",
            code="DPONE_DLQ_RETENTION_PLAN_SIGNATURE_INVALID",
            path=name,
            fixes=(
                f"make a new plan with `dpone ops retention plan --output {name}` with the "
                "signing key set, and apply that one",
                *signing.FIXES[code],
                "or pass --allow-unsigned to apply an unsigned plan (anyone who can write it "
                "can forge it)",
            ),
        )


def effective_flags(
    plan: RetentionPlan, evidence_dirs: Sequence[str], include_unacknowledged: bool
) -> tuple[tuple[str, ...], bool]:
    """(the evidence folders to pin, whether unacknowledged records may go) for an apply.

    Pins are never fewer than the command line's; unacknowledged records go only when both
    the plan and the command line say so, and a plan that says so alone is refused."""
    from dpone.ops.retention import RetentionPlanInvalid

    if plan.include_unacknowledged and not include_unacknowledged:
        raise RetentionPlanInvalid(
            "the retention plan deletes expired records that were never acknowledged; apply "
            "does so only when its own command line says so too; nothing was deleted",
            fixes=(
                "if that is what you want, pass --include-unacknowledged to "
                "`dpone ops retention apply` as well",
            ),
        )
    pins = tuple(dict.fromkeys([*plan.evidence_dirs, *evidence_dirs]))
    return pins, plan.include_unacknowledged


def verify_touched(
    store: DlqStore,
    indexes: Mapping[str, DlqIndex | None],
    doomed_by_run: Mapping[str, Collection[str]],
) -> None:
    """Read, verified, every listed segment that holds a record about to be deleted."""
    from dpone.ops.retention import segment_records

    for run_id, doomed in doomed_by_run.items():
        index = indexes.get(run_id)
        if index is None or not doomed:
            continue
        for seg, ids in segment_records(index):
            if any(rid in doomed for rid in ids):
                store.read_segment(run_id, seg)  # DlqChecksumMismatch names segment and line


__all__ = ["check_plan_signature", "effective_flags", "verify_touched"]
