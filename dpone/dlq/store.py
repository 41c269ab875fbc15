"""The file store of the dead-letter queue (SPEC §5).

Size (over 500 lines): reading, verifying, acknowledging and deleting share the confined
directory-descriptor access and the run lock. It is too long: acknowledgements and deletion
(compaction) are the next modules to split out.

Layout under the root::

    runs/<run_id>/segments/<name>.jsonl      create-only segments, one record per line
    runs/<run_id>/index.json                 dpone.dlq-index.v1, replaced atomically
    runs/<run_id>/writer.lock                held (flock) by the live writer, removed at the end
    acks/<run_id>/<replay_id>-<seq>.jsonl    create-only, one dpone.dlq-replay-ack.v1 per line

A run directory appears atomically: it is built as ``runs/.new-<run_id>-<token>`` (lock taken,
``open`` index durable) and renamed into place, so a run folder without an index or without a
lock holder at birth never exists. Segments are published whole (:mod:`dpone.dlq.segments`).
Every read verifies checksums; :mod:`dpone.ops.verification` checks a whole store. POSIX only
(``fcntl.flock``, directory descriptors).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import stat
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress, pairwise
from operator import not_
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from dpone import durable, signing
from dpone.canonical import digest_without, skip_signature, verify_sealed
from dpone.dlq import fsio, segments
from dpone.dlq.ack import ReplayAck
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
    DlqIndexSignatureInvalid,
    DlqPolicyInvalid,
    DlqPreserveRefused,
    DlqRecordConflict,
    DlqRecordNotFound,
    DlqRunLocked,
    DlqRunMismatch,
    DlqRunNotFound,
    DlqRunNotOpen,
)
from dpone.dlq.fsio import check_identifier
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
    MAX_SEGMENT_BYTES,
    PII_POLICIES,
    DlqPolicy,
    PiiPolicy,
    is_production,
)
from dpone.dlq.segments import SEGMENT_FILE, SEGMENTS_DIR, SegmentEntry
from dpone.faults import checkpoint
from dpone.ids import is_ulid
from dpone.logs import get_logger

if TYPE_CHECKING:
    from dpone.dlq.integrity import Finding
    from dpone.dlq.writer import RunWriter

RUNS_DIR = "runs"
ACKS_DIR = "acks"
INDEX_FILE = "index.json"
LOCK_FILE = "writer.lock"
NEW_RUN_PREFIX = ".new-"
# <replay_id>-<seq>.jsonl; a compacted one is <replay_id>.k<hash>-<seq>.jsonl.
ACK_FILE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})-([0-9]{6})\.jsonl")
# Reads are bounded by the hard maxima, whatever the policy of the writer was.
HARD_MAX_SEGMENT_BYTES = MAX_SEGMENT_BYTES[2]
HARD_MAX_INDEX_BYTES = MAX_INDEX_BYTES[2]
MAX_ACK_SEGMENT_BYTES = 1 << 30
_ACK_PUBLISH_TRIES = 1000
# Threads that remove what retention deleted (unlink and fsync wait on the disk, not the CPU).
_DELETE_WORKERS = 4

_PIPELINE = re.compile(PIPELINE_PATTERN)
# Identifiers (``IDENTIFIER_PATTERN``), each followed by a newline, which none may hold.
_IDENTIFIER_LINES = re.compile(r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\n)*")
log = get_logger("dpone.dlq")


def dumps(doc: Any) -> bytes:
    """How documents are written: compact JSON with sorted keys and a final newline."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def all_identifiers(values: Collection[Any]) -> bool:
    """Whether every value is a safe identifier (:func:`check_identifier`), checked at once."""
    if not set(map(type, values)) <= {str}:
        return False
    text = "\n".join(values) + "\n" if values else ""
    return text.count("\n") == len(values) and _IDENTIFIER_LINES.fullmatch(text) is not None


def segment_where(run_id: str, name: str) -> str:
    return f"{RUNS_DIR}/{run_id}/{SEGMENTS_DIR}/{name}"


def parse_index(
    data: bytes, run_id: str, where: str, *, require_signature: bool = False
) -> DlqIndex:
    doc = segments.sealed_document(data, where, DlqIndexChecksumMismatch)
    index = DlqIndex.from_json(doc)
    if index.run_id != run_id:
        raise DlqIndexInvalid(f"{where} belongs to another run")
    check_index_signature(doc, where, require=require_signature)
    return index


def check_index_signature(doc: Mapping[str, Any], where: str, *, require: bool) -> None:
    """A present signature verifies when a key is configured; ``require``: it must exist."""
    found = signing.problem(doc, signing.keyring(), require=require, what=where)
    if found is not None:
        code, message = found
        raise DlqIndexSignatureInvalid(f"{message} ({code})", fixes=signing.FIXES[code])


def parse_ack_line(line: bytes, run_id: str, at: str) -> ReplayAck:
    ack = ReplayAck.from_json(segments.sealed_document(line, at, DlqAckChecksumMismatch))
    if ack.run_id != run_id:
        raise DlqAckChecksumMismatch(f"{at} acknowledges a record of another run")
    return ack


def parse_ack_segment(data: bytes, run_id: str, where: str) -> list[ReplayAck]:
    """Every acknowledgement of one ack segment, verified (the first bad line raises)."""
    lines = data.split(b"\n")
    if lines.pop():
        raise DlqAckChecksumMismatch(f"{where} line {len(lines) + 1} is truncated")
    if not lines:
        raise DlqAckChecksumMismatch(f"{where} does not verify: it is empty")
    return [parse_ack_line(line, run_id, f"{where} line {n}") for n, line in enumerate(lines, 1)]


