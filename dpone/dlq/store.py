"""The file store of the dead-letter queue (SPEC §5).

Layout under the root::

    runs/<run_id>/records/<record_id>.json   create-only, one per rejected row
    runs/<run_id>/index.json                 dpone.dlq-index.v1, replaced atomically
    runs/<run_id>/writer.lock                held (flock) by the live writer, removed at the end
    acks/<run_id>/<record_id>.json           dpone.dlq-replay-ack.v1, create-only

A run directory appears atomically: it is built as ``runs/.new-<run_id>-<token>`` (lock taken,
``open`` index durable) and renamed into place, so a run folder without an index or without a
lock holder at birth never exists. Every read verifies checksums; :mod:`dpone.dlq.verify`
checks a whole store. POSIX only (``fcntl.flock``, directory descriptors).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from dpone.dlq import fsio
from dpone.dlq.ack import ReplayAck
from dpone.dlq.canonical import verify_checksum
from dpone.dlq.errors import (
    DlqAckChecksumMismatch,
    DlqAckConflict,
    DlqAckMismatch,
    DlqChecksumMismatch,
    DlqError,
    DlqIndexChecksumMismatch,
    DlqIndexDrift,
    DlqIndexInvalid,
    DlqIndexMissing,
    DlqPolicyInvalid,
    DlqPreserveRefused,
    DlqRecordInvalid,
    DlqRecordNotFound,
    DlqRunLocked,
    DlqRunMismatch,
    DlqRunNotFound,
    DlqRunNotOpen,
)
from dpone.dlq.ids import check_identifier
from dpone.dlq.index import (
    PIPELINE_PATTERN,
    DlqIndex,
    RunStatus,
    StatusReason,
    build_index_doc,
    entry,
)
from dpone.dlq.model import Clock, DlqRecord, format_timestamp, system_clock
from dpone.dlq.policy import (
    MAX_INDEX_BYTES,
    MAX_RECORD_BYTES,
    PII_POLICIES,
    DlqPolicy,
    PiiPolicy,
    is_production,
)

if TYPE_CHECKING:
    from dpone.dlq.summary import DlqSummary
    from dpone.dlq.verify import Finding
    from dpone.dlq.writer import RunWriter

RUNS_DIR = "runs"
ACKS_DIR = "acks"
RECORDS_DIR = "records"
INDEX_FILE = "index.json"
LOCK_FILE = "writer.lock"
NEW_RUN_PREFIX = ".new-"
RECORD_FILE = re.compile(r"^([0-7][0-9A-HJKMNP-TV-Z]{25})\.json$")
# Reads are bounded by the hard maxima, whatever the policy of the writer was.
HARD_MAX_RECORD_BYTES = MAX_RECORD_BYTES[2]
HARD_MAX_INDEX_BYTES = MAX_INDEX_BYTES[2]
MAX_ACK_BYTES = 65_536

_PIPELINE = re.compile(PIPELINE_PATTERN)
log = structlog.get_logger("dpone.dlq")


def dumps(doc: Any) -> bytes:
    """How documents are written: compact JSON with sorted keys and a final newline."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def is_torn(data: bytes) -> bool:
    """What a crash between create and write leaves: nothing, or zeroed blocks."""
    return not data.strip(b"\x00")


def record_where(run_id: str, name: str) -> str:
    return f"{RUNS_DIR}/{run_id}/{RECORDS_DIR}/{name}"


def parse_record(data: bytes, run_id: str, record_id: str, where: str) -> DlqRecord:
    """Verify and decode one record file's bytes; typed errors, no values in messages."""
    if len(data) > HARD_MAX_RECORD_BYTES:
        raise DlqRecordInvalid(f"{where} is larger than any DLQ record may be")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise DlqChecksumMismatch(f"{where} does not verify: it is not a JSON document") from None
    if not isinstance(doc, dict) or not verify_checksum(doc):
        raise DlqChecksumMismatch(f"{where} does not verify: its checksum does not match")
    record = DlqRecord.from_json(doc)
    if record.record_id != record_id or record.run_id != run_id:
        raise DlqRecordInvalid(f"{where} holds another record than its name says")
    return record


