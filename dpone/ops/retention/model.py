"""The retention documents (SPEC §8): the plan ``dpone.dlq-retention-plan.v1`` with the
snapshot it was decided on, the result ``dpone.dlq-retention-result.v1``, the retention
errors, and a plan file read back (schema, then keyed signature, then its ``plan_id``).

A plan file is input (:mod:`dpone.ops.plan_files`): it must carry a keyed signature that
verifies whenever a signing key is configured, unless ``--allow-unsigned``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from itertools import compress
from operator import not_
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from dpone import signing
from dpone.canonical import checksum
from dpone.dlq.columns import columns_checksum
from dpone.errors import EXIT_CONFIG, DponeError, Stage
from dpone.ops.plan_files import PlanFileKind, read_plan_file
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.dlq.integrity import Finding

PLAN_SCHEMA = "dpone.dlq-retention-plan.v1"
RESULT_SCHEMA = "dpone.dlq-retention-result.v1"

Protection = Literal["active", "evidence_pinned", "unexpired", "pending_replay"]
PROTECTIONS: tuple[str, ...] = get_args(Protection)


class RetentionError(DponeError):
    code = "DPONE_DLQ_RETENTION_ERROR"
    stage: Stage = "retention"


class RetentionSnapshotDrift(RetentionError):
    """The store is not what the plan looked at; nothing was deleted."""

    code = "DPONE_DLQ_RETENTION_SNAPSHOT_DRIFT"


class RetentionPlanInvalid(RetentionError):
    code = "DPONE_DLQ_RETENTION_PLAN_INVALID"
    exit_code = EXIT_CONFIG


class RetentionEvidenceInvalid(RetentionError):
    """A bundle under a pin folder cannot be read: what it pins is unknown, so nothing goes."""

    code = "DPONE_DLQ_RETENTION_EVIDENCE_INVALID"


# --- the snapshot -------------------------------------------------------------------------------


@frozen
class RunSnapshot:
    """What retention saw of one run."""

    run_id: str
    status: str
    fingerprint: str
    record_count: int
    acks: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "fingerprint": self.fingerprint,
            "record_count": self.record_count,
            "acks": self.acks,
        }

    @classmethod
    def from_json(cls, doc: Any) -> RunSnapshot:
        if not isinstance(doc, dict) or set(doc) != {
            "run_id",
            "status",
            "fingerprint",
            "record_count",
            "acks",
        }:
            raise _invalid("a run snapshot")
        return cls(
            str(doc["run_id"]),
            str(doc["status"]),
            str(doc["fingerprint"]),
            int(doc["record_count"]),
            str(doc["acks"]),
        )


def acks_fingerprint(
    acks: Mapping[str, str], gone: Collection[str] = (), *, plain: bool = False
) -> str:
    """Checksum of the sorted ``[record_id, ack sha256]`` pairs (``acks``: id -> ack sha256),
    leaving out the records in ``gone``. ``plain``: ``acks`` is what the store verified
    (:meth:`DlqStore.ack_checksums`: record ids and ``sha256:`` checksums only)."""
    ids = sorted(acks)
    if gone:
        ids = list(compress(ids, list(map(not_, map(gone.__contains__, ids)))))
    return columns_checksum(ids, list(map(acks.__getitem__, ids)), plain=plain)


def snapshot_fingerprint(runs: Iterable[RunSnapshot], pinned: Iterable[str]) -> str:
    return checksum({"runs": [run.to_json() for run in runs], "pinned_runs": sorted(set(pinned))})


# --- the plan -----------------------------------------------------------------------------------


@frozen
class Cut:
    """What the plan deletes from one segment: all of it (``whole``) or ``record_ids``."""

    segment: str
    sha256: str
    expires_at: str
    whole: bool
    delete_count: int
    acknowledged: int
    record_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "sha256": self.sha256,
            "expires_at": self.expires_at,
            "whole": self.whole,
            "delete_count": self.delete_count,
            "acknowledged": self.acknowledged,
            "record_ids": list(self.record_ids),
        }

    @classmethod
    def from_json(cls, doc: Any) -> Cut:
        return cls(
            str(doc["segment"]),
            str(doc["sha256"]),
            str(doc["expires_at"]),
            bool(doc["whole"]),
            int(doc["delete_count"]),
            int(doc["acknowledged"]),
            tuple(str(r) for r in doc["record_ids"]),
        )


@frozen
class RunDecision:
    """What the plan does with one run; ``after`` is its snapshot once the deletes are done."""

    run_id: str
    status: str
    record_count: int
    protected: Mapping[str, int]
    delete: tuple[Cut, ...] = ()
    after: RunSnapshot | None = None

    @property
    def delete_count(self) -> int:
        return sum(cut.delete_count for cut in self.delete)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "record_count": self.record_count,
            "protected": {name: self.protected.get(name, 0) for name in PROTECTIONS},
            "delete": [d.to_json() for d in self.delete],
            "after": None if self.after is None else self.after.to_json(),
        }


@frozen
class RetentionPlan:
    """``dpone.dlq-retention-plan.v1``: what to delete, and the snapshot it was decided on."""

    directory: str
    now: str
    include_unacknowledged: bool
    evidence_dirs: tuple[str, ...]
    pinned_runs: tuple[str, ...]
    snapshot: tuple[RunSnapshot, ...]
    runs: tuple[RunDecision, ...]
    created_at: str

    @property
    def snapshot_fingerprint(self) -> str:
        return snapshot_fingerprint(self.snapshot, self.pinned_runs)

    @property
    def delete_count(self) -> int:
        return sum(run.delete_count for run in self.runs)

    def protected(self) -> dict[str, int]:
        return {name: sum(run.protected.get(name, 0) for run in self.runs) for name in PROTECTIONS}

    def body(self) -> dict[str, Any]:
        """Everything but ``plan_id`` and ``created_at``: what ``plan_id`` is the checksum of."""
        return {
            "schema": PLAN_SCHEMA,
            "dir": self.directory,
            "now": self.now,
            "include_unacknowledged": self.include_unacknowledged,
            "evidence_dirs": list(self.evidence_dirs),
            "pinned_runs": list(self.pinned_runs),
            "snapshot": {
                "fingerprint": self.snapshot_fingerprint,
                "runs": [run.to_json() for run in self.snapshot],
            },
            "runs": [run.to_json() for run in self.runs],
            "totals": {
                "records": sum(run.record_count for run in self.runs),
                "delete": self.delete_count,
                "protected": self.protected(),
            },
        }

    def to_json(self) -> dict[str, Any]:
        body = self.body()
        # Signed when a key is configured: apply refuses an unsigned plan then.
        return signing.sign({"plan_id": checksum(body), **body, "created_at": self.created_at})

    @classmethod
    def from_json(cls, doc: Any) -> RetentionPlan:
        """A plan read back; its ``plan_id`` must be the checksum of its body."""
        if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
            raise _invalid("the document")
        try:
            snapshot = tuple(RunSnapshot.from_json(r) for r in doc["snapshot"]["runs"])
            runs = tuple(_decision_from_json(r) for r in doc["runs"])
            plan = cls(
                directory=str(doc["dir"]),
                now=str(doc["now"]),
                include_unacknowledged=bool(doc["include_unacknowledged"]),
                evidence_dirs=tuple(str(d) for d in doc["evidence_dirs"]),
                pinned_runs=tuple(str(r) for r in doc["pinned_runs"]),
                snapshot=snapshot,
                runs=runs,
                created_at=str(doc["created_at"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise _invalid("the document") from None
        body = plan.body()
        expected = {
            k: v for k, v in doc.items() if k not in ("plan_id", "created_at", signing.MEMBER)
        }
        if doc.get("plan_id") != checksum(body) or expected != body:
            raise RetentionPlanInvalid(
                "the retention plan was changed after it was made (its plan_id does not match)",
                fixes=("make a new plan with `dpone ops retention plan`",),
            )
        return plan


def counts(**found: int) -> dict[str, int]:
    """Protected records per reason, every reason present (0 when none)."""
    unknown = set(found) - set(PROTECTIONS)
    if unknown:
        raise ValueError(f"unknown protection {sorted(unknown)[0]}")
    return {name: found.get(name, 0) for name in PROTECTIONS}


def _invalid(what: str) -> RetentionPlanInvalid:
    return RetentionPlanInvalid(f"{what} is not a valid {PLAN_SCHEMA} document")


def _decision_from_json(doc: Any) -> RunDecision:
    after = doc["after"]
    return RunDecision(
        run_id=str(doc["run_id"]),
        status=str(doc["status"]),
        record_count=int(doc["record_count"]),
        protected=counts(**{str(k): int(v) for k, v in doc["protected"].items()}),
        delete=tuple(Cut.from_json(d) for d in doc["delete"]),
        after=None if after is None else RunSnapshot.from_json(after),
    )


# --- the result -------------------------------------------------------------------------------


@frozen
class RunSweep:
    """What a retention apply did to one DLQ run: records deleted, the run's index afterwards."""

    run_id: str
    deleted: int
    record_count: int
    index_fingerprint: str
    resumed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "deleted": self.deleted,
            "record_count": self.record_count,
            "index_fingerprint": self.index_fingerprint,
            "resumed": self.resumed,
        }