def same_ack(a: ReplayAck, b: ReplayAck) -> bool:
    """Two acknowledgements of one replay of one record (only the time may differ)."""
    return (a.record_sha256, a.plan_id, a.idempotency_key, a.outcome) == (
        b.record_sha256,
        b.plan_id,
        b.idempotency_key,
        b.outcome,
    )


def replay_id_of(plan_id: str) -> str:
    """The file-name part of a replay: the hex of its plan id, shortened."""
    return re.sub(r"[^A-Za-z0-9_-]", "", plan_id.removeprefix("sha256:"))[:32] or "replay"


@dataclass(slots=True)
class SegmentScan:
    """Every file of a segments folder, sorted into what verifies and what does not."""

    valid: dict[str, tuple[SegmentEntry, list[DlqRecord], bytes]] = field(default_factory=dict)
    temps: list[str] = field(default_factory=list)
    bad: list[tuple[str, int | None, DlqError]] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)

    def adoptable(self) -> tuple[list[SegmentEntry], list[DlqRecord]]:
        """The segments an index may list, in name order, each record in one segment only.

        A segment whose records are all in earlier ones is a duplicate (left by an
        interrupted compaction) and is left out; one that overlaps partly is left out too,
        for ``verify`` to report.
        """
        seen: dict[str, str] = {}
        kept: list[SegmentEntry] = []
        records: list[DlqRecord] = []
        for name in sorted(self.valid):
            seg, recs, _ = self.valid[name]
            if any(r.record_id in seen for r in recs):
                continue
            for r in recs:
                seen[r.record_id] = r.sha256
            kept.append(seg)
            records.extend(recs)
        records.sort(key=lambda r: r.record_id)
        return kept, records


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


def scan_segments(segments_fd: int, run_id: str, *, remove_temps: bool) -> SegmentScan:
    """Read and verify every segment of a run. Temp files are removed only when asked."""
    scan = SegmentScan()
    for item in sorted(fsio.entries(segments_fd, segment_where(run_id, "")), key=lambda e: e.name):
        name = item.name
        where = segment_where(run_id, name)
        if item.is_symlink() or not item.is_file(follow_symlinks=False):
            scan.bad.append((name, None, fsio.escape(where)))
            continue
        if durable.is_temp_name(name):
            scan.temps.append(name)
            if remove_temps:
                durable.unlink_quietly(segments_fd, name)
            continue
        if SEGMENT_FILE.fullmatch(name) is None:
            scan.stray.append(name)
            continue
        try:
            data = fsio.read_file(segments_fd, name, where, HARD_MAX_SEGMENT_BYTES)
        except DlqError as err:
            scan.bad.append((name, None, err))
            continue
        if data is None:
            continue
        decoded = segments.decode(data, run_id, where)
        if decoded.problems:
            scan.bad.extend((name, line, err) for line, err in decoded.problems)
            continue
        entry_ = segments.entry_of(name, data, decoded.records)
        scan.valid[name] = (entry_, decoded.records, data)
    if remove_temps and scan.temps:
        fsio.fsync_fd(segments_fd, segment_where(run_id, ""))
    return scan