def parse_index(data: bytes, run_id: str, where: str) -> DlqIndex:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise DlqIndexChecksumMismatch(f"{where} does not verify: it is not JSON") from None
    if not isinstance(doc, dict) or not verify_checksum(doc):
        raise DlqIndexChecksumMismatch(f"{where} does not verify: its checksum does not match")
    index = DlqIndex.from_json(doc)
    if index.run_id != run_id:
        raise DlqIndexInvalid(f"{where} belongs to another run")
    return index


def parse_ack(data: bytes, run_id: str, record_id: str, where: str) -> ReplayAck:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise DlqAckChecksumMismatch(f"{where} does not verify: it is not JSON") from None
    if not isinstance(doc, dict) or not verify_checksum(doc):
        raise DlqAckChecksumMismatch(f"{where} does not verify: its checksum does not match")
    ack = ReplayAck.from_json(doc)
    if ack.run_id != run_id or ack.record_id != record_id:
        raise DlqAckChecksumMismatch(f"{where} acknowledges another record than its name says")
    return ack


@dataclass(slots=True)
class RecordScan:
    """Every file of a records folder, sorted into what verifies and what does not."""

    valid: dict[str, DlqRecord] = field(default_factory=dict)
    torn: list[str] = field(default_factory=list)
    bad: list[tuple[str, DlqError]] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What an index says about its run besides status and records."""

    run_id: str
    load_id: str
    pipeline: str | None
    created_at: str
    pii_policy: PiiPolicy
    retention_days: int

    @classmethod
    def of(cls, index: DlqIndex) -> RunHeader:
        return cls(
            index.run_id,
            index.load_id,
            index.pipeline,
            index.created_at,
            index.pii_policy,
            index.retention_days,
        )


def scan_records(records_fd: int, run_id: str, *, remove_torn: bool) -> RecordScan:
    """Read and verify every record of a run. Torn files are removed only when asked."""
    scan = RecordScan()
    for item in sorted(fsio.entries(records_fd, record_where(run_id, "")), key=lambda e: e.name):
        name = item.name
        where = record_where(run_id, name)
        match = RECORD_FILE.match(name)
        if item.is_symlink() or not item.is_file(follow_symlinks=False):
            scan.bad.append((name, fsio.escape(where)))
            continue
        if match is None:
            scan.stray.append(name)
            continue
        try:
            data = fsio.read_file(records_fd, name, where, HARD_MAX_RECORD_BYTES)
            if data is None:
                continue
            if is_torn(data):
                scan.torn.append(name)
                if remove_torn:
                    with fsio.os_errors("remove", where):
                        os.unlink(name, dir_fd=records_fd)
                continue
            scan.valid[match[1]] = parse_record(data, run_id, match[1], where)
        except DlqError as err:
            scan.bad.append((name, err))
    if remove_torn and scan.torn:
        fsio.fsync_fd(records_fd, record_where(run_id, ""))
    return scan


class DlqStore:
    """A dead-letter store rooted at one folder.

    ``clock`` returns aware datetimes (``dpone.testing.FrozenClock`` in tests).
    ``environment`` is the manifest's; ``preserve`` is refused in a production one.
    ``sync`` picks the group-commit strategy (see :mod:`dpone.dlq.fsio`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        policy: DlqPolicy | None = None,
        *,
        clock: Clock | None = None,
        environment: str = "dev",
        sync: fsio.SyncMode = "auto",
    ) -> None:
        self.root = Path(root)
        self.policy = policy if policy is not None else DlqPolicy(directory=str(self.root))
        if self.policy.pii_policy not in PII_POLICIES:
            raise DlqPolicyInvalid("dlq.pii_policy must be reference_only, masked or preserve")
        problems = self.policy.out_of_range()
        if problems:
            name, value, low, high = problems[0]
            raise DlqPolicyInvalid(f"dlq.{name} is {value}, outside {low}..{high}")
        if self.policy.pii_policy == "preserve" and is_production(environment):
            raise DlqPreserveRefused(
                "pii_policy preserve is refused in a production environment",
                fixes=("use pii_policy: reference_only (the default) or masked",),
            )
        self.clock: Clock = clock if clock is not None else system_clock
        self.environment = environment
        self.sync_mode = fsio.resolve_sync_mode(sync)

    # --- time and paths -------------------------------------------------------------------------

    def now(self) -> datetime:
        moment = self.clock()
        format_timestamp(moment)  # refuses a naive clock early
        return moment

    @contextmanager
    def open_path(
        self, *parts: str, create: bool = False, missing: type[DlqError] | None = None
    ) -> Iterator[int]:
        """A descriptor of folder ``root/parts...``, reached without following symlinks."""
        with ExitStack() as stack:
            fd = fsio.open_root(self.root, create=create, missing=missing)
            stack.callback(os.close, fd)
            where = ""
            for part in parts:
                parent_where = where or "."
                where = f"{where}/{part}" if where else part
                child, created = fsio.open_dir(fd, part, where, create=create, missing=missing)
                stack.callback(os.close, child)
                if created:
                    fsio.fsync_fd(fd, parent_where)
                fd = child
            yield fd

    def exists(self) -> bool:
        return self.root.is_dir()

    def run_ids(self) -> list[str]:
        """Every run folder name, sorted (temporary ``.new-*`` folders excluded)."""
        if not (self.root / RUNS_DIR).exists():
            return []
        with self.open_path(RUNS_DIR) as runs_fd:
            names = [e.name for e in fsio.entries(runs_fd, RUNS_DIR)]
        return sorted(name for name in names if not name.startswith("."))

    # --- writing --------------------------------------------------------------------------------

    def open_run(self, run_id: str, load_id: str, *, pipeline: str | None = None) -> RunWriter:
        """Start (or resume, after its writer died) a run; its ``open`` index is durable."""
        from dpone.dlq.writer import RunWriter

        check_identifier(run_id, "run id")
        check_identifier(load_id, "load id")
        if pipeline is not None and not _PIPELINE.match(pipeline):
            raise DlqRunMismatch("the pipeline name is not a safe identifier")
        with self.open_path(RUNS_DIR, create=True) as runs_fd:
            if not name_exists(runs_fd, run_id, f"{RUNS_DIR}/{run_id}"):
                created = self._create_run(runs_fd, run_id, load_id, pipeline)
                if created is not None:
                    return RunWriter.start(self, created)
            return RunWriter.resume(self, runs_fd, run_id, load_id, pipeline)

    def _create_run(
        self, runs_fd: int, run_id: str, load_id: str, pipeline: str | None
    ) -> tuple[int, int, int, RunHeader] | None:
        """Build the run folder aside and rename it into place; ``None`` if one appeared."""
        tmp = f"{NEW_RUN_PREFIX}{run_id}-{secrets.token_hex(4)}"
        where = f"{RUNS_DIR}/{run_id}"
        fds: list[int] = []
        try:
            run_fd, _ = fsio.open_dir(runs_fd, tmp, where, create=True)
            fds.append(run_fd)
            lock_fd = take_lock(run_fd, where, create=True)
            if lock_fd is None:  # a folder nobody else knows of: cannot be locked already
                raise DlqRunLocked(f"{where} is being created by another process")
            fds.append(lock_fd)
            records_fd, _ = fsio.open_dir(
                run_fd, RECORDS_DIR, f"{where}/{RECORDS_DIR}", create=True
            )
            fds.append(records_fd)
            header = self.header(run_id, load_id, pipeline)
            doc = self.index_doc(header, "open", None, owner=True, entries=[])
            fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), f"{where}/{INDEX_FILE}")
            with fsio.os_errors("create", where):
                try:
                    os.rename(tmp, run_id, src_dir_fd=runs_fd, dst_dir_fd=runs_fd)
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                        raise
                    _close_all(fds)
                    shutil.rmtree(tmp, dir_fd=runs_fd, ignore_errors=True)
                    return None
                os.fsync(runs_fd)
        except BaseException:
            _close_all(fds)
            shutil.rmtree(tmp, dir_fd=runs_fd, ignore_errors=True)
            raise
        return run_fd, records_fd, lock_fd, header

    def header(self, run_id: str, load_id: str, pipeline: str | None) -> RunHeader:
        """The header of a run this store starts now, under its policy."""
        return RunHeader(
            run_id,
            load_id,
            pipeline,
            format_timestamp(self.now()),
            self.policy.pii_policy,
            self.policy.retention_days,
        )

    def index_doc(
        self,
        header: RunHeader,
        status: RunStatus,
        status_reason: StatusReason | None,
        *,
        owner: bool,
        entries: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """A full index document (checksum included) stamped with this store's clock."""
        return build_index_doc(
            run_id=header.run_id,
            load_id=header.load_id,
            pipeline=header.pipeline,
            status=status,
            status_reason=status_reason,
            pii_policy=header.pii_policy,
            retention_days=header.retention_days,
            created_at=header.created_at,
            updated_at=format_timestamp(self.now()),
            owner_pid=os.getpid() if owner else None,
            entries=entries,
        )

    # --- reading --------------------------------------------------------------------------------

    def read_index(self, run_id: str) -> DlqIndex:
        """The verified index of a run (checksum, fingerprint, internal consistency)."""
        check_identifier(run_id, "run id")
        with self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
            return read_index_at(run_fd, run_id)

    def read_record(self, run_id: str, record_id: str) -> DlqRecord:
        """One verified record (its checksum; its id and run match its place)."""
        check_identifier(run_id, "run id")
        check_identifier(record_id, "record id")
        name = f"{record_id}.json"
        where = record_where(run_id, name)
        with self.open_path(RUNS_DIR, run_id, RECORDS_DIR, missing=DlqRunNotFound) as fd:
            data = fsio.read_file(fd, name, where, HARD_MAX_RECORD_BYTES)
        if data is None:
            raise DlqRecordNotFound(f"{where} does not exist")
        return parse_record(data, run_id, record_id, where)

    def iter_records(self, run_id: str, index: DlqIndex | None = None) -> Iterator[DlqRecord]:
        """Every record of a run, verified, in record-id order.

        A closed or aborted run is read through its index: a record missing or different
        from its index entry is ``DPONE_DLQ_INDEX_DRIFT``. An open run is read from disk.
        ``index`` is the run's verified index when the caller read it already.
        """
        if index is None or index.run_id != run_id:
            index = self.read_index(run_id)
        with self.open_path(RUNS_DIR, run_id, RECORDS_DIR, missing=DlqRunNotFound) as fd:
            if index.status == "open":
                scan = scan_records(fd, run_id, remove_torn=False)
                if scan.bad:
                    raise scan.bad[0][1]
                yield from (scan.valid[rid] for rid in sorted(scan.valid))
                return
            for item in index.entries:
                name = f"{item.record_id}.json"
                where = record_where(run_id, name)
                data = fsio.read_file(fd, name, where, HARD_MAX_RECORD_BYTES)
                if data is None:
                    raise DlqIndexDrift(f"{where} is in the index but not on disk")
                record = parse_record(data, run_id, item.record_id, where)
                if record.sha256 != item.sha256:
                    raise DlqIndexDrift(f"{where} differs from its index entry")
                yield record

    # --- recovery -------------------------------------------------------------------------------

    def recover_abandoned(self, pipeline: str | None = None) -> list[str]:
        """Close as ``aborted`` every open run (of ``pipeline``, if given) whose writer is gone.

        Each index is rebuilt from the records that verify on disk; torn files (a crash
        between create and write) are removed. Runs whose index does not verify are left
        for ``dpone ops dlq verify``. Returns the run ids it aborted.
        """
        aborted = []
        for run_id in self.run_ids():
            try:
                with self.open_path(RUNS_DIR, run_id) as run_fd:
                    index = read_index_at(run_fd, run_id)
                    if index.status != "open":
                        continue
                    if pipeline is not None and index.pipeline != pipeline:
                        continue
                    lock_fd = take_lock(run_fd, f"{RUNS_DIR}/{run_id}", create=True)
                    if lock_fd is None:
                        continue  # a live writer
                    try:
                        self.rebuild_aborted(run_fd, RunHeader.of(index), "writer_gone")
                    finally:
                        release_lock(run_fd, lock_fd)
                aborted.append(run_id)
            except DlqError as err:
                log.warning("dlq.recover.skipped", run_id=run_id, code=err.code)
        self.remove_stale_new_runs()
        return aborted

    def abort_run(self, run_id: str, reason: StatusReason = "run_failed") -> DlqIndex:
        """Mark a run ``aborted``: an open run whose writer is gone, or a closed run whose
        load never committed. An aborted run stays as it is."""
        check_identifier(run_id, "run id")
        with self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
            where = f"{RUNS_DIR}/{run_id}"
            lock_fd = take_lock(run_fd, where, create=True)
            if lock_fd is None:
                raise DlqRunLocked(f"{where} has a live writer; abort it through its writer")
            try:
                index = read_index_at(run_fd, run_id)
                if index.status == "aborted":
                    return index
                if index.status == "open":
                    return self.rebuild_aborted(run_fd, RunHeader.of(index), reason)
                doc = self.index_doc(
                    RunHeader.of(index),
                    "aborted",
                    reason,
                    owner=False,
                    entries=[e.to_json() for e in index.entries],
                )
                fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), f"{where}/{INDEX_FILE}")
                log.warning("dlq.run.aborted", run_id=run_id, reason=reason)
                return DlqIndex.from_json(doc)
            finally:
                release_lock(run_fd, lock_fd)

    def rebuild_aborted(
        self, run_fd: int, header: RunHeader | str, reason: StatusReason
    ) -> DlqIndex:
        """Write an ``aborted`` index listing exactly the records that verify on disk.

        ``header`` is the run's (from its index or its writer), or only its id when the index
        is gone. The caller holds the run's lock. Torn files are removed; records that do not
        verify stay on disk, out of the index, for ``verify`` to report.
        """
        run_id = header if isinstance(header, str) else header.run_id
        where = f"{RUNS_DIR}/{run_id}"
        records_fd, _ = fsio.open_dir(run_fd, RECORDS_DIR, f"{where}/{RECORDS_DIR}", create=True)
        try:
            scan = scan_records(records_fd, run_id, remove_torn=True)
            # What the index names must itself be durable before the index is.
            fsio.group_sync(records_fd, self.sync_mode, f"{where}/{RECORDS_DIR}")
        finally:
            os.close(records_fd)
        records = [scan.valid[rid] for rid in sorted(scan.valid)]
        if isinstance(header, str):
            header = RunHeader(
                run_id,
                records[0].load_id if records else run_id,
                None,
                format_timestamp(self.now()),
                records[0].payload.policy if records else self.policy.pii_policy,
                self.policy.retention_days,
            )
        doc = self.index_doc(
            header,
            "aborted",
            reason,
            owner=False,
            entries=[
                entry(r.record_id, r.sha256, r.reason.code.value, r.reason.column) for r in records
            ],
        )
        fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), f"{where}/{INDEX_FILE}")
        log.warning("dlq.run.aborted", run_id=run_id, reason=reason, records=len(records))
        return DlqIndex.from_json(doc)

    def remove_stale_new_runs(self) -> list[str]:
        """Remove ``runs/.new-*`` folders of run creations that died before the rename."""
        removed: list[str] = []
        if not (self.root / RUNS_DIR).exists():
            return removed
        with self.open_path(RUNS_DIR) as runs_fd:
            for item in fsio.entries(runs_fd, RUNS_DIR):
                if not item.name.startswith(NEW_RUN_PREFIX) or item.is_symlink():
                    continue
                where = f"{RUNS_DIR}/{item.name}"
                try:
                    tmp_fd, _ = fsio.open_dir(runs_fd, item.name, where)
                except DlqError:
                    continue
                try:
                    lock_fd = take_lock(tmp_fd, where, create=False)
                    if lock_fd is None and name_exists(tmp_fd, LOCK_FILE, where):
                        continue  # still being created by a live process
                    if lock_fd is not None:
                        os.close(lock_fd)
                finally:
                    os.close(tmp_fd)
                shutil.rmtree(item.name, dir_fd=runs_fd, ignore_errors=True)
                removed.append(item.name)
            if removed:
                fsio.fsync_fd(runs_fd, RUNS_DIR)
        return removed

    # --- acknowledgements -----------------------------------------------------------------------

    def write_ack(
        self,
        run_id: str,
        record_id: str,
        ack: ReplayAck | Mapping[str, Any],
        *,
        index: DlqIndex | None = None,
    ) -> ReplayAck:
        """Acknowledge the replay of one record of a closed run, create-only.

        ``ack`` is a :class:`ReplayAck` or its fields (``schema``, ``run_id``, ``record_id``,
        ``acknowledged_at`` and ``sha256`` may be left out and are filled in). Writing the same
        acknowledgement again is a no-op; another one is ``DPONE_DLQ_ACK_CONFLICT``.
        ``index`` is the run's verified index when a caller acknowledges many records of one
        run (a replay): it saves reading and verifying the whole index once per record.
        """
        check_identifier(run_id, "run id")
        check_identifier(record_id, "record id")
        if index is None or index.run_id != run_id:
            index = self.read_index(run_id)
        if index.status != "closed":
            raise DlqRunNotOpen(f"run {run_id} is {index.status}; only closed runs are replayed")
        record = self.read_record(run_id, record_id)
        if record.sha256 != _indexed_checksum(index, record_id):
            raise DlqIndexDrift(f"record {record_id} of run {run_id} differs from its index")
        sealed = self._seal_ack(run_id, record_id, ack)
        if sealed.record_sha256 != record.sha256:
            raise DlqAckMismatch(
                f"the acknowledgement of record {record_id} names another record checksum"
            )
        name = f"{record_id}.json"
        where = f"{ACKS_DIR}/{run_id}/{name}"
        with self.open_path(ACKS_DIR, run_id, create=True) as fd:
            if fsio.write_new_durably(fd, name, dumps(sealed.to_json()), where):
                return sealed
            data = fsio.read_file(fd, name, where, MAX_ACK_BYTES) or b""
        existing = parse_ack(data, run_id, record_id, where)
        if existing.sha256 != sealed.sha256:
            raise DlqAckConflict(f"{where} already holds another acknowledgement")
        return existing

    def write_acks(
        self,
        run_id: str,
        replay_id: str,
        acks: Collection[ReplayAck | Mapping[str, Any]],
        *,
        index: DlqIndex | None = None,
    ) -> list[ReplayAck]:
        """Acknowledge a batch of replayed records of one run (one replay, ``replay_id``)."""
        check_identifier(replay_id, "replay id")
        if index is None or index.run_id != run_id:
            index = self.read_index(run_id)
        out = []
        for ack in acks:
            record_id = ack.record_id if isinstance(ack, ReplayAck) else ack["record_id"]
            out.append(self.write_ack(run_id, record_id, ack, index=index))
        return out

    def _seal_ack(
        self, run_id: str, record_id: str, ack: ReplayAck | Mapping[str, Any]
    ) -> ReplayAck:
        if isinstance(ack, ReplayAck):
            doc = ack.body()
        else:
            doc = dict(ack)
            doc.pop("sha256", None)
            doc.setdefault("schema", "dpone.dlq-replay-ack.v1")
            doc.setdefault("acknowledged_at", format_timestamp(self.now()))
        if doc.setdefault("run_id", run_id) != run_id:
            raise DlqAckMismatch("the acknowledgement names another run")
        if doc.setdefault("record_id", record_id) != record_id:
            raise DlqAckMismatch("the acknowledgement names another record")
        return ReplayAck.from_json(doc, require_checksum=False).sealed()

    def read_ack(self, run_id: str, record_id: str) -> ReplayAck:
        check_identifier(run_id, "run id")
        check_identifier(record_id, "record id")
        name = f"{record_id}.json"
        where = f"{ACKS_DIR}/{run_id}/{name}"
        with self.open_path(ACKS_DIR, run_id, missing=DlqRecordNotFound) as fd:
            data = fsio.read_file(fd, name, where, MAX_ACK_BYTES)
        if data is None:
            raise DlqRecordNotFound(f"{where} does not exist")
        return parse_ack(data, run_id, record_id, where)

    def read_acks(self, run_id: str) -> dict[str, ReplayAck]:
        """Every acknowledgement of a run, verified, by record id (empty when there is none).

        Files that are not named like a record are left to ``verify`` (a stray file); a
        symlink is a path escape and an acknowledgement that does not verify raises.
        """
        check_identifier(run_id, "run id")
        folder = f"{ACKS_DIR}/{run_id}"
        if not (self.root / ACKS_DIR / run_id).exists():
            return {}
        acks: dict[str, ReplayAck] = {}
        with self.open_path(ACKS_DIR, run_id) as fd:
            for item in sorted(fsio.entries(fd, folder), key=lambda e: e.name):
                match = RECORD_FILE.match(item.name)
                where = f"{folder}/{item.name}"
                if item.is_symlink() or not item.is_file(follow_symlinks=False):
                    raise fsio.escape(where)
                if match is None:
                    continue
                data = fsio.read_file(fd, item.name, where, MAX_ACK_BYTES) or b""
                acks[match[1]] = parse_ack(data, run_id, match[1], where)
        return acks

    def delete_records(self, run_id: str, record_ids: Collection[str]) -> DlqIndex:
        """Delete records of an ended run with their acknowledgements (for retention).

        The index is rewritten first, atomically, keeping the run's status and listing exactly
        the records that remain; then the record files and their acknowledgements are removed
        and their folders synced. An interrupted call leaves files the index no longer lists
        (``verify`` reports them); calling it again with the same ids finishes the job, which
        is why ids the index does not list are removed from disk without complaint. The
        caller decides what may go (``dpone.dlq.retention`` plans it); an open run, or one
        with a live writer, is refused.
        """
        check_identifier(run_id, "run id")
        doomed = sorted(set(record_ids))
        for record_id in doomed:
            check_identifier(record_id, "record id")
        where = f"{RUNS_DIR}/{run_id}"
        with self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
            lock_fd = take_lock(run_fd, where, create=True)
            if lock_fd is None:
                raise DlqRunLocked(f"{where} has a live writer; its records cannot be deleted")
            try:
                index = read_index_at(run_fd, run_id)
                if index.status == "open":
                    raise DlqRunNotOpen(f"run {run_id} is open; records of an open run stay")
                gone = set(doomed)
                kept = [e.to_json() for e in index.entries if e.record_id not in gone]
                if len(kept) != index.record_count:
                    doc = self.index_doc(
                        RunHeader.of(index),
                        index.status,
                        index.status_reason,
                        owner=False,
                        entries=kept,
                    )
                    fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), f"{where}/{INDEX_FILE}")
                    index = DlqIndex.from_json(doc)
                records_fd, _ = fsio.open_dir(run_fd, RECORDS_DIR, f"{where}/{RECORDS_DIR}")
                try:
                    _unlink_all(records_fd, doomed, f"{where}/{RECORDS_DIR}")
                finally:
                    os.close(records_fd)
            finally:
                release_lock(run_fd, lock_fd)
        if (self.root / ACKS_DIR / run_id).exists():
            with self.open_path(ACKS_DIR, run_id) as acks_fd:
                _unlink_all(acks_fd, doomed, f"{ACKS_DIR}/{run_id}")
        log.info("dlq.records.deleted", run_id=run_id, records=len(doomed))
        return index

    # --- whole-store services -------------------------------------------------------------------

    def verify(self, run_id: str | None = None) -> list[Finding]:
        """Every integrity finding of the store (or of one run); empty when clean."""
        from dpone.dlq.verify import verify_store

        return verify_store(self, run_id)

    def repair(self, run_id: str | None = None) -> list[Finding]:
        """Fix what is safe to fix (abandoned runs, torn files, stale temp files)."""
        from dpone.dlq.verify import repair_store

        return repair_store(self, run_id)

    def summary(self, run_id: str | None = None) -> DlqSummary:
        """Counts per reason code and column, per run."""
        from dpone.dlq.summary import summarize

        return summarize(self, run_id)