@frozen
class RetentionResult:
    """``dpone.dlq-retention-result.v1``: what an apply deleted, and the verify afterwards."""

    plan_id: str
    directory: str
    runs: tuple[RunSweep, ...]
    deleted_acks: int
    findings: tuple[Finding, ...]
    applied_at: str

    @property
    def deleted(self) -> int:
        return sum(run.deleted for run in self.runs)

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA,
            "plan_id": self.plan_id,
            "dir": self.directory,
            "deleted_records": self.deleted,
            "deleted_acks": self.deleted_acks,
            "runs": [run.to_json() for run in self.runs],
            "verify": {"clean": self.clean, "findings": [f.to_json() for f in self.findings]},
            "applied_at": self.applied_at,
        }


# --- a plan file read back -------------------------------------------------------------------


_PLAN_FILE = PlanFileKind(
    what="the retention plan",
    schema=PLAN_SCHEMA,
    error=RetentionPlanInvalid,
    signature_code="DPONE_DLQ_RETENTION_PLAN_SIGNATURE_INVALID",
    untouched="nothing was deleted",
    remake="make a new plan with `dpone ops retention plan --output {name}` with the signing "
    "key set, and apply that one",
    unsigned_fix="or pass --allow-unsigned to apply an unsigned plan (anyone who can write it "
    "can forge it)",
)


def load_plan(path: Path, *, require_signature: bool = False) -> RetentionPlan:
    """A plan file written by ``dpone ops retention plan --output``, schema- and
    signature-checked (``require_signature``: an unsigned plan is refused)."""
    return RetentionPlan.from_json(
        read_plan_file(path, _PLAN_FILE, require_signature=require_signature)
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
    "counts",
    "load_plan",
    "snapshot_fingerprint",
]
