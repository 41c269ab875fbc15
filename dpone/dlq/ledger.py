"""What a run holds durable, as its index will list it, and the limits a new write must keep.

A :class:`RunLedger` is the memory of one :class:`dpone.dlq.writer.RunWriter`: the index
entries of every durable record (kept as columns, one tuple per published segment), the
segment each ref's record is in, the published segments, and the index size they add up to.
A record enters it only once its segment is durable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq import segments
from dpone.dlq.encode import ENTRY_FIXED, EncodedChunk, column_json_size
from dpone.dlq.errors import DlqInvalidReject, DlqLimitExceeded, DlqRecordConflict
from dpone.dlq.index import entry
from dpone.dlq.model import DlqRecord
from dpone.dlq.segments import SegmentEntry
from dpone.records import frozen

# Room the index header and reason counts take besides the entries (bytes, generous).
INDEX_OVERHEAD = 2048
SEGMENT_ENTRY_BYTES = 320

#: One published segment's index entries as columns: ids, checksums, codes, columns.
_Columns = tuple[list[str], list[str], list[str], list[str | None]]
#: Index entries as columns, as a scale-out task reports them (any sequences).
EntryColumns = tuple[Sequence[str], Sequence[str], Sequence[str], Sequence[str | None]]


@frozen
class Item:
    """One record ready to be written one by one (a retry): where, what, and what its index
    entry holds."""

    ref: str
    record_id: str
    data: bytes
    sha256: str
    expires_at: str
    code: str
    column: str | None
    entry_size: int

    @classmethod
    def of(cls, built: EncodedChunk, i: int) -> Item:
        """Record ``i`` of a built chunk."""
        return cls(
            ref=built.refs[i],
            record_id=built.record_ids[i],
            data=built.line(i),
            sha256=built.sha256s[i],
            expires_at=built.expires_at,
            code=built.codes[i],
            column=built.columns[i],
            entry_size=built.entry_sizes[i],
        )


def groups(items: Sequence[Item], limit: int) -> list[list[Item]]:
    """``items`` in record-id order, cut into segments of at most max_segment_bytes."""
    out: list[list[Item]] = []
    size = limit + 1
    for item in sorted(items, key=lambda i: i.record_id):
        if size + len(item.data) > limit:
            out.append([])
            size = 0
        out[-1].append(item)
        size += len(item.data)
    return out


class RunLedger:
    """The durable records and segments of one run (``where``: its segments folder)."""

    def __init__(
        self,
        policy: DlqPolicy,
        run_id: str,
        where: str,
        existing: tuple[Sequence[SegmentEntry], Sequence[DlqRecord]] = ((), ()),
    ) -> None:
        self._policy = policy
        self._run_id = run_id
        self._where = where
        self._entry_columns: list[_Columns] = []
        self._record_count = 0
        self._sha_cache: dict[str, str] | None = None  # id -> checksum, built when needed
        #: ref -> record id of every durable record
        self.by_ref: dict[str, str] = {}
        self._entry_bytes = 0
        #: name -> the published segment
        self.segments: dict[str, SegmentEntry] = {}
        #: the JSON size of each column name (few distinct names per run)
        self.column_sizes: dict[str | None, int] = {}
        listed, found = existing
        records = list({record.record_id: record for record in found}.values())
        if records:
            self.add_entries(
                [r.record_id for r in records],
                [r.sha256 for r in records],
                [r.reason.code.value for r in records],
                [r.reason.column for r in records],
            )
        for record in records:
            item = entry(
                record.record_id, record.sha256, record.reason.code.value, record.reason.column
            )
            self.by_ref[record.record_ref] = record.record_id
            self._entry_bytes += len(orjson.dumps(item)) + 1
        self.segments = {seg.name: seg for seg in listed}

    @property
    def record_count(self) -> int:
        return self._record_count

    @property
    def sha_of(self) -> dict[str, str]:
        """Record id -> checksum of every durable record (built on first use: the common
        write path makes new ids only and never asks)."""
        if self._sha_cache is None:
            self._sha_cache = {
                rid: sha
                for ids, shas, _, _ in self._entry_columns
                for rid, sha in zip(ids, shas, strict=True)
            }
        return self._sha_cache

    def column_size(self, column: str | None) -> int:
        """The JSON size of a column name in an index entry."""
        size = self.column_sizes.get(column)
        if size is None:
            size = self.column_sizes[column] = column_json_size(column)
        return size

    def check_limits(self, new: int, entry_sizes: Sequence[int], segments_added: int) -> None:
        """Refuse a chunk of ``new`` records (index entries of ``entry_sizes``) published as
        ``segments_added`` segments that would break the run's record or index limits."""
        policy = self._policy
        count = self._record_count + new
        if count > policy.max_records_per_run:
            raise DlqLimitExceeded(
                "max_records_per_run",
                count,
                policy.max_records_per_run,
                f"run {self._run_id} would hold too many records",
            )
        segment_bytes = SEGMENT_ENTRY_BYTES * (len(self.segments) + segments_added)
        index_bytes = INDEX_OVERHEAD + self._entry_bytes + sum(entry_sizes) + segment_bytes
        if index_bytes > policy.max_index_bytes:
            raise DlqLimitExceeded(
                "max_index_bytes",
                index_bytes,
                policy.max_index_bytes,
                f"the index of run {self._run_id} would be too large",
            )

    def add_entries(
        self, ids: list[str], shas: list[str], codes: list[str], columns: list[str | None]
    ) -> None:
        """Index entries of newly durable records (ids this run does not hold yet)."""
        if self._sha_cache is not None:
            self._sha_cache.update(zip(ids, shas, strict=True))
        self._entry_columns.append((ids, shas, codes, columns))
        self._record_count += len(ids)

    def adopt_encoded(
        self, name: str, data: memoryview, built: EncodedChunk, start: int, stop: int
    ) -> None:
        """Records ``start:stop`` of a freshly built chunk, durable as segment ``name``."""
        ids = built.record_ids[start:stop]
        shas = built.sha256s[start:stop]
        self.segments[name] = SegmentEntry(
            name=name,
            sha256=segments.bytes_checksum(data),
            record_count=len(ids),
            first_record_id=ids[0],
            last_record_id=ids[-1],
            expires_at=built.expires_at,
        )
        self.add_entries(ids, shas, built.codes[start:stop], built.columns[start:stop])
        self._entry_bytes += sum(built.entry_sizes[start:stop])
        self.by_ref.update(zip(built.refs[start:stop], ids, strict=True))

    def adopt_items(self, name: str, data: bytes, group: Sequence[Item]) -> None:
        """Records written one by one, durable as segment ``name`` (some maybe held already)."""
        self.segments[name] = segments.entry_of(name, data, group)
        fresh = [item for item in group if item.record_id not in self.sha_of]
        self.add_entries(
            [item.record_id for item in fresh],
            [item.sha256 for item in fresh],
            [item.code for item in fresh],
            [item.column for item in fresh],
        )
        self._entry_bytes += sum(item.entry_size for item in fresh)
        for item in group:
            self.by_ref[item.ref] = item.record_id

    def adopt_described(self, listed: Sequence[SegmentEntry], entries: EntryColumns) -> int:
        """Segments other processes published, from their descriptors and entries (see
        :meth:`dpone.dlq.writer.RunWriter.adopt_described`); the number of records."""
        ids, shas, codes, columns = entries
        if not len(ids) == len(shas) == len(codes) == len(columns):
            raise DlqInvalidReject("the index entries of a task's segments do not line up")
        if len(set(ids)) != len(ids) or not self.sha_of.keys().isdisjoint(ids):
            raise DlqRecordConflict(f"run {self._run_id}: a task reports a record id twice")
        start = 0
        for seg in listed:
            stop = start + seg.record_count
            if (
                seg.name in self.segments
                or seg.record_count < 1
                or stop > len(ids)
                or ids[start] != seg.first_record_id
                or ids[stop - 1] != seg.last_record_id
            ):
                raise DlqInvalidReject(
                    f"{self._where}/{seg.name}: the task's descriptor does not match its entries"
                )
            start = stop
        if start != len(ids):
            raise DlqInvalidReject("a task reports index entries of no segment it lists")
        known = {code.value for code in ReasonCode}
        if not known.issuperset(codes):
            raise DlqInvalidReject("a task reports a reason code dpone does not know")
        sizes = [
            ENTRY_FIXED + len(c) + self.column_size(col)
            for c, col in zip(codes, columns, strict=True)
        ]
        self.check_limits(len(ids), sizes, len(listed))
        for seg in listed:
            self.segments[seg.name] = seg
        if ids:
            self.add_entries(list(ids), list(shas), list(codes), list(columns))
        self._entry_bytes += sum(sizes)
        return len(ids)

    def entry_list(self) -> list[dict[str, Any]]:
        """Every index entry (one dict per record, built only when the index is written)."""
        return [
            {"record_id": rid, "sha256": sha, "code": code, "column": column}
            for ids, shas, codes, columns in self._entry_columns
            for rid, sha, code, column in zip(ids, shas, codes, columns, strict=True)
        ]

    def entry_tuples(self) -> list[tuple[str, str, str, str | None]]:
        """Every index entry as ``(id, checksum, code, column)``, by id."""
        return sorted(
            (
                (rid, sha, code, column)
                for ids, shas, codes, columns in self._entry_columns
                for rid, sha, code, column in zip(ids, shas, codes, columns, strict=True)
            ),
            key=lambda e: e[0],
        )


__all__ = [
    "INDEX_OVERHEAD",
    "SEGMENT_ENTRY_BYTES",
    "EntryColumns",
    "Item",
    "RunLedger",
    "groups",
]
