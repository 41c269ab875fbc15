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

import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import field
from itertools import compress
from operator import itemgetter, not_
from typing import Any, Literal, get_args

from dpone.canonical import CHECKSUM_PATTERN
from dpone.contracts.dlq import PII_POLICIES, RETENTION_DAYS, PiiPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.columns import (
    CODE_TEXT,
    ENTRY_KEYS,
    Columns,
    columns_checksum,
    entry_columns,
    index_checksum,
    pairs_checksum,
)
from dpone.dlq.errors import DlqIndexInvalid
from dpone.dlq.model import MAX_NAME_LENGTH, TIMESTAMP_PATTERN
from dpone.dlq.segments import SegmentEntry
from dpone.ids import is_identifier, is_ulid
from dpone.records import frozen
from dpone.signing import well_formed

INDEX_SCHEMA = "dpone.dlq-index.v1"
DlqRunStatus = Literal["open", "closed", "aborted"]
RUN_STATUSES: tuple[str, ...] = get_args(DlqRunStatus)
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
PIPELINE_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"

_CHECKSUM = re.compile(CHECKSUM_PATTERN)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
_PIPELINE = re.compile(PIPELINE_PATTERN)
_CODES = frozenset(code.value for code in ReasonCode)
_CODE_OF = {code.value: code for code in ReasonCode}
_by_id = _ID_OF = itemgetter("record_id")
_SHA_OF = itemgetter("sha256")
_CODE_OF_ENTRY = itemgetter("code")
_COLUMN_OF = itemgetter("column")


def entry(record_id: str, sha256: str, code: str, column: str | None) -> dict[str, Any]:
    """One index entry, as the writer keeps it in memory."""
    return {"record_id": record_id, "sha256": sha256, "code": code, "column": column}


def fingerprint(pairs: Iterable[tuple[str, str]]) -> str:
    """Checksum of the sorted ``[record_id, sha256]`` pairs."""
    return pairs_checksum(sorted(pairs))


def build_index_doc(
    *,
    run_id: str,
    load_id: str,
    pipeline: str | None,
    status: DlqRunStatus,
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
    reason_counts = Counter(map(_CODE_OF_ENTRY, entries))
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
        "fingerprint": _entries_fingerprint(entries),
    }
    doc["sha256"] = index_checksum(doc)
    return sign(doc) if sign is not None else doc


def _entries_fingerprint(entries: list[dict[str, Any]]) -> str:
    """:func:`fingerprint` of entries sorted by id: when the ids are distinct strings, the
    entries are in pair order already and the pairs need no sorting."""
    ids = list(map(_ID_OF, entries))
    shas = list(map(_SHA_OF, entries))
    if set(map(type, ids)) <= {str} and all(map(str.__lt__, ids, ids[1:])):
        return columns_checksum(ids, shas)
    return fingerprint(zip(ids, shas, strict=True))


@frozen
class IndexEntry:
    """One record as the run index lists it: its id, checksum, reason code and column."""

    record_id: str
    sha256: str
    code: ReasonCode
    column: str | None

    def to_json(self) -> dict[str, Any]:
        return entry(self.record_id, self.sha256, self.code.value, self.column)


