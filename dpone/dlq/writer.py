"""The run writer: takes whole chunks of rejected rows and makes them durable together.

One :meth:`RunWriter.write_chunk` call validates every row of the chunk first (nothing is
written when one of them breaks a limit), then publishes the chunk's new records as one
segment file (split at ``max_segment_bytes``; :func:`dpone.dlq.segments.publish`: temp file,
fsync, create-only link, folder fsync) before it returns the record ids. Nothing is reported
as quarantined before it is durable.

A row is identified by its ``record_ref``: a ref already recorded in this run returns the
existing record id and writes nothing, so a chunk retried after a failure neither duplicates
rows nor conflicts (the records of the failed attempt are reused byte for byte, under the
segment name the failed attempt used, so a segment it did publish is recognised).

Not thread-safe: one writer per run, driven by one thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal

from dpone.clock import format_timestamp
from dpone.contracts.reasons import ReasonCode
from dpone.dlq import fsio, segments
from dpone.dlq.encode import EncodedChunk, RecordEncoder
from dpone.dlq.errors import (
    DlqError,
    DlqInvalidReject,
    DlqLimitExceeded,
    DlqRecordConflict,
    DlqRunNotOpen,
    DlqWriterFailed,
)
from dpone.dlq.index import StatusReason
from dpone.dlq.layout import HARD_MAX_SEGMENT_BYTES, INDEX_FILE, RUNS_DIR, dumps
from dpone.dlq.ledger import EntryColumns, Item, RunLedger, groups
from dpone.dlq.lock import release_lock
from dpone.dlq.model import DlqRecord
from dpone.dlq.naming import Naming, SequentialNaming, seq_of
from dpone.dlq.rejects import RejectedRow
from dpone.dlq.result import RunResult, result_of
from dpone.dlq.rundir import RunDir, RunHeader
from dpone.dlq.segments import SEGMENT_FILE, SEGMENTS_DIR, SegmentEntry
from dpone.logs import get_logger

log = get_logger("dpone.dlq")

WriterState = Literal["open", "closed", "aborted", "broken"]


class RunWriter:
    """Writes the records of one run. Obtain it from :meth:`DlqStore.open_run`."""

    def __init__(
        self,
        runs: RunDir,
        header: RunHeader,
        fds: tuple[int, int, int],
        existing: tuple[Sequence[SegmentEntry], Sequence[DlqRecord]] = ((), ()),
        *,
        naming: Naming | None = None,
    ) -> None:
        """``fds``: the run's folder, its segments folder and its lock (``-1``: a writer
        that holds no lock, a scale-out partition's). ``naming``: where timestamps, record
        ids and segment names come from (by default the store's clock, new ULIDs after the
        run's last id, segments numbered on after the last)."""
        self._runs = runs
        self._policy = runs.policy
        self._header = header
        self.run_id = header.run_id
        self.load_id = header.load_id
        self.pipeline = header.pipeline
        self._run_fd, self._segments_fd, self._lock_fd = fds
        self._where = f"{RUNS_DIR}/{self.run_id}/{SEGMENTS_DIR}"
        self._state: WriterState = "open"
        self._ledger = RunLedger(runs.policy, header.run_id, self._where, existing)
        # Items and segment names of failed attempts, kept so that a retry writes the very
        # same bytes under the very same name.
        self._pending: dict[str, Item] = {}
        self._pending_names: dict[tuple[str, ...], str] = {}
        # Set by any failed write: from then on the disk, not memory, decides what is indexed.
        self._dirty = False
        # Refs of durable records no call has reported yet: a failed chunk may have published
        # some of its segments. Reporting them takes a retry of that chunk; close refuses.
        self._unreported_refs: set[str] = set()
        if naming is None:
            naming = SequentialNaming(
                runs.now,
                after=max(self._ledger.sha_of) if self._ledger.record_count else None,
                seq=1 + max((seq_of(name) for name in self._ledger.segments), default=0),
            )
        self._naming = naming
        # Per run: the reason code of each row shape checked, the JSON size of each column.
        self._shapes: dict[Any, ReasonCode] = {}
        self._result: RunResult | None = None

    def write_open_index(self) -> None:
        """Write the run's ``open`` index again (a resumed run; its writer is released when
        that fails)."""
        try:
            self._write_index("open", None)
        except BaseException:
            self._release("broken")
            raise

    # --- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> WriterState:
        return self._state

    @property
    def record_count(self) -> int:
        """Records of this run reported durable (a resumed run counts what earlier writers
        left)."""
        return self._ledger.record_count

    @property
    def result(self) -> RunResult | None:
        return self._result

    def _require_open(self) -> None:
        if self._state != "open":
            raise DlqRunNotOpen(f"the writer of run {self.run_id} is {self._state}")

    # --- writing --------------------------------------------------------------------------------

    def write_chunk(self, rows: Sequence[RejectedRow]) -> list[str]:
        """Write one record per rejected row, durably; the record ids, in row order.

        Raises ``DPONE_DLQ_LIMIT_EXCEEDED`` (nothing of the chunk written), an invalid-reject
        error, ``DPONE_DLQ_RECORD_CONFLICT`` or a transient storage error. After a failure the
        chunk can be retried as is, or the run aborted.
        """
        self._naming.next_chunk()
        self._require_open()
        self._settle_pending()
        started = time.perf_counter()
        now = self._naming.now()
        encoder = RecordEncoder(
            run_id=self.run_id,
            load_id=self.load_id,
            policy=self._policy,
            created_at=format_timestamp(now),
            expires_at=format_timestamp(now + timedelta(days=self._policy.retention_days)),
            checked=self._shapes,
            column_sizes=self._ledger.column_sizes,
        )
        refs = [row.record_ref for row in rows]
        if self._all_new(refs):
            # The common case: every row is new to this run, once. Its records go to disk as
            # built, in record-id order (the ids are made in row order).
            ids = self._naming.ids(len(rows), now) if rows else []
            built = encoder.encode(rows, ids)
            self._ledger.check_limits(
                len(built), built.entry_sizes, len(built.cuts(self._max_segment))
            )
            self._publish_encoded(built)
            written = len(built)
        else:
            ids, written = self._write_general(rows, refs, encoder, now)
        log.debug(
            "dlq.chunk.durable",
            run_id=self.run_id,
            rows=len(rows),
            written=written,
            seconds=round(time.perf_counter() - started, 6),
        )
        return ids

    @property
    def _max_segment(self) -> int:
        return self._policy.max_segment_bytes

    def _all_new(self, refs: list[Any]) -> bool:
        """Whether every ref is a string this run has not seen, and no ref repeats."""
        if self._pending or set(map(type, refs)) - {str}:
            return False
        return self._ledger.by_ref.keys().isdisjoint(refs) and len(set(refs)) == len(refs)

    def _write_general(
        self, rows: Sequence[RejectedRow], refs: list[Any], encoder: RecordEncoder, now: Any
    ) -> tuple[list[str], int]:
        """A chunk with rows this run has seen (a retry, a repeated row): known refs keep
        their ids, refs a failed attempt built keep their bytes, the rest are built."""
        ids: list[str] = [""] * len(rows)
        chunk: dict[str, Item] = {}  # ref -> the record this chunk writes for it
        to_build: dict[str, RejectedRow] = {}  # refs this run has never seen
        for pos, (ref, row) in enumerate(zip(refs, rows, strict=True)):
            if not isinstance(ref, str):
                raise DlqInvalidReject("record_ref must be a string")
            known = self._ledger.by_ref.get(ref)
            if known is not None:
                ids[pos] = known
            elif ref in chunk or ref in to_build:
                continue
            elif ref in self._pending:
                chunk[ref] = self._pending[ref]
            else:
                to_build[ref] = row
        new_ids = self._naming.ids(len(to_build), now) if to_build else []
        built = encoder.encode(list(to_build.values()), new_ids)
        for i in range(len(built)):
            chunk[built.refs[i]] = Item.of(built, i)
        items = list(chunk.values())
        self._write_items(items)
        self._unreported_refs.difference_update(refs)
        for pos, ref in enumerate(refs):
            if not ids[pos]:
                ids[pos] = chunk[ref].record_id
        return ids, len(items)

    def _write_items(self, items: Sequence[Item]) -> None:
        if not items:
            return
        new = {item.record_id: item.entry_size for item in items}
        for record_id in self._ledger.sha_of.keys() & new.keys():
            del new[record_id]
        self._ledger.check_limits(
            len(new), list(new.values()), len(groups(items, self._policy.max_segment_bytes))
        )
        for group in groups(items, self._policy.max_segment_bytes):
            self._publish(group)

    def _publish_encoded(self, built: EncodedChunk) -> None:
        """Publish freshly built records, one segment per cut of ``max_segment_bytes``."""
        adopted: list[tuple[int, int]] = []
        try:
            for start, stop in built.cuts(self._max_segment):
                name = self._naming.segment_name()
                data = built.data(start, stop)
                try:
                    created = segments.publish(
                        self._segments_fd, name, data, f"{self._where}/{name}"
                    )
                    if not created:
                        self._same_as_existing(name, data)
                except BaseException:
                    # Kept for a retry: the same bytes under the same name.
                    self._dirty = True
                    group = [Item.of(built, i) for i in range(start, stop)]
                    self._pending_names[tuple(built.record_ids[start:stop])] = name
                    for item in group:
                        self._pending[item.ref] = item
                    raise
                self._ledger.adopt_encoded(name, data, built, start, stop)
                adopted.append((start, stop))
        except BaseException:
            # Segments this call published are durable, but the call reports nothing.
            for start, stop in adopted:
                self._unreported_refs.update(built.refs[start:stop])
            raise

    def _publish(self, group: list[Item]) -> None:
        ids = tuple(item.record_id for item in group)
        name = self._pending_names.get(ids)
        if name is None:
            name = self._naming.segment_name()
        data = segments.encode([item.data for item in group])
        try:
            if not segments.publish(self._segments_fd, name, data, f"{self._where}/{name}"):
                self._same_as_existing(name, data)
        except BaseException:
            self._dirty = True
            self._pending_names[ids] = name
            for item in group:
                self._pending[item.ref] = item
            raise
        self._pending_names.pop(ids, None)
        self._adopt(name, data, group)

    def _adopt(self, name: str, data: bytes, group: Sequence[Item]) -> None:
        self._ledger.adopt_items(name, data, group)
        for item in group:
            self._pending.pop(item.ref, None)
            self._unreported_refs.add(item.ref)

    def _settle_pending(self) -> None:
        """Adopt the segments a failed attempt did publish before it failed (a crash of the
        folder fsync, say): their records are on disk and must not be written twice."""
        for ids, name in list(self._pending_names.items()):
            group = [item for item in self._pending.values() if item.record_id in set(ids)]
            group.sort(key=lambda i: i.record_id)
            data = segments.encode([item.data for item in group])
            where = f"{self._where}/{name}"
            on_disk = fsio.read_file(self._segments_fd, name, where, HARD_MAX_SEGMENT_BYTES)
            if on_disk is None:
                continue
            if on_disk != data:
                raise DlqRecordConflict(f"{where} exists with other bytes; it is kept")
            fsio.fsync_fd(self._segments_fd, self._where)
            del self._pending_names[ids]
            self._adopt(name, data, group)

    def _same_as_existing(self, name: str, data: bytes | memoryview) -> None:
        """A publish found the name taken: a no-op if it holds these very bytes."""
        where = f"{self._where}/{name}"
        if fsio.read_file(self._segments_fd, name, where, HARD_MAX_SEGMENT_BYTES) != data:
            raise DlqRecordConflict(
                f"{where} already exists with other bytes; the existing file is kept"
            )

    # --- segments published by other processes (scale-out tasks) -------------------------------

    def adopt_described(self, listed: Sequence[SegmentEntry], entries: EntryColumns) -> int:
        """Index segments that scale-out tasks published into this run's folder, from what the
        tasks report: each segment's descriptor (name, byte SHA-256, count, first/last id,
        expiry) and the index entries of its records (ids, checksums, codes, columns; the
        segments' records in segment order). The bytes are not read back here: the task
        hashed what it wrote, and every read and ``dpone ops dlq verify`` check the bytes
        against the index. What is checked is what the index must hold together: each
        descriptor's count and first/last id against its entries, and ids new and unique.
        The number of records adopted."""
        self._require_open()
        return self._ledger.adopt_described(listed, entries)

    def trust_disk(self) -> None:
        """Other processes may have published segments this writer never adopted: an abort
        then indexes what verifies on disk rather than what this writer knows."""
        self._dirty = True

    # --- ending ---------------------------------------------------------------------------------

    def hand_over(self) -> tuple[list[SegmentEntry], list[tuple[str, str, str, str | None]]]:
        """End a writer that holds no lock (a scale-out partition's, for the driver that
        holds the run): the segments it published, by first record id, and the index
        entries of their records ``(id, checksum, code, column)``, by id. No index is
        written."""
        listed = sorted(self._ledger.segments.values(), key=lambda s: s.first_record_id)
        entries = self._ledger.entry_tuples()
        self._state = "closed"
        os.close(self._segments_fd)
        os.close(self._run_fd)
        return listed, entries

    def close(self) -> RunResult:
        """Write the ``closed`` index atomically and release the run."""
        self._require_open()
        unreported = self._unreported()
        if unreported:
            raise DlqWriterFailed(
                f"run {self.run_id} has {unreported} records written by a failed chunk "
                "and never reported durable; retry that chunk or abort the run"
            )
        result = result_of(self._write_index("closed", None, enforce_limit=True), self.run_id)
        self._result = result
        self._release("closed")
        log.info("dlq.run.closed", run_id=self.run_id, records=result.record_count)
        return result

    def _unreported(self) -> int:
        """Records on disk that no call reported (only after a failure): those of the
        segments a failed chunk published, and of any segment this writer does not know."""
        if not self._dirty:
            return 0
        self._settle_pending()
        names = fsio.entries(self._segments_fd, self._where)
        unknown = sum(
            1
            for e in names
            if SEGMENT_FILE.fullmatch(e.name) and e.name not in self._ledger.segments
        )
        return len(self._unreported_refs) + unknown

    def abort(self, reason: StatusReason = "run_failed") -> RunResult:
        """End the run as ``aborted`` (replay refuses it). Every record on disk is indexed."""
        if self._state == "closed" and self._result is not None:
            index = self._runs.abort_run(self.run_id, reason)
            self._result = result_of(index.to_json(), self.run_id)
            self._state = "aborted"
            return self._result
        if self._state == "aborted" and self._result is not None:
            return self._result
        self._require_open()
        try:
            if self._dirty:
                # A write failed: trust the disk (what verifies there), not this process.
                doc = self._runs.rebuild_aborted(self._run_fd, self._header, reason).to_json()
            else:
                doc = self._write_index("aborted", reason)
            result = result_of(doc, self.run_id)
            self._result = result
        except BaseException:
            self._release("broken")
            raise
        self._release("aborted")
        log.warning(
            "dlq.run.aborted", run_id=self.run_id, reason=reason, records=result.record_count
        )
        return result

    def _write_index(
        self,
        status: Literal["open", "closed", "aborted"],
        reason: StatusReason | None,
        *,
        enforce_limit: bool = False,
    ) -> dict[str, Any]:
        """Replace the run's index atomically; the document written."""
        entries = [] if status == "open" else self._ledger.entry_list()
        listed = [] if status == "open" else list(self._ledger.segments.values())
        doc = self._runs.index_doc(
            self._header,
            status,
            reason,
            owner=status == "open",
            entries=entries,
            segments=listed,
        )
        data = dumps(doc)
        if enforce_limit and len(data) > self._policy.max_index_bytes:
            raise DlqLimitExceeded(
                "max_index_bytes",
                len(data),
                self._policy.max_index_bytes,
                f"the index of run {self.run_id} is too large",
            )
        where = f"{RUNS_DIR}/{self.run_id}/{INDEX_FILE}"
        fsio.replace_atomic(self._run_fd, INDEX_FILE, data, where)
        return doc

    def _release(self, state: WriterState) -> None:
        self._state = state
        if state in ("closed", "aborted"):
            release_lock(self._run_fd, self._lock_fd)
        else:
            os.close(self._lock_fd)
        os.close(self._segments_fd)
        os.close(self._run_fd)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close on success; abort on an exception (keeping the original exception)."""
        if self._state != "open":
            return
        if exc_type is None:
            self.close()
            return
        try:
            self.abort()
        except DlqError as err:
            log.error("dlq.run.abort_failed", run_id=self.run_id, code=err.code)


__all__ = ["RunWriter", "WriterState"]
