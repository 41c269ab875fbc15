"""The run index ``dpone.dlq-index.v1``: what a run holds, its status, and its fingerprint.

``runs/<run_id>/index.json`` is replaced atomically. It is written ``open`` when the run starts
(so a crash always leaves an index behind) and rewritten once when the run ends: ``closed``
by the writer, or ``aborted`` (by the writer on failure, or by recovery when the writer is
gone). An ``open`` index lists no records: the records on disk are the truth until the run
ends, and recovery rebuilds the index from the segments on disk.

``segments`` lists every segment file of the run (:class:`dpone.dlq.segments.SegmentEntry`:
name, byte checksum, record count, first and last record id, latest expiry); ``records`` lists
every record with its checksum, reason code and column, so that counting, planning a replay
or a retention reads the index alone. Both are checked against each other on every read.

``fingerprint`` is the checksum of the sorted ``[record_id, sha256]`` pairs: two indexes with
the same records have the same fingerprint whatever else differs (evidence bundles pin it).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, get_args

from dpone.canonical import CHECKSUM_PATTERN, checksum
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.errors import DlqIndexInvalid
from dpone.dlq.model import MAX_NAME_LENGTH, TIMESTAMP_PATTERN
from dpone.dlq.policy import PII_POLICIES, RETENTION_DAYS, PiiPolicy
from dpone.dlq.segments import SegmentEntry
from dpone.ids import is_identifier, is_ulid
from dpone.signing import well_formed

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
        "segments",
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
_PLAIN = re.compile(r"[A-Za-z0-9:._-]*")
_ULID_LEN = 26
_CHECKSUM_LEN = len("sha256:") + 64
_ULIDS = re.compile(r"(?:[0-7][0-9A-HJKMNP-TV-Z]{25})*")
_CHECKSUMS = re.compile(r"(?:sha256:[0-9a-f]{64})*")
_CODE_OF = {code.value: code for code in ReasonCode}


def entry(record_id: str, sha256: str, code: str, column: str | None) -> dict[str, Any]:
    """One index entry, as the writer keeps it in memory."""
    return {"record_id": record_id, "sha256": sha256, "code": code, "column": column}


def fingerprint(pairs: Iterable[tuple[str, str]]) -> str:
    """Checksum of the sorted ``[record_id, sha256]`` pairs."""
    return pairs_checksum(sorted(pairs))


def pairs_checksum(pairs: list[tuple[str, str]]) -> str:
    """``checksum([[a, b], ...])`` of sorted string pairs.

    Ids and checksums are plain ASCII without quotes or escapes, whose canonical JSON is the
    bytes joined here: this skips walking a list of up to a million pairs to prove it (an
    index is read by every plan). Any other string goes the general way.
    """
    if _PLAIN.fullmatch("".join(["".join(pair) for pair in pairs])):
        body = ",".join(f'["{a}","{b}"]' for a, b in pairs)
        return "sha256:" + hashlib.sha256(f"[{body}]".encode()).hexdigest()
    return checksum([list(pair) for pair in pairs])


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
    segments: Iterable[SegmentEntry] = (),
    sign: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The full index document, checksum included (and its signature, through ``sign``).
    ``entries`` is sorted in place by id."""
    entries.sort(key=_by_id)
    listed = sorted((s.to_json() for s in segments), key=itemgetter("name"))
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
        "segments": listed,
        "fingerprint": fingerprint((e["record_id"], e["sha256"]) for e in entries),
    }
    doc["sha256"] = checksum(doc)
    return sign(doc) if sign is not None else doc


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
    segments: tuple[SegmentEntry, ...]
    reason_counts: Mapping[str, int]
    fingerprint: str
    sha256: str
    signature: Mapping[str, str] | None = None

    @property
    def record_count(self) -> int:
        return len(self.entries)

    @property
    def record_ids(self) -> tuple[str, ...]:
        return tuple(e.record_id for e in self.entries)

    def segment_of(self, record_id: str) -> SegmentEntry | None:
        """The listed segment that holds ``record_id`` (by its first/last record ids)."""
        for segment in self.segments:
            if segment.holds(record_id):
                return segment
        return None

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
            "segments": [s.to_json() for s in self.segments],
            "fingerprint": self.fingerprint,
            "sha256": self.sha256,
        } | ({} if self.signature is None else {"signature": dict(self.signature)})

    @classmethod
    def built(
        cls,
        doc: Mapping[str, Any],
        entries: tuple[IndexEntry, ...],
        segments: tuple[SegmentEntry, ...],
    ) -> DlqIndex:
        """The index of a document this process just built from checked parts (no re-check:
        the store calls it right after writing ``doc``, whose parts it read verified)."""
        ordered = tuple(sorted(segments, key=lambda seg: seg.name))
        return cls._of(doc, entries, ordered, dict(doc["reason_counts"]))

    @classmethod
    def _of(
        cls,
        doc: Mapping[str, Any],
        entries: tuple[IndexEntry, ...],
        segments: tuple[SegmentEntry, ...],
        reason_counts: Mapping[str, int],
    ) -> DlqIndex:
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
            segments=segments,
            reason_counts=reason_counts,
            fingerprint=doc["fingerprint"],
            sha256=doc["sha256"],
            signature=doc.get("signature"),
        )

    @classmethod
    def from_json(cls, doc: Any) -> DlqIndex:
        """Check ``doc`` against the index contract, including its internal consistency."""
        if not isinstance(doc, dict) or set(doc) - {"signature"} != INDEX_KEYS:
            raise _invalid("/")
        if "signature" in doc and not well_formed(doc["signature"]):
            raise _invalid("/signature")
        _check_header(doc)
        entries = _entries_from_json(_list(doc["records"]))
        ids = [e.record_id for e in entries]
        if ids != sorted(ids) or len(set(ids)) != len(ids):
            raise _invalid("/records")
        if doc["record_count"] != len(entries):
            raise _invalid("/record_count")
        counts = Counter(e["code"] for e in doc["records"])
        if doc["reason_counts"] != dict(counts):
            raise _invalid("/reason_counts")
        # Entries are sorted by id: the pairs are in fingerprint order already.
        if doc["fingerprint"] != pairs_checksum([(e.record_id, e.sha256) for e in entries]):
            raise _invalid("/fingerprint")
        segments = _segments_from_json(doc["segments"], ids)
        return cls._of(doc, entries, segments, dict(sorted(counts.items())))