# --- helpers shared with the writer and verify --------------------------------------------------


def name_exists(dir_fd: int, name: str, where: str) -> bool:
    """Whether ``name`` exists in ``dir_fd`` (a symlink there is a path escape)."""
    with fsio.os_errors("inspect", where):
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
    if stat.S_ISLNK(info.st_mode):
        raise fsio.escape(where)
    return True


def _indexed_checksum(index: DlqIndex, record_id: str) -> str | None:
    """The checksum ``index`` lists for ``record_id`` (entries are sorted by id)."""
    at = bisect_left(index.entries, record_id, key=attrgetter("record_id"))
    if at < len(index.entries) and index.entries[at].record_id == record_id:
        return index.entries[at].sha256
    return None


def _unlink_all(dir_fd: int, record_ids: list[str], where: str) -> None:
    """Remove ``<id>.json`` for every id that exists in ``dir_fd``, then sync the folder."""
    for record_id in record_ids:
        name = f"{record_id}.json"
        with fsio.os_errors("remove", f"{where}/{name}"), suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
    fsio.fsync_fd(dir_fd, where)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        if fd >= 0:
            with suppress(OSError):
                os.close(fd)
    fds.clear()


def read_index_at(run_fd: int, run_id: str) -> DlqIndex:
    where = f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"
    data = fsio.read_file(run_fd, INDEX_FILE, where, HARD_MAX_INDEX_BYTES)
    if data is None:
        raise DlqIndexMissing(f"{where} does not exist")
    if len(data) > HARD_MAX_INDEX_BYTES:
        raise DlqIndexInvalid(f"{where} is larger than any DLQ index may be")
    return parse_index(data, run_id, where)


