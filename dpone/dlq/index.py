"""The run index ``dpone.dlq-index.v1``: what a run holds, its status, and its fingerprint.

``runs/<run_id>/index.json`` is replaced atomically. It is written ``open`` when the run starts
(so a crash always leaves an index behind) and rewritten once when the run ends: ``closed``
by the writer, or ``aborted`` (by the writer on failure, or by recovery when the writer is
gone). An ``open`` index lists no records: the records on disk are the truth until the run
ends, and recovery rebuilds the index from them.

``fingerprint`` is the checksum of the sorted ``[record_id, sha256]`` pairs: two indexes with
the same records have the same fingerprint whatever else differs (evidence bundles pin it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, get_args

from dpone.contracts.reasons import ReasonCode
from dpone.dlq.canonical import CHECKSUM_PATTERN, checksum
from dpone.dlq.errors import DlqIndexInvalid
from dpone.dlq.ids import is_identifier, is_ulid
from dpone.dlq.model import MAX_NAME_LENGTH, TIMESTAMP_PATTERN
from dpone.dlq.policy import PII_POLICIES, RETENTION_DAYS, PiiPolicy

INDEX_SCHEMA = "dpone.dlq-index.v1"
RunStatus = Literal["open", "closed", "aborted"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
# Why a run ended as it did; null while open and when closed normally.
StatusReason = Literal["run_failed", "writer_gone", "index_missing"]
STATUS_REASONS: tuple[str, ...] = get_args(StatusReason)

INDEX_KEYS = frozenset(
    {
        "schema",
        "run_id",
        "load_id",
        "pipeline",
        "status",
        "status_reason",
        "pii_policy",
        "retention_days",
        "created_at",
        "updated_at",
        "owner",
        "record_count",
        "reason_counts",
        "records",
        "fingerprint",
        "sha256",
    }
)
ENTRY_KEYS = frozenset({"record_id", "sha256", "code", "column"})
PIPELINE_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"

_CHECKSUM = re.compile(CHECKSUM_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
_PIPELINE = re.compile(PIPELINE_PATTERN)
_CODES = frozenset(code.value for code in ReasonCode)
_by_id = itemgetter("record_id")


def entry(record_id: str, sha256: str, code: str, column: str | None) -> dict[str, Any]:
    """One index entry, as the writer keeps it in memory."""
    return {"record_id": record_id, "sha256": sha256, "code": code, "column": column}


def fingerprint(pairs: Iterable[tuple[str, str]]) -> str:
    """Checksum of the sorted ``[record_id, sha256]`` pairs."""
    return checksum(sorted([rid, sha] for rid, sha in pairs))


def build_index_doc(
    *,
    run_id: str,
    load_id: str,
    pipeline: str | None,
    status: RunStatus,
    status_reason: StatusReason | None,
    pii_policy: PiiPolicy,
    retention_days: int,
    created_at: str,
    updated_at: str,
    owner_pid: int | None,
    entries: list[dict[str, Any]],
) -> dict[str, Any]:
    """The full index document, checksum included. ``entries`` is sorted in place by id."""
    entries.sort(key=_by_id)
    reason_counts = Counter(e["code"] for e in entries)
    doc: dict[str, Any] = {
        "schema": INDEX_SCHEMA,
        "run_id": run_id,
        "load_id": load_id,
        "pipeline": pipeline,
        "status": status,
        "status_reason": status_reason,
        "pii_policy": pii_policy,
        "retention_days": retention_days,
        "created_at": created_at,
        "updated_at": updated_at,
        "owner": None if owner_pid is None else {"pid": owner_pid},
        "record_count": len(entries),
        "reason_counts": dict(sorted(reason_counts.items())),
        "records": entries,
        "fingerprint": fingerprint((e["record_id"], e["sha256"]) for e in entries),
    }
    doc["sha256"] = checksum(doc)
    return doc


@dataclass(frozen=True, slots=True)
class IndexEntry:
    record_id: str
    sha256: str
    code: ReasonCode
    column: str | None

    def to_json(self) -> dict[str, Any]:
        return entry(self.record_id, self.sha256, self.code.value, self.column)


@dataclass(frozen=True, slots=True)
class DlqIndex:
    """A verified run index (the store checked its checksum before building this)."""

    run_id: str
    load_id: str
    pipeline: str | None
    status: RunStatus
    status_reason: StatusReason | None
    pii_policy: PiiPolicy
    retention_days: int
    created_at: str
    updated_at: str
    owner_pid: int | None
    entries: tuple[IndexEntry, ...]
    reason_counts: Mapping[str, int]
    fingerprint: str
    sha256: str

    @property
    def record_count(self) -> int:
        return len(self.entries)

    @property
    def record_ids(self) -> tuple[str, ...]:
        return tuple(e.record_id for e in self.entries)

    def checksums(self) -> dict[str, str]:
        """record_id -> record checksum."""
        return {e.record_id: e.sha256 for e in self.entries}

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": INDEX_SCHEMA,
            "run_id": self.run_id,
            "load_id": self.load_id,
            "pipeline": self.pipeline,
            "status": self.status,
            "status_reason": self.status_reason,
            "pii_policy": self.pii_policy,
            "retention_days": self.retention_days,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "owner": None if self.owner_pid is None else {"pid": self.owner_pid},
            "record_count": self.record_count,
            "reason_counts": dict(self.reason_counts),
            "records": [e.to_json() for e in self.entries],
            "fingerprint": self.fingerprint,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, doc: Any) -> DlqIndex:
        """Check ``doc`` against the index contract, including its internal consistency."""
        if not isinstance(doc, dict) or set(doc) != INDEX_KEYS:
            raise _invalid("/")
        _check_header(doc)
        entries = tuple(_entry_from_json(e, i) for i, e in enumerate(_list(doc["records"])))
        ids = [e.record_id for e in entries]
        if ids != sorted(ids) or len(set(ids)) != len(ids):
            raise _invalid("/records")
        if doc["record_count"] != len(entries):
            raise _invalid("/record_count")
        counts = Counter(e.code.value for e in entries)
        if doc["reason_counts"] != dict(counts):
            raise _invalid("/reason_counts")
        if doc["fingerprint"] != fingerprint((e.record_id, e.sha256) for e in entries):
            raise _invalid("/fingerprint")
        owner = doc["owner"]
        return cls(
            run_id=doc["run_id"],
            load_id=doc["load_id"],
            pipeline=doc["pipeline"],
            status=doc["status"],
            status_reason=doc["status_reason"],
            pii_policy=doc["pii_policy"],
            retention_days=doc["retention_days"],
            created_at=doc["created_at"],
            updated_at=doc["updated_at"],
            owner_pid=None if owner is None else owner["pid"],
            entries=entries,
            reason_counts=dict(sorted(counts.items())),
            fingerprint=doc["fingerprint"],
            sha256=doc["sha256"],
        )


def _invalid(pointer: str) -> DlqIndexInvalid:
    return DlqIndexInvalid(f"the run index is not a valid dpone.dlq-index.v1 document at {pointer}")


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid("/records")
    return value


def _check_header(doc: dict[str, Any]) -> None:
    if doc["schema"] != INDEX_SCHEMA:
        raise _invalid("/schema")
    for key in ("run_id", "load_id"):
        if not is_identifier(doc[key]):
            raise _invalid(f"/{key}")
    pipeline = doc["pipeline"]
    if pipeline is not None and (type(pipeline) is not str or not _PIPELINE.match(pipeline)):
        raise _invalid("/pipeline")
    if doc["status"] not in RUN_STATUSES:
        raise _invalid("/status")
    reason = doc["status_reason"]
    if reason is not None and reason not in STATUS_REASONS:
        raise _invalid("/status_reason")
    if (doc["status"] == "aborted") != (reason is not None):
        raise _invalid("/status_reason")
    if doc["pii_policy"] not in PII_POLICIES:
        raise _invalid("/pii_policy")
    days = doc["retention_days"]
    if type(days) is not int or not RETENTION_DAYS[1] <= days <= RETENTION_DAYS[2]:
        raise _invalid("/retention_days")
    for key in ("created_at", "updated_at"):
        if type(doc[key]) is not str or not _TIMESTAMP.match(doc[key]):
            raise _invalid(f"/{key}")
    owner = doc["owner"]
    if owner is not None and (
        not isinstance(owner, dict)
        or set(owner) != {"pid"}
        or type(owner["pid"]) is not int
        or owner["pid"] < 1
    ):
        raise _invalid("/owner")
    if type(doc["record_count"]) is not int or not isinstance(doc["reason_counts"], dict):
        raise _invalid("/record_count")
    if doc["status"] == "open" and doc["records"]:
        raise _invalid("/records")  # an open index never lists records (see the module doc)
    for key in ("fingerprint", "sha256"):
        if type(doc[key]) is not str or not _CHECKSUM.match(doc[key]):
            raise _invalid(f"/{key}")


def _entry_from_json(doc: Any, position: int) -> IndexEntry:
    pointer = f"/records/{position}"
    if not isinstance(doc, dict) or set(doc) != ENTRY_KEYS:
        raise _invalid(pointer)
    if not is_ulid(doc["record_id"]):
        raise _invalid(pointer + "/record_id")
    if type(doc["sha256"]) is not str or not _CHECKSUM.match(doc["sha256"]):
        raise _invalid(pointer + "/sha256")
    if type(doc["code"]) is not str or doc["code"] not in _CODES:
        raise _invalid(pointer + "/code")
    column = doc["column"]
    if column is not None and (type(column) is not str or not 0 < len(column) <= MAX_NAME_LENGTH):
        raise _invalid(pointer + "/column")
    return IndexEntry(doc["record_id"], doc["sha256"], ReasonCode(doc["code"]), column)


__all__ = [
    "INDEX_SCHEMA",
    "RUN_STATUSES",
    "STATUS_REASONS",
    "DlqIndex",
    "IndexEntry",
    "RunStatus",
    "StatusReason",
    "build_index_doc",
    "entry",
    "fingerprint",
]
