"""The run writer: takes whole chunks of rejected rows and makes them durable together.

One :meth:`RunWriter.write_chunk` call validates every row of the chunk first (nothing is
written when one of them breaks a limit), creates one file per new record (create-only, from
a small thread pool: the syscalls release the GIL), then makes the whole chunk durable with a
single group commit (:func:`dpone.dlq.fsio.group_sync`) before it returns the record ids.
Nothing is reported as quarantined before it is durable.

A row is identified by its ``record_ref``: a ref already recorded in this run returns the
existing record id and writes nothing, so a chunk retried after a failure neither duplicates
rows nor conflicts (the records of the failed attempt are reused byte for byte).

Not thread-safe: one writer per run, driven by one thread.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any, Literal

import orjson
import structlog

from dpone.dlq import fsio
from dpone.dlq.canonical import verify_checksum
from dpone.dlq.errors import (
    DlqError,
    DlqIntegrityError,
    DlqInvalidReject,
    DlqLimitExceeded,
    DlqRecordConflict,
    DlqRunLocked,
    DlqRunMismatch,
    DlqRunNotOpen,
    DlqStorageError,
    DlqWriterFailed,
)
from dpone.dlq.ids import UlidSequence
from dpone.dlq.index import StatusReason, entry
from dpone.dlq.model import (
    DlqRecord,
    RejectedRow,
    build_record_doc,
    check_reject,
    format_timestamp,
    record_canonical_json,
    sealed_record_bytes,
)
from dpone.dlq.store import (
    HARD_MAX_RECORD_BYTES,
    INDEX_FILE,
    RECORD_FILE,
    RECORDS_DIR,
    RUNS_DIR,
    DlqStore,
    RunHeader,
    dumps,
    parse_record,
    read_index_at,
    release_lock,
    scan_records,
    take_lock,
)
from dpone.faults import checkpoint

log = structlog.get_logger("dpone.dlq")

WriterState = Literal["open", "closed", "aborted", "broken"]
# Room the index header and reason counts take besides the entries (bytes, generous).
_INDEX_OVERHEAD = 2048
_POOL_MIN_CHUNK = 64


@dataclass(frozen=True, slots=True)
class _Item:
    """One record ready to be written: where, what, and its index entry."""

    ref: str
    record_id: str
    name: str
    data: bytes
    sha256: str
    entry: dict[str, Any]
    entry_size: int


@dataclass(frozen=True, slots=True)
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


class RunWriter:
    """Writes the records of one run. Obtain it from :meth:`DlqStore.open_run`."""

    def __init__(
        self,
        store: DlqStore,
        header: RunHeader,
        fds: tuple[int, int, int],
        existing: Mapping[str, DlqRecord] | None = None,
    ) -> None:
        self._store = store
        self._policy = store.policy
        self._header = header
        self.run_id = header.run_id
        self.load_id = header.load_id
        self.pipeline = header.pipeline
        self._run_fd, self._records_fd, self._lock_fd = fds
        self._where = f"{RUNS_DIR}/{self.run_id}/{RECORDS_DIR}"
        self._state: WriterState = "open"
        self._pool: ThreadPoolExecutor | None = None
        # fsync per file waits on the disk, so many workers overlap; syncfs mode only creates
        # files, and ext4 serialises creates in one folder, so two workers are enough.
        self._workers = 16 if store.sync_mode == "fsync" else min(2, os.cpu_count() or 1)
        # Durable and reported: id -> index entry; ref -> id.
        self._entries: dict[str, dict[str, Any]] = {}
        self._by_ref: dict[str, str] = {}
        self._entry_bytes = 0
        # Every record file this run has on disk (reported or not), and the items of failed
        # attempts, kept so that a retry writes the very same bytes.
        self._on_disk: set[str] = set()
        self._pending: dict[str, _Item] = {}
        # Set by any failed write: from then on the disk, not memory, decides what is indexed.
        self._dirty = False
        existing = existing or {}
        for rid in sorted(existing):
            record = existing[rid]
            item = entry(rid, record.sha256, record.reason.code.value, record.reason.column)
            self._entries[rid] = item
            self._by_ref[record.record_ref] = rid
            self._entry_bytes += len(orjson.dumps(item)) + 1
            self._on_disk.add(rid)
        self._ids = UlidSequence(after=max(self._entries) if self._entries else None)
        self._result: RunResult | None = None

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def start(cls, store: DlqStore, created: tuple[int, int, int, RunHeader]) -> RunWriter:
        run_fd, records_fd, lock_fd, header = created
        writer = cls(store, header, (run_fd, records_fd, lock_fd))
        log.info(
            "dlq.run.opened",
            run_id=header.run_id,
            load_id=header.load_id,
            pipeline=header.pipeline,
        )
        return writer

    @classmethod
    def resume(
        cls, store: DlqStore, runs_fd: int, run_id: str, load_id: str, pipeline: str | None
    ) -> RunWriter:
        """Take over an open run whose writer is gone; its records on disk count."""
        where = f"{RUNS_DIR}/{run_id}"
        run_fd, _ = fsio.open_dir(runs_fd, run_id, where)
        fds = [run_fd]
        try:
            lock_fd = take_lock(run_fd, where, create=True)
            if lock_fd is None:
                raise DlqRunLocked(f"{where} is being written by a live process")
            fds.append(lock_fd)
            index = read_index_at(run_fd, run_id)
            if index.status != "open":
                raise DlqRunNotOpen(f"run {run_id} is {index.status}; it cannot be written again")
            if index.load_id != load_id or (pipeline is not None and index.pipeline != pipeline):
                raise DlqRunMismatch(f"run {run_id} belongs to another load or pipeline")
            if index.pii_policy != store.policy.pii_policy:
                raise DlqRunMismatch(f"run {run_id} was started under another pii_policy")
            records_fd, _ = fsio.open_dir(
                run_fd, RECORDS_DIR, f"{where}/{RECORDS_DIR}", create=True
            )
            fds.append(records_fd)
            scan = scan_records(records_fd, run_id, remove_torn=True)
            if scan.bad:
                raise scan.bad[0][1]
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        header = RunHeader.of(index)
        writer = cls(store, header, (run_fd, records_fd, lock_fd), existing=scan.valid)
        try:
            writer._write_index("open", None)
        except BaseException:
            writer._release("broken")
            raise
        log.info("dlq.run.resumed", run_id=run_id, load_id=load_id, records=len(scan.valid))
        return writer

    # --- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> WriterState:
        return self._state

    @property
    def record_count(self) -> int:
        """Records of this run on disk (a resumed run counts what earlier writers left)."""
        return len(self._on_disk)

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
        self._require_open()
        started = time.perf_counter()
        now = self._store.now()
        created_at = format_timestamp(now)
        expires_at = format_timestamp(now + timedelta(days=self._policy.retention_days))
        ids: list[str] = [""] * len(rows)
        chunk: dict[str, _Item] = {}  # ref -> the record this chunk writes for it
        to_build: dict[str, RejectedRow] = {}  # refs this run has never seen
        for pos, row in enumerate(rows):
            ref = row.record_ref
            if not isinstance(ref, str):
                raise DlqInvalidReject("record_ref must be a string")
            known = self._by_ref.get(ref)
            if known is not None:
                ids[pos] = known
            elif ref in chunk or ref in to_build:
                continue
            elif ref in self._pending:
                chunk[ref] = self._pending[ref]
            else:
                to_build[ref] = row
        new_ids = self._ids.batch(len(to_build), now) if to_build else []
        for (ref, row), record_id in zip(to_build.items(), new_ids, strict=True):
            chunk[ref] = self._build(row, record_id, created_at, expires_at)
        items = list(chunk.values())
        self._write_items(items)
        for pos, row in enumerate(rows):
            if not ids[pos]:
                ids[pos] = chunk[row.record_ref].record_id
        log.debug(
            "dlq.chunk.durable",
            run_id=self.run_id,
            rows=len(rows),
            written=len(items),
            seconds=round(time.perf_counter() - started, 6),
        )
        return ids

    def put_records(self, records: Sequence[DlqRecord]) -> list[str]:
        """Write already-built records of this run, create-only and durably.

        The same record again is a no-op; another record under an existing id is
        ``DPONE_DLQ_RECORD_CONFLICT`` (the file on disk is kept as it is).
        """
        self._require_open()
        items = []
        for record in records:
            doc = record.to_json()
            if record.run_id != self.run_id or record.load_id != self.load_id:
                raise DlqInvalidReject("a record of another run or load")
            if not verify_checksum(doc):
                raise DlqInvalidReject("a record whose checksum does not match its content")
            known = self._by_ref.get(record.record_ref)
            if known is not None and known != record.record_id:
                raise DlqRecordConflict(
                    f"run {self.run_id} already holds this row as record {known}"
                )
            items.append(
                self._item(
                    record.record_id,
                    record.record_ref,
                    dumps(doc),
                    record.sha256,
                    record.reason.code.value,
                    record.reason.column,
                )
            )
        self._write_items(items)
        return [item.record_id for item in items]

    def _build(self, row: RejectedRow, record_id: str, created_at: str, expires_at: str) -> _Item:
        code = check_reject(row)
        policy = self._policy
        doc = build_record_doc(
            record_id=record_id,
            run_id=self.run_id,
            load_id=self.load_id,
            row=row,
            code=code,
            policy=policy.pii_policy,
            created_at=created_at,
            expires_at=expires_at,
        )
        try:
            diagnostics = len(orjson.dumps(doc["diagnostics"]))
            canonical = record_canonical_json(doc)
        except (orjson.JSONEncodeError, ValueError):
            raise DlqInvalidReject("a rejected row holds text that is not valid UTF-8") from None
        if diagnostics > policy.max_diagnostic_bytes:
            raise DlqLimitExceeded(
                "max_diagnostic_bytes",
                diagnostics,
                policy.max_diagnostic_bytes,
                "the diagnostics of a rejected row are too large",
            )
        sha = "sha256:" + hashlib.sha256(canonical).hexdigest()
        return self._item(
            record_id,
            row.record_ref,
            sealed_record_bytes(canonical, sha),
            sha,
            code.value,
            row.column,
        )

    def _item(
        self, record_id: str, ref: str, data: bytes, sha: str, code: str, column: str | None
    ) -> _Item:
        if len(data) > self._policy.max_record_bytes:
            raise DlqLimitExceeded(
                "max_record_bytes",
                len(data),
                self._policy.max_record_bytes,
                "a DLQ record is too large",
            )
        item = entry(record_id, sha, code, column)
        return _Item(
            ref=ref,
            record_id=record_id,
            name=f"{record_id}.json",
            data=data,
            sha256=sha,
            entry=item,
            entry_size=len(orjson.dumps(item)) + 1,
        )

    def _check_limits(self, items: Sequence[_Item]) -> None:
        policy = self._policy
        new = {item.record_id for item in items} - self._on_disk
        count = len(self._on_disk) + len(new)
        if count > policy.max_records_per_run:
            raise DlqLimitExceeded(
                "max_records_per_run",
                count,
                policy.max_records_per_run,
                f"run {self.run_id} would hold too many records",
            )
        extra = sum(item.entry_size for item in items if item.record_id not in self._entries)
        index_bytes = _INDEX_OVERHEAD + self._entry_bytes + extra
        if index_bytes > policy.max_index_bytes:
            raise DlqLimitExceeded(
                "max_index_bytes",
                index_bytes,
                policy.max_index_bytes,
                f"the index of run {self.run_id} would be too large",
            )

    def _write_items(self, items: Sequence[_Item]) -> None:
        if not items:
            return
        self._check_limits(items)
        try:
            outcome = fsio.create_many(
                self._records_fd,
                [(item.name, item.data) for item in items],
                fsync_each=self._store.sync_mode == "fsync",
                pool=self._thread_pool(len(items)),
                workers=self._workers,
            )
            self._on_disk.update(items[i].record_id for i in outcome.created)
            if outcome.error is not None:
                raise DlqStorageError.from_oserror(outcome.error, "write records in", self._where)
            for i in outcome.existing:
                self._same_as_existing(items[i])
                self._on_disk.add(items[i].record_id)
            checkpoint("during_dlq_group_commit")
            fsio.group_sync(self._records_fd, self._store.sync_mode, self._where)
        except BaseException:
            self._dirty = True
            for item in items:
                self._pending[item.ref] = item
            raise
        for item in items:
            if item.record_id not in self._entries:
                self._entries[item.record_id] = item.entry
                self._entry_bytes += item.entry_size
            self._by_ref[item.ref] = item.record_id
            self._pending.pop(item.ref, None)

    def _same_as_existing(self, item: _Item) -> None:
        """A create found the name taken: a no-op if it holds this very record."""
        where = f"{self._where}/{item.name}"
        data = fsio.read_file(self._records_fd, item.name, where, HARD_MAX_RECORD_BYTES)
        try:
            existing = parse_record(data or b"", self.run_id, item.record_id, where)
        except DlqIntegrityError:
            existing = None
        if existing is None or existing.sha256 != item.sha256:
            raise DlqRecordConflict(
                f"{where} already exists with another checksum; the existing file is kept"
            )

    def _thread_pool(self, count: int) -> ThreadPoolExecutor | None:
        if count < _POOL_MIN_CHUNK or self._workers <= 1:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="dpone-dlq")
        return self._pool

    # --- ending ---------------------------------------------------------------------------------

    def close(self) -> RunResult:
        """Write the ``closed`` index atomically and release the run."""
        self._require_open()
        unreported = self._unreported()
        if unreported:
            raise DlqWriterFailed(
                f"run {self.run_id} has {unreported} records written by a failed chunk "
                "and never reported durable; retry that chunk or abort the run"
            )
        result = _result_of(self._write_index("closed", None, enforce_limit=True), self.run_id)
        self._result = result
        self._release("closed")
        log.info("dlq.run.closed", run_id=self.run_id, records=result.record_count)
        return result

    def _unreported(self) -> int:
        """Record files on disk that no ``write_chunk`` reported (only after a failure)."""
        if not self._dirty:
            return 0
        names = fsio.entries(self._records_fd, self._where)
        on_disk = {m[1] for e in names if (m := RECORD_FILE.match(e.name))}
        return len(on_disk - self._entries.keys())

    def abort(self, reason: StatusReason = "run_failed") -> RunResult:
        """End the run as ``aborted`` (replay refuses it). Every record on disk is indexed."""
        if self._state == "closed" and self._result is not None:
            index = self._store.abort_run(self.run_id, reason)
            self._result = _result_of(index.to_json(), self.run_id)
            self._state = "aborted"
            return self._result
        if self._state == "aborted" and self._result is not None:
            return self._result
        self._require_open()
        try:
            if self._dirty:
                # A write failed: trust the disk (what verifies there), not this process.
                doc = self._store.rebuild_aborted(self._run_fd, self._header, reason).to_json()
            else:
                doc = self._write_index("aborted", reason)
            result = _result_of(doc, self.run_id)
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
        entries = [] if status == "open" else list(self._entries.values())
        doc = self._store.index_doc(
            self._header, status, reason, owner=status == "open", entries=entries
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
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if state in ("closed", "aborted"):
            release_lock(self._run_fd, self._lock_fd)
        else:
            os.close(self._lock_fd)
        os.close(self._records_fd)
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


def _result_of(doc: Mapping[str, Any], run_id: str) -> RunResult:
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


__all__ = ["RunResult", "RunWriter", "WriterState"]