def take_lock(run_fd: int, where: str, *, create: bool) -> int | None:
    """Take the run's writer lock without waiting; ``None`` if a live process holds it.

    ``flock`` locks belong to the open file, so the kernel drops them when their holder dies
    (SIGKILL included): a lock that can be taken means the writer is gone.
    """
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
    with fsio.os_errors("lock", f"{where}/{LOCK_FILE}"):
        try:
            fd = os.open(LOCK_FILE, flags, fsio.FILE_MODE, dir_fd=run_fd)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def writer_alive(run_fd: int, where: str) -> bool:
    """Whether a live process holds the run's writer lock (nothing is created or changed)."""
    with fsio.os_errors("inspect", f"{where}/{LOCK_FILE}"):
        try:
            fd = os.open(LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=run_fd)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def release_lock(run_fd: int, lock_fd: int) -> None:
    """Remove the lock file, then let go of the lock (the run is no longer being written)."""
    fsio.unlink_quietly(run_fd, LOCK_FILE)
    os.close(lock_fd)


__all__ = [
    "ACKS_DIR",
    "INDEX_FILE",
    "LOCK_FILE",
    "RECORDS_DIR",
    "RUNS_DIR",
    "DlqStore",
    "RecordScan",
    "RunHeader",
    "name_exists",
    "parse_ack",
    "parse_index",
    "parse_record",
    "read_index_at",
    "scan_records",
    "take_lock",
    "writer_alive",
]