def _invalid(pointer: str) -> DlqIndexInvalid:
    return DlqIndexInvalid(f"the run index is not a valid dpone.dlq-index.v1 document at {pointer}")


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid("/records")
    return value


def _segments_from_json(value: Any, ids: list[str]) -> tuple[SegmentEntry, ...]:
    """The listed segments: named once each, in name order, accounting for every record."""
    if not isinstance(value, list):
        raise _invalid("/segments")
    segments = tuple(SegmentEntry.from_json(s, i) for i, s in enumerate(value))
    names = [s.name for s in segments]
    if names != sorted(set(names)):
        raise _invalid("/segments")
    if sum(s.record_count for s in segments) != len(ids):
        raise _invalid("/segments")
    listed = set(ids)
    for position, segment in enumerate(segments):
        if segment.first_record_id not in listed or segment.last_record_id not in listed:
            raise _invalid(f"/segments/{position}")
    return segments


def _check_header(doc: dict[str, Any]) -> None:  # noqa: C901 (a flat check per field of an untrusted document)
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
    if doc["status"] == "open" and doc["segments"]:
        raise _invalid("/segments")
    for key in ("fingerprint", "sha256"):
        if type(doc[key]) is not str or not _CHECKSUM.match(doc[key]):
            raise _invalid(f"/{key}")


def _entries_from_json(items: list[Any]) -> tuple[IndexEntry, ...]:
    """Every entry checked, column by column over all entries at once (an index holds up to
    a million entries and is read by every replay and retention plan); the first entry that
    fails is then checked alone, for its pointer."""
    try:
        ids = [e["record_id"] for e in items]
        shas = [e["sha256"] for e in items]
        codes = [e["code"] for e in items]
        columns = [e["column"] for e in items]
        # Whole-list checks in C: four keys found and four keys in all; one regex over the
        # joined ids (each 26 long) and checksums; the few distinct codes and columns alone.
        fast = (
            all(map(dict.__instancecheck__, items))
            and set(map(len, items)) <= {4}
            and set(map(len, ids)) <= {_ULID_LEN}
            and set(map(len, shas)) <= {_CHECKSUM_LEN}
            and _ULIDS.fullmatch("".join(ids)) is not None
            and _CHECKSUMS.fullmatch("".join(shas)) is not None
            and set(codes) <= _CODE_OF.keys()
            and all(_column_ok(c) for c in set(columns))
        )
    except (TypeError, KeyError):
        fast = False
    if not fast:
        return tuple(_entry_from_json(doc, position) for position, doc in enumerate(items))
    return tuple(map(IndexEntry, ids, shas, map(_CODE_OF.__getitem__, codes), columns))


def _column_ok(column: Any) -> bool:
    return column is None or (type(column) is str and 0 < len(column) <= MAX_NAME_LENGTH)


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
    "pairs_checksum",
]