class DlqStore:
    """A dead-letter store rooted at one folder.

    ``clock`` returns aware datetimes (``dpone.testing.FrozenClock`` in tests).
    ``environment`` is the manifest's; ``preserve`` is refused in a production one.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        policy: DlqPolicy | None = None,
        *,
        clock: Clock | None = None,
        environment: str = "dev",
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
        # Indexes verified by this store, by run and content (see read_index_at).
        self._indexes = IndexCache()
        # Ack segments verified by this store, by content (see _ack_lines).
        self._ack_cache: dict[tuple[str, bytes], tuple[list[str], list[str]]] = {}

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
            segments_fd, _ = fsio.open_dir(
                run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}", create=True
            )
            fds.append(segments_fd)
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
        return run_fd, segments_fd, lock_fd, header

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
        segments: Sequence[SegmentEntry] = (),
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
            segments=segments,
            sign=signing.sign,
        )

    # --- reading --------------------------------------------------------------------------------

    def read_index(self, run_id: str) -> DlqIndex:
        """The verified index of a run (checksum, fingerprint, internal consistency)."""
        check_identifier(run_id, "run id")
        with self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
            return read_index_at(run_fd, run_id, cache=self._indexes)

    def read_record(self, run_id: str, record_id: str) -> DlqRecord:
        """One verified record, found through its run's index (an open run: on disk)."""
        check_identifier(run_id, "run id")
        check_identifier(record_id, "record id")
        index = self.read_index(run_id)
        if index.status == "open":
            for record in self.iter_records(run_id, index):
                if record.record_id == record_id:
                    return record
            raise DlqRecordNotFound(f"run {run_id} holds no record {record_id}")
        segment = index.segment_of(record_id)
        listed = index.checksums().get(record_id)
        if segment is None or listed is None:
            raise DlqRecordNotFound(f"run {run_id} lists no record {record_id}")
        for record in self.read_segment(run_id, segment):
            if record.record_id == record_id:
                if record.sha256 != listed:
                    raise DlqIndexDrift(
                        f"{segment_where(run_id, segment.name)} holds record {record_id} "
                        "with another checksum than its index lists"
                    )
                return record
        raise DlqIndexDrift(
            f"{segment_where(run_id, segment.name)} does not hold record {record_id}"
        )

    def read_segment(self, run_id: str, segment: SegmentEntry) -> list[DlqRecord]:
        """The records of one listed segment, verified against its index entry."""
        where = segment_where(run_id, segment.name)
        with self.open_path(RUNS_DIR, run_id, SEGMENTS_DIR, missing=DlqRunNotFound) as fd:
            data = fsio.read_file(fd, segment.name, where, HARD_MAX_SEGMENT_BYTES)
        if data is None:
            raise DlqIndexDrift(f"{where} is in the index but not on disk")
        return segments.read_verified(data, run_id, where, segment)

    def iter_records(self, run_id: str, index: DlqIndex | None = None) -> Iterator[DlqRecord]:
        """Every record of a run, verified, in record-id order.

        A closed or aborted run is read through its index: a segment missing or different
        from its index entry, or a record other than the one listed, is
        ``DPONE_DLQ_INDEX_DRIFT`` (or a checksum error naming segment and line). An open run
        is read from the segments on disk. ``index`` is the run's verified index when the
        caller read it already.
        """
        if index is None or index.run_id != run_id:
            index = self.read_index(run_id)
        if index.status == "open":
            with self.open_path(RUNS_DIR, run_id, SEGMENTS_DIR, missing=DlqRunNotFound) as fd:
                scan = scan_segments(fd, run_id, remove_temps=False)
            if scan.bad:
                raise scan.bad[0][2]
            yield from scan.adoptable()[1]
            return
        checksums = index.checksums()
        ordered = sorted(index.segments, key=lambda seg: seg.first_record_id)
        disjoint = all(a.last_record_id < b.first_record_id for a, b in pairwise(ordered))
        gathered: list[DlqRecord] = []
        for segment in ordered:
            for record in self.read_segment(run_id, segment):
                if checksums.get(record.record_id) != record.sha256:
                    raise DlqIndexDrift(
                        f"{segment_where(run_id, segment.name)} holds record "
                        f"{record.record_id}, which the index does not list as it is"
                    )
                if disjoint:
                    yield record
                else:
                    gathered.append(record)
        if not disjoint:
            gathered.sort(key=lambda r: r.record_id)
            yield from gathered

    def iter_documents(
        self, run_id: str, index: DlqIndex | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every record of an ended run as its JSON document, segment by segment, for readers
        that need a few fields of many records.

        Each segment's bytes must be the bytes its index entry pins (:meth:`pinned_segments`),
        and each line's ``sha256`` member the checksum the index lists for its id
        (:func:`segment_documents`). Neither the line's checksum nor the record contract is
        recomputed (use :meth:`iter_records` for :class:`DlqRecord` objects, which does both).
        """
        if index is None or index.run_id != run_id:
            index = self.read_index(run_id)
        checksums = index.checksums()
        for _, where, data in self.pinned_segments(run_id, index):
            yield from segment_documents(data, where, checksums)

    def pinned_segments(
        self, run_id: str, index: DlqIndex
    ) -> Iterator[tuple[SegmentEntry, str, bytes]]:
        """``(entry, where, bytes)`` of every segment an ended run's verified index lists, in
        record-id order, each holding exactly the bytes its entry pins.

        One SHA-256 per segment covers every byte of every record: each line is exactly the
        line that was verified when it was written (or compacted). A segment whose bytes
        differ is decoded line by line to name the line that does not verify.
        """
        if index.status == "open":
            raise DlqRunNotOpen(f"run {run_id} is open; read it with iter_records")
        with self.open_path(RUNS_DIR, run_id, SEGMENTS_DIR, missing=DlqRunNotFound) as fd:
            for seg in sorted(index.segments, key=lambda s: s.first_record_id):
                where = segment_where(run_id, seg.name)
                data = fsio.read_file(fd, seg.name, where, HARD_MAX_SEGMENT_BYTES)
                if data is None:
                    raise DlqIndexDrift(f"{where} is in the index but not on disk")
                if segments.bytes_checksum(data) != seg.sha256:
                    segments.read_verified(data, run_id, where, seg)  # raises, naming the line
                    raise DlqChecksumMismatch(f"{where} does not verify")  # not reached
                yield seg, where, data

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
                    entries=index.records_json(),
                    segments=index.segments,
                )
                fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), f"{where}/{INDEX_FILE}")
                log.warning("dlq.run.aborted", run_id=run_id, reason=reason)
                return DlqIndex.from_json(doc)
            finally:
                release_lock(run_fd, lock_fd)

    def rebuild_aborted(
        self, run_fd: int, header: RunHeader | str, reason: StatusReason
    ) -> DlqIndex:
        """Write an ``aborted`` index listing exactly the segments that verify on disk.

        ``header`` is the run's (from its index or its writer), or only its id when the index
        is gone. The caller holds the run's lock. Temp files of an interrupted publish are
        removed; segments that do not verify stay on disk, out of the index, for ``verify``
        to report. Every published segment is durable already (fsynced before its link).
        """
        run_id = header if isinstance(header, str) else header.run_id
        where = f"{RUNS_DIR}/{run_id}"
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}", create=True)
        try:
            scan = scan_segments(segments_fd, run_id, remove_temps=True)
        finally:
            os.close(segments_fd)
        listed, records = scan.adoptable()
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
            segments=listed,
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
        """Acknowledge the replay of one record (see :meth:`write_acks`)."""
        fields = ack.body() if isinstance(ack, ReplayAck) else {**ack, "record_id": record_id}
        if fields.get("record_id") != record_id:
            raise DlqAckMismatch("the acknowledgement names another record")
        plan_id = str(fields.get("plan_id", ""))
        return self.write_acks(run_id, replay_id_of(plan_id), [fields], index=index)[0]

    def write_acks(
        self,
        run_id: str,
        replay_id: str,
        acks: Collection[ReplayAck | Mapping[str, Any]],
        *,
        index: DlqIndex | None = None,
    ) -> list[ReplayAck]:
        """Acknowledge a batch of replayed records of one closed run, as one ack segment.

        Each ack is a :class:`ReplayAck` or its fields (``schema``, ``run_id``,
        ``acknowledged_at`` and ``sha256`` may be left out and are filled in; ``record_id`` is
        required). Each must name a record the run's index lists, with its checksum. A record
        acknowledged already by the same replay (same plan, key and outcome) is a no-op that
        returns the existing acknowledgement; any other acknowledgement of it is
        ``DPONE_DLQ_ACK_CONFLICT``. ``index`` is the run's verified index when the caller
        has it. The new acknowledgements are durable when this returns.
        """
        check_identifier(run_id, "run id")
        check_identifier(replay_id, "replay id")
        if index is None or index.run_id != run_id:
            index = self.read_index(run_id)
        if index.status != "closed":
            raise DlqRunNotOpen(f"run {run_id} is {index.status}; only closed runs are replayed")
        checksums = index.checksums()
        sealed_all = [self._seal_ack(run_id, ack) for ack in acks]
        # Every ack segment is verified (bytes, per line); whole acknowledgements are built
        # only when this batch names a record acknowledged before (a replay resumed).
        acked = self.ack_checksums(run_id)
        existing = self.read_acks(run_id) if any(a.record_id in acked for a in sealed_all) else {}
        out: list[ReplayAck] = []
        fresh: dict[str, ReplayAck] = {}
        for sealed in sealed_all:
            listed = checksums.get(sealed.record_id)
            if listed is None:
                raise DlqIndexDrift(f"run {run_id} lists no record {sealed.record_id}")
            if sealed.record_sha256 != listed:
                raise DlqAckMismatch(
                    f"the acknowledgement of record {sealed.record_id} names another checksum"
                )
            prior = existing.get(sealed.record_id) or fresh.get(sealed.record_id)
            if prior is not None:
                if not same_ack(prior, sealed):
                    raise DlqAckConflict(
                        f"record {sealed.record_id} of run {run_id} is acknowledged already "
                        "by another replay"
                    )
                out.append(prior)
                continue
            fresh[sealed.record_id] = sealed
            out.append(sealed)
        if fresh:
            data = segments.encode([dumps(a.to_json()) for a in fresh.values()])
            self._publish_acks(run_id, replay_id, data)
        return out

    def _publish_acks(self, run_id: str, replay_id: str, data: bytes) -> str:
        folder = f"{ACKS_DIR}/{run_id}"
        with self.open_path(ACKS_DIR, run_id, create=True) as fd:
            taken = [
                int(m[2])
                for e in fsio.entries(fd, folder)
                if (m := ACK_FILE.fullmatch(e.name)) and m[1] == replay_id
            ]
            seq = max(taken, default=0) + 1
            for _ in range(_ACK_PUBLISH_TRIES):
                name = f"{replay_id}-{seq:06d}.jsonl"
                if segments.publish(fd, name, data, f"{folder}/{name}"):
                    return name
                seq += 1  # another replay process took this name first
        raise DlqAckConflict(f"{folder} has no free acknowledgement segment name left")

    def _seal_ack(self, run_id: str, ack: ReplayAck | Mapping[str, Any]) -> ReplayAck:
        if isinstance(ack, ReplayAck):
            doc = ack.body()
        else:
            doc = dict(ack)
            doc.pop("sha256", None)
            doc.setdefault("schema", "dpone.dlq-replay-ack.v1")
            doc.setdefault("acknowledged_at", format_timestamp(self.now()))
        if doc.setdefault("run_id", run_id) != run_id:
            raise DlqAckMismatch("the acknowledgement names another run")
        check_identifier(doc.get("record_id"), "record id")
        return ReplayAck.from_json(doc, require_checksum=False).sealed()

    def read_ack(self, run_id: str, record_id: str) -> ReplayAck:
        check_identifier(record_id, "record id")
        ack = self.read_acks(run_id).get(record_id)
        if ack is None:
            raise DlqRecordNotFound(f"record {record_id} of run {run_id} is not acknowledged")
        return ack

    def read_acks(self, run_id: str) -> dict[str, ReplayAck]:
        """Every acknowledgement of a run, verified, by record id (empty when there is none).

        Files that are not named like an ack segment are left to ``verify`` (a stray file); a
        symlink is a path escape and an acknowledgement that does not verify raises. The same
        acknowledgement in two segments (an interrupted compaction) counts once; two
        different ones of one record are ``DPONE_DLQ_ACK_CONFLICT``.
        """
        check_identifier(run_id, "run id")
        acks: dict[str, ReplayAck] = {}
        for _, _, found in self.ack_segments(run_id):
            for ack in found:
                prior = acks.get(ack.record_id)
                if prior is not None and not same_ack(prior, ack):
                    raise DlqAckConflict(
                        f"record {ack.record_id} of run {run_id} has two different acknowledgements"
                    )
                acks.setdefault(ack.record_id, ack)
        return acks

    def ack_checksums(self, run_id: str) -> dict[str, str]:
        """record id -> the sha256 of its acknowledgement, every line verified (what
        retention needs of the acknowledgements: which records, and which acks).

        Lines in the form dpone writes are checked on their bytes (one SHA-256 each, see
        :func:`sealed_ack_columns`); anything else, or the same record acknowledged twice,
        goes through :meth:`read_acks`, which parses and judges every acknowledgement.
        """
        check_identifier(run_id, "run id")
        out: dict[str, str] = {}
        for _, _, data in self._ack_files(run_id):
            columns = self._ack_lines(run_id, data)
            if columns is None:
                return {rid: a.sha256 for rid, a in self.read_acks(run_id).items()}
            ids, shas = columns
            fresh = dict(zip(ids, shas, strict=True))
            if len(fresh) == len(ids) and fresh.keys().isdisjoint(out):
                out.update(fresh)
                continue
            for rid, sha in zip(ids, shas, strict=True):
                if out.setdefault(rid, sha) != sha:
                    return {rid: a.sha256 for rid, a in self.read_acks(run_id).items()}
        return out

    def _ack_lines(self, run_id: str, data: bytes) -> tuple[list[str], list[str]] | None:
        """The record ids and ack checksums of an ack segment in the form dpone writes, every
        line's bytes verified (:func:`sealed_ack_columns`); ``None`` when a line needs the
        full check. Remembered by the segment's bytes (their SHA-256), so retention's plan,
        check and sweep verify each segment once."""
        key = (run_id, hashlib.sha256(data).digest())
        cached = self._ack_cache.get(key)
        if cached is not None:
            return cached
        found = sealed_ack_columns(data, run_id)
        if found is not None:
            self._ack_cache[key] = found
        return found

    def ack_segments(self, run_id: str) -> list[tuple[str, bytes, list[ReplayAck]]]:
        """Every ack segment of a run as ``(name, bytes, acks)``, verified, in name order."""
        return [
            (name, data, parse_ack_segment(data, run_id, where))
            for name, where, data in self._ack_files(run_id)
        ]

    def ack_segment_ids(self, run_id: str) -> list[tuple[str, bytes, list[str]]]:
        """Every ack segment as ``(name, bytes, record id per line)``: each line's checksum
        verified, without building the acknowledgements (what retention needs)."""
        out = []
        for name, where, data in self._ack_files(run_id):
            fast = self._ack_lines(run_id, data)
            if fast is not None:
                out.append((name, data, fast[0]))
                continue
            lines = data.split(b"\n")
            if lines.pop():
                raise DlqAckChecksumMismatch(f"{where} line {len(lines) + 1} is truncated")
            ids = []
            for number, line in enumerate(lines, start=1):
                at = f"{where} line {number}"
                try:
                    doc = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise DlqAckChecksumMismatch(f"{at} does not verify: not JSON") from None
                if not isinstance(doc, dict) or not verify_sealed(line, doc):
                    raise DlqAckChecksumMismatch(f"{at} does not verify: its checksum differs")
                if doc.get("run_id") != run_id or not is_ulid(doc.get("record_id")):
                    raise DlqAckChecksumMismatch(f"{at} acknowledges a record of another run")
                ids.append(doc["record_id"])
            out.append((name, data, ids))
        return out

    def _ack_files(self, run_id: str) -> list[tuple[str, str, bytes]]:
        """``(name, where, bytes)`` of every ack segment of a run, in name order."""
        folder = f"{ACKS_DIR}/{run_id}"
        if not (self.root / ACKS_DIR / run_id).exists():
            return []
        out = []
        with self.open_path(ACKS_DIR, run_id) as fd:
            for item in sorted(fsio.entries(fd, folder), key=lambda e: e.name):
                where = f"{folder}/{item.name}"
                if item.is_symlink() or not item.is_file(follow_symlinks=False):
                    raise fsio.escape(where)
                if ACK_FILE.fullmatch(item.name) is None:
                    continue
                data = fsio.read_file(fd, item.name, where, MAX_ACK_SEGMENT_BYTES) or b""
                out.append((item.name, where, data))
        return out

    # --- retention --------------------------------------------------------------------------------

    def delete_records(
        self, run_id: str, record_ids: Collection[str], *, known: DlqIndex | None = None
    ) -> DlqIndex:
        """Delete records of an ended run with their acknowledgements (for retention).

        Segment by segment: one whose records all go is removed; one that keeps some is
        compacted into a new create-only segment holding exactly the kept lines (published
        and durable first). Then the index is replaced atomically, listing the new segments
        and the remaining records; then the old segments are removed; then the
        acknowledgements of the deleted records. A crash at any point leaves a store that
        lists every kept record exactly once: the leftovers (an unlisted compacted segment, an
        old segment the index no longer lists) hold nothing the index needs, and calling this
        again with the same ids, or ``verify --repair``, removes them. The caller decides what
        may go (``dpone.ops.retention``); an open run, or one with a live writer, is refused.
        ``known`` is the run's index as the caller verified it (see :func:`read_index_at`).
        """
        index, rest = self._delete_until_index(run_id, record_ids, known)
        rest()
        return index

    def delete_many(
        self, deletes: Sequence[tuple[str, Collection[str], DlqIndex | None]]
    ) -> list[DlqIndex]:
        """:meth:`delete_records` of several runs ``(run_id, record_ids, known)``: each run's
        compaction and index replace in the order given, on this thread; what follows the
        index replace of each run (removing the old segments, then the acknowledgements, each
        made durable) on worker threads meanwhile, since it waits on the disk. Every step of
        one run keeps its order, so a crash leaves each run where :meth:`delete_records`
        could have left it. Returns when everything is durable; the first failure raises
        then (the runs before it are done)."""
        indexes: list[DlqIndex] = []
        futures: list[Future[None]] = []
        failed: BaseException | None = None
        with ThreadPoolExecutor(_DELETE_WORKERS, thread_name_prefix="dpone-dlq-delete") as pool:
            for run_id, record_ids, known in deletes:
                try:
                    index, rest = self._delete_until_index(run_id, record_ids, known)
                except BaseException as exc:  # the runs before it finish first
                    failed = exc
                    break
                indexes.append(index)
                futures.append(pool.submit(rest))
        for future in futures:
            future.result()
        if failed is not None:
            raise failed
        return indexes

    def _delete_until_index(
        self, run_id: str, record_ids: Collection[str], known: DlqIndex | None
    ) -> tuple[DlqIndex, Callable[[], None]]:
        """The first part of :meth:`delete_records`, up to the replaced index (the run's lock
        held); the rest, which lets go of the lock, to be called once."""
        check_identifier(run_id, "run id")
        doomed = set(record_ids)
        if not all_identifiers(doomed):
            for record_id in doomed:
                check_identifier(record_id, "record id")  # raises, with the right code
        where = f"{RUNS_DIR}/{run_id}"
        seg_where = f"{where}/{SEGMENTS_DIR}"
        held = ExitStack()
        try:
            run_fd = held.enter_context(self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound))
            lock_fd = take_lock(run_fd, where, create=True)
            if lock_fd is None:
                raise DlqRunLocked(f"{where} has a live writer; its records cannot be deleted")
            held.callback(release_lock, run_fd, lock_fd)
            index = read_index_at(run_fd, run_id, known, cache=self._indexes)
            if index.status == "open":
                raise DlqRunNotOpen(f"run {run_id} is open; records of an open run stay")
            segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, seg_where, create=True)
            held.callback(os.close, segments_fd)
            index, replaced = self._compact(run_fd, segments_fd, index, doomed)
            if replaced:
                self._indexes.drop(run_id)
        except BaseException:
            held.close()
            raise

        def rest() -> None:
            with held:
                for name in replaced:
                    durable.unlink_quietly(segments_fd, name)
                if replaced:
                    fsio.fsync_fd(segments_fd, seg_where)
                remove_leftovers(segments_fd, run_id, index)
            self._delete_acks(run_id, doomed)
            log.info("dlq.records.deleted", run_id=run_id, records=len(doomed))

        return index, rest

    def _compact(
        self, run_fd: int, segments_fd: int, index: DlqIndex, doomed: set[str]
    ) -> tuple[DlqIndex, list[str]]:
        """Publish the compacted segments and replace the index; the index and the names of
        the segments it no longer lists (for the caller to remove)."""
        run_id = index.run_id
        ids = index.record_ids
        listed: list[SegmentEntry] = []
        replaced: list[str] = []
        for seg in index.segments:
            inside = ids[
                bisect_left(ids, seg.first_record_id) : bisect_right(ids, seg.last_record_id)
            ]
            going = sum(map(doomed.__contains__, inside))
            if not going:
                listed.append(seg)
                continue
            replaced.append(seg.name)
            if going == len(inside) == seg.record_count:
                continue  # every record goes: the segment is removed, nothing to read
            where = segment_where(run_id, seg.name)
            data = fsio.read_file(segments_fd, seg.name, where, HARD_MAX_SEGMENT_BYTES)
            if data is None:
                raise DlqIndexDrift(f"{where} is in the index but not on disk")
            kept = [
                line
                for line in segments.pinned_lines(data, where, seg)
                if line.record_id not in doomed
            ]
            if not kept:
                continue
            new_data = segments.encode([line.data for line in kept])
            name = segments.compacted_name(seg.name, new_data)
            new_where = segment_where(run_id, name)
            if not segments.publish(segments_fd, name, new_data, new_where):
                on_disk = fsio.read_file(segments_fd, name, new_where, HARD_MAX_SEGMENT_BYTES)
                if on_disk != new_data:
                    raise DlqRecordConflict(f"{new_where} exists with other bytes; it is kept")
            listed.append(
                SegmentEntry(
                    name=name,
                    sha256=segments.bytes_checksum(new_data),
                    record_count=len(kept),
                    first_record_id=kept[0].record_id,
                    last_record_id=kept[-1].record_id,
                    expires_at=max(line.expires_at for line in kept),
                )
            )
        if not replaced:
            return index, replaced
        checkpoint("retention_after_compact")
        doc = self.index_doc(
            RunHeader.of(index),
            index.status,
            index.status_reason,
            owner=False,
            entries=index.records_json(doomed),
            segments=listed,
        )
        where = f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"
        fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), where)
        checkpoint("retention_after_index")
        return DlqIndex.built(doc, tuple(listed)), replaced

    def remove_acks(self, run_id: str, record_ids: Collection[str]) -> None:
        """Remove the acknowledgements of records an ended run no longer lists (what an
        interrupted retention leaves; ``verify --repair`` calls it). Listed records keep
        theirs."""
        check_identifier(run_id, "run id")
        listed = self.read_index(run_id).checksums()
        self._delete_acks(run_id, {rid for rid in record_ids if rid not in listed})

    def _delete_acks(self, run_id: str, doomed: set[str]) -> None:
        """Rewrite the ack segments that acknowledge deleted records (create-only, then
        remove the old segment); the same acknowledgement in two segments counts once."""
        folder = f"{ACKS_DIR}/{run_id}"
        touched = [
            (name, data, ids)
            for name, data, ids in self.ack_segment_ids(run_id)
            if not doomed.isdisjoint(ids)
        ]
        if not touched:
            return
        with self.open_path(ACKS_DIR, run_id) as fd:
            for name, data, ids in touched:
                kept = list(map(not_, map(doomed.__contains__, ids)))
                if any(kept):
                    match = ACK_FILE.fullmatch(name)
                    assert match is not None
                    new_data = b"\n".join(compress(data.split(b"\n"), kept)) + b"\n"
                    stem = re.sub(r"\.k[0-9a-f]{12}$", "", match[1])
                    digest = segments.bytes_checksum(new_data)[7:19]
                    new_name = f"{stem}.k{digest}-{match[2]}.jsonl"
                    segments.publish(fd, new_name, new_data, f"{folder}/{new_name}")
                durable.unlink_quietly(fd, name)
            fsio.fsync_fd(fd, folder)

    # --- the writer's own check -----------------------------------------------------------------

    def check_written(self, index: DlqIndex) -> list[Finding]:
        """The findings of an ended run that this process just wrote ``index`` for: the file
        must hold that very index, and every segment it lists the bytes it lists (checked by
        their SHA-256; the lines were verified when they were written or compacted). The
        whole-store verify is :func:`dpone.ops.verification.verify_store`."""
        from dpone.dlq.integrity import verify_written

        return verify_written(self, index)


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


_ACK_ID_KEY = b'"record_id":"'
_ACK_SHA_KEY = b',"sha256":"sha256:'
_ACK_SCHEMA_MEMBER = b',"schema":"dpone.dlq-replay-ack.v1"'
_ULID_ALPHABET = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def sealed_ack_columns(data: bytes, run_id: str) -> tuple[list[str], list[str]] | None:
    """``(record ids, ack checksums)``, line by line, of an ack segment whose every line is in
    the form dpone writes (canonical JSON with its checksum member inserted) and hashes to
    its checksum; ``None`` when any line is not (for the caller to judge it in full).

    In that form an acknowledgement is flat, its members in key order: ``run_id``, then
    ``schema``, then ``sha256``, then ``target_identity``. A JSON string cannot hold a bare
    quote, so ``,"sha256":"sha256:`` and ``"record_id":"`` can only be members; each must be
    on every line exactly once (counted over the whole segment, every line having one). The
    bytes of a line without its checksum member must hash to it: one SHA-256 per line, the
    rest is found where it was on the line before (the lines of one replay look alike).
    """
    lines = data.split(b"\n")
    if lines.pop() or not lines:
        return None
    before = b',"run_id":' + orjson.dumps(run_id) + _ACK_SCHEMA_MEMBER
    width = len(before)
    key, key_len, id_key, id_len = _ACK_SHA_KEY, len(_ACK_SHA_KEY), _ACK_ID_KEY, len(_ACK_ID_KEY)
    sha256 = hashlib.sha256
    rest = at = 0  # bytes after the checksum member, and where the id member starts
    ids: list[bytes] = []
    claimed: list[bytes] = []
    hexes: list[str] = []
    for line in lines:
        end = len(line) - rest
        if end < width or not line.startswith(key, end):
            end = line.rfind(key)
            rest = len(line) - end
        if not line.startswith(id_key, at):
            at = line.find(id_key)
        if at < 0 or end < width or not line.startswith(before, end - width):
            return None
        claimed.append(line[end + key_len : end + key_len + 65])  # 64 digits and the quote
        hexes.append(sha256(line[:end] + line[end + key_len + 65 :]).hexdigest())
        ids.append(line[at + id_len : at + id_len + 27])  # the id and its closing quote
    count = len(lines)
    digests = '"'.join(hexes) + '"'
    joined = b"".join(ids)
    if (
        data.count(key) != count
        or data.count(id_key) != count
        or b"".join(claimed) != digests.encode()
        or not _ulids_quoted(joined, count)
    ):
        return None
    record_ids = joined.decode().split('"')
    checksums = ("sha256:" + digests.replace('"', '"sha256:')).split('"')
    return record_ids[:-1], checksums[:-1]


def _ulids_quoted(joined: bytes, count: int) -> bool:
    """Whether ``joined`` is ``count`` ULIDs, each followed by a quote."""
    return (
        len(joined) == 27 * count
        and joined[26::27] == b'"' * count
        and not joined[0::27].translate(None, b"01234567")
        and not joined.translate(None, _ULID_ALPHABET + b'"')
    )


def segment_documents(
    data: bytes, where: str, checksums: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """The records of pinned segment bytes as JSON documents, each one a record the index
    lists as it is (``checksums``: the index's record id -> checksum)."""
    lines = data.split(b"\n")
    lines.pop()
    for number, line in enumerate(lines, start=1):
        doc = orjson.loads(line)
        if not isinstance(doc, dict) or checksums.get(doc.get("record_id", "")) != doc.get(
            "sha256"
        ):
            raise DlqIndexDrift(f"{where} line {number} is not a record the index lists as it is")
        yield doc


def leftover_segments(scan: SegmentScan, index: DlqIndex) -> list[str]:
    """Unlisted segments of an ended run that hold nothing the index needs.

    What an interrupted compaction leaves: its new segment before the index named it, or the
    old segment after. Each of their records is either gone from the index or held by a
    listed segment that verifies, so removing them loses nothing.
    """
    listed = {s.name for s in index.segments}
    held = {r.record_id for name in listed if name in scan.valid for r in scan.valid[name][1]}
    checksums = index.checksums()
    return [
        name
        for name, (_, records, _) in sorted(scan.valid.items())
        if name not in listed
        and all(r.record_id not in checksums or r.record_id in held for r in records)
    ]


def remove_leftovers(segments_fd: int, run_id: str, index: DlqIndex) -> list[str]:
    """Remove the temp files and :func:`leftover_segments` of an ended run (lock held).

    Only unlisted names are read: the listed segments are taken to hold what the index says
    (``verify`` checks that), which is what makes an unlisted one redundant or not.
    """
    where = segment_where(run_id, "")
    listed = {s.name for s in index.segments}
    names = [e.name for e in fsio.entries(segments_fd, where)]
    temps = [n for n in names if durable.is_temp_name(n)]
    unlisted = [n for n in names if SEGMENT_FILE.fullmatch(n) and n not in listed]
    for name in temps:
        durable.unlink_quietly(segments_fd, name)
    doomed = []
    checksums = index.checksums()
    for name in unlisted:
        data = fsio.read_file(segments_fd, name, where + name, HARD_MAX_SEGMENT_BYTES) or b""
        decoded = segments.decode(data, run_id, where + name)
        if not decoded.problems and all(
            checksums.get(r.record_id) in (None, r.sha256) for r in decoded.records
        ):
            durable.unlink_quietly(segments_fd, name)
            doomed.append(name)
    if temps or doomed:
        fsio.fsync_fd(segments_fd, where)
    return doomed


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        if fd >= 0:
            with suppress(OSError):
                os.close(fd)
    fds.clear()


class IndexCache:
    """Indexes a store verified, each under the SHA-256 of the very bytes it was parsed from.

    A file whose bytes hash the same is the same file: its index is returned without parsing
    and checking every entry again (retention reads each index when it plans and again when
    it applies). What a read checks besides the bytes is the signature, under the keyring of
    the moment: an entry holds for that keyring only. Bounded by the records it holds.
    """

    def __init__(self, max_records: int = 2_000_000) -> None:
        self.max_records = max_records
        self._held: dict[str, tuple[bytes, object, DlqIndex]] = {}
        self._records = 0
        self._lock = threading.Lock()

    def get(self, run_id: str, digest: bytes) -> DlqIndex | None:
        held = self._held.get(run_id)
        if held is None or held[0] != digest or held[1] is not signing.keyring():
            return None
        return held[2]

    def put(self, run_id: str, digest: bytes, index: DlqIndex) -> None:
        ring = signing.keyring()
        with self._lock:
            self._drop(run_id)
            if index.record_count > self.max_records:
                return
            while self._held and self._records + index.record_count > self.max_records:
                self._drop(next(iter(self._held)))
            self._held[run_id] = (digest, ring, index)
            self._records += index.record_count

    def drop(self, run_id: str) -> None:
        with self._lock:
            self._drop(run_id)

    def _drop(self, run_id: str) -> None:
        held = self._held.pop(run_id, None)
        if held is not None:
            self._records -= held[2].record_count


def read_index_at(
    run_fd: int,
    run_id: str,
    known: DlqIndex | None = None,
    *,
    require_signature: bool = False,
    cache: IndexCache | None = None,
) -> DlqIndex:
    """The run's verified index. ``known`` is an index this process verified before: when the
    file's bytes are the sealed bytes of that very document (same checksum, and the bytes
    hash to it), it is returned without parsing a million entries again. ``cache`` holds the
    indexes verified before by their bytes (:class:`IndexCache`)."""
    where = f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"
    data = fsio.read_file(run_fd, INDEX_FILE, where, HARD_MAX_INDEX_BYTES)
    if data is None:
        raise DlqIndexMissing(f"{where} does not exist")
    if len(data) > HARD_MAX_INDEX_BYTES:
        raise DlqIndexInvalid(f"{where} is larger than any DLQ index may be")
    if known is not None and known.run_id == run_id and sealed_claim(data) == known.sha256:
        return known
    if cache is None or require_signature:
        return parse_index(data, run_id, where, require_signature=require_signature)
    digest = hashlib.sha256(data).digest()
    index = cache.get(run_id, digest)
    if index is None:
        index = parse_index(data, run_id, where)
        cache.put(run_id, digest, index)
    return index


_SEALED_SHA = re.compile(rb',"sha256":"(sha256:[0-9a-f]{64})"')


def sealed_claim(data: bytes) -> str | None:
    """The checksum a document in dpone's sealed form carries, when its bytes hash to it.

    In the canonical form the top-level checksum member is the only one followed by the
    members after ``sha256`` in key order, so the last match of the member is taken, and
    the bytes without it must hash to its value; anything else gives ``None``.
    """
    found = _SEALED_SHA.match(data, max(data.rfind(b',"sha256":"sha256:'), 0))
    if found is None:
        return None
    end = skip_signature(data, found.end())
    claim = found.group(1).decode()
    digest = digest_without(data, found.start(), end)
    return claim if digest is not None and "sha256:" + digest == claim else None


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
            if not _still_named(fd, run_fd):
                # The holder released it and removed the name between our open and our
                # flock: this lock is on a file nobody else will look at any more.
                os.close(fd)
                return take_lock(run_fd, where, create=create) if create else None
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def _still_named(fd: int, run_fd: int) -> bool:
    """Whether ``LOCK_FILE`` in ``run_fd`` is still the file open as ``fd``."""
    try:
        named = os.stat(LOCK_FILE, dir_fd=run_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


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
    """Remove the lock file, then let go of the lock (the run is no longer being written).

    Removing the name while still holding the lock is what makes it safe: a process that
    opened the old file meanwhile gets the lock only after we let go, and then sees that
    the name is gone (:func:`take_lock` checks the inode after ``flock``) and backs off.
    """
    durable.unlink_quietly(run_fd, LOCK_FILE)
    os.close(lock_fd)


__all__ = [
    "ACKS_DIR",
    "INDEX_FILE",
    "LOCK_FILE",
    "RUNS_DIR",
    "SEGMENTS_DIR",
    "DlqStore",
    "IndexCache",
    "RunHeader",
    "SegmentScan",
    "leftover_segments",
    "name_exists",
    "parse_ack_line",
    "parse_ack_segment",
    "parse_index",
    "read_index_at",
    "remove_leftovers",
    "replay_id_of",
    "same_ack",
    "scan_segments",
    "sealed_ack_columns",
    "sealed_claim",
    "segment_documents",
    "segment_where",
    "take_lock",
    "writer_alive",
]