@frozen
class DlqIndex:
    """A verified run index (the store checked its checksum before building this).

    Its records are kept as columns in record-id order (``record_ids``,
    ``record_checksums``, ``codes``, ``columns``): an index holds up to a million records,
    and planning a replay or a retention needs ids, checksums and counts, not one object per
    record. :attr:`entries` builds the :class:`IndexEntry` objects on first use.
    """

    run_id: str
    load_id: str
    pipeline: str | None
    status: DlqRunStatus
    status_reason: StatusReason | None
    pii_policy: PiiPolicy
    retention_days: int
    created_at: str
    updated_at: str
    owner_pid: int | None
    record_ids: tuple[str, ...]
    record_checksums: tuple[str, ...]
    codes: tuple[str, ...]
    columns: tuple[str | None, ...]
    segments: tuple[SegmentEntry, ...]
    reason_counts: Mapping[str, int]
    fingerprint: str
    sha256: str
    signature: Mapping[str, str] | None = None
    _entries: tuple[IndexEntry, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def record_count(self) -> int:
        return len(self.record_ids)

    @property
    def entries(self) -> tuple[IndexEntry, ...]:
        """One :class:`IndexEntry` per record, in record-id order (built once, on demand)."""
        if self._entries is None:
            built = tuple(
                map(
                    IndexEntry,
                    self.record_ids,
                    self.record_checksums,
                    map(_CODE_OF.__getitem__, self.codes),
                    self.columns,
                )
            )
            object.__setattr__(self, "_entries", built)
            return built
        return self._entries

    def segment_of(self, record_id: str) -> SegmentEntry | None:
        """The listed segment that holds ``record_id`` (by its first/last record ids)."""
        for segment in self.segments:
            if segment.holds(record_id):
                return segment
        return None

    def checksums(self) -> dict[str, str]:
        """record_id -> record checksum."""
        return dict(zip(self.record_ids, self.record_checksums, strict=True))

    def records_json(self, gone: Container[str] = ()) -> list[dict[str, Any]]:
        """The index's ``records`` (those whose id is not in ``gone``), as the file lists them."""
        columns: tuple[Sequence[str | None], ...] = (
            self.record_ids,
            self.record_checksums,
            self.codes,
            self.columns,
        )
        if gone:
            keep = list(map(not_, map(gone.__contains__, self.record_ids)))
            columns = tuple(list(compress(column, keep)) for column in columns)
        return [
            {"record_id": a, "sha256": b, "code": c, "column": d}
            for a, b, c, d in zip(*columns, strict=True)
        ]

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
            "records": self.records_json(),
            "segments": [s.to_json() for s in self.segments],
            "fingerprint": self.fingerprint,
            "sha256": self.sha256,
        } | ({} if self.signature is None else {"signature": dict(self.signature)})

    @classmethod
    def built(cls, doc: Mapping[str, Any], segments: tuple[SegmentEntry, ...]) -> DlqIndex:
        """The index of a document this process just built from checked parts (no re-check:
        the store calls it right after writing ``doc``, whose parts it read verified)."""
        records = doc["records"]
        columns: Columns = (
            tuple(map(_ID_OF, records)),
            tuple(map(_SHA_OF, records)),
            tuple(map(CODE_TEXT.__getitem__, map(_CODE_OF_ENTRY, records))),
            tuple(map(_COLUMN_OF, records)),
        )
        ordered = tuple(sorted(segments, key=lambda seg: seg.name))
        return cls._of(doc, columns, ordered, dict(doc["reason_counts"]))

    @classmethod
    def _of(
        cls,
        doc: Mapping[str, Any],
        columns: Columns,
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
            record_ids=columns[0],
            record_checksums=columns[1],
            codes=columns[2],
            columns=columns[3],
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
        columns = _columns_from_json(_list(doc["records"]))
        ids, shas, codes, _ = columns
        if list(ids) != sorted(ids) or len(set(ids)) != len(ids):
            raise _invalid("/records")
        if doc["record_count"] != len(ids):
            raise _invalid("/record_count")
        counts = Counter(codes)
        if doc["reason_counts"] != dict(counts):
            raise _invalid("/reason_counts")
        # Sorted by id: the pairs are in fingerprint order already; every id is a ULID and
        # every checksum a sha256: checksum (checked above), so they are plain.
        if doc["fingerprint"] != columns_checksum(ids, shas, plain=True):
            raise _invalid("/fingerprint")
        segments = _segments_from_json(doc["segments"], ids)
        return cls._of(doc, columns, segments, dict(sorted(counts.items())))


def _invalid(pointer: str) -> DlqIndexInvalid:
    return DlqIndexInvalid(f"the run index is not a valid dpone.dlq-index.v1 document at {pointer}")


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid("/records")
    return value


def _segments_from_json(value: Any, ids: Sequence[str]) -> tuple[SegmentEntry, ...]:
    """The listed segments: named once each, in name order, accounting for every record."""
    if not isinstance(value, list):
        raise _invalid("/segments")
    segments = tuple(SegmentEntry.from_json(s, i) for i, s in enumerate(value))
    names = [s.name for s in segments]
    if names != sorted(set(names)):
        raise _invalid("/segments")
    if sum(s.record_count for s in segments) != len(ids):
        raise _invalid("/segments")
    for position, segment in enumerate(segments):
        if not (_listed(ids, segment.first_record_id) and _listed(ids, segment.last_record_id)):
            raise _invalid(f"/segments/{position}")
    return segments


def _listed(ids: Sequence[str], record_id: str) -> bool:
    """Whether ``record_id`` is in ``ids`` (sorted)."""
    at = bisect_left(ids, record_id)
    return at < len(ids) and ids[at] == record_id


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


def _columns_from_json(items: list[Any]) -> Columns:
    """Every entry checked, column by column over all entries at once
    (:func:`dpone.dlq.columns.entry_columns`); when that fails, the first entry that fails
    is checked alone, for its pointer."""
    columns = entry_columns(items)
    if columns is not None:
        return columns
    entries = [_entry_from_json(doc, position) for position, doc in enumerate(items)]
    return (
        tuple(e.record_id for e in entries),
        tuple(e.sha256 for e in entries),
        tuple(e.code.value for e in entries),
        tuple(e.column for e in entries),
    )


def _entry_from_json(doc: Any, position: int) -> IndexEntry:
    pointer = f"/records/{position}"
    if not isinstance(doc, dict) or set(doc) != ENTRY_KEYS:
        raise _invalid(pointer)
    if not is_ulid(doc["record_id"]):
        raise _invalid(pointer + "/record_id")
    if type(doc["sha256"]) is not str or not _CHECKSUM.fullmatch(doc["sha256"]):
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
    "DlqRunStatus",
    "IndexEntry",
    "StatusReason",
    "build_index_doc",
    "entry",
    "fingerprint",
]
