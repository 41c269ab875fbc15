"""The file store of the dead-letter queue (SPEC §5).

Size (over 500 lines): opening, reading and recovering a run share its folder's descriptors
and its lock, and :class:`DlqStore` stays the one entry point: acknowledgements
(:mod:`dpone.dlq.acks`) and deletion (:mod:`dpone.dlq.compaction`) are reached through its
one-line methods; the layout, the run lock and index reading that all of them share are
:mod:`dpone.dlq.rundir`.

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
import os
import re
import secrets
import shutil
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from dpone import durable, signing
from dpone.dlq import acks as dlq_acks
from dpone.dlq import compaction, fsio, segments
from dpone.dlq.ack import ReplayAck
from dpone.dlq.errors import (
    DlqChecksumMismatch,
    DlqError,
    DlqIndexDrift,
    DlqPolicyInvalid,
    DlqPreserveRefused,
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
    DlqRunStatus,
    StatusReason,
    build_index_doc,
    entry,
)
from dpone.dlq.model import Clock, DlqRecord, format_timestamp, system_clock
from dpone.dlq.policy import PII_POLICIES, DlqPolicy, is_production
from dpone.dlq.rundir import (
    HARD_MAX_SEGMENT_BYTES,
    INDEX_FILE,
    LOCK_FILE,
    NEW_RUN_PREFIX,
    RUNS_DIR,
    IndexCache,
    RunHeader,
    check_index_signature,
    dumps,
    name_exists,
    read_index_at,
    release_lock,
    segment_where,
    take_lock,
)
from dpone.dlq.segments import SEGMENT_FILE, SEGMENTS_DIR, SegmentEntry
from dpone.logs import get_logger

if TYPE_CHECKING:
    from dpone.dlq.integrity import Finding
    from dpone.dlq.writer import RunWriter

_PIPELINE = re.compile(PIPELINE_PATTERN)
log = get_logger("dpone.dlq")


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
        require_signature: bool | None = None,
        anchor: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        # Whether an index this store acts on must carry a signature that verifies: by
        # default whenever a signing key is configured (``--allow-unsigned`` sets False).
        self.require_signature = require_signature
        # The folders from ``anchor`` (the work dir, for the default <work_dir>/dlq) down to
        # the root are dpone's own: reached without following links, like everything below
        # the root. Without an anchor the root is the user's choice and may be a link.
        top = Path(anchor) if anchor is not None else self.root
        self._root_parts = durable.parts_below(top, self.root)
        self._anchor = top if self._root_parts else self.root
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
        self.index_cache = IndexCache()
        # Ack segments verified by this store, by content (see dpone.dlq.acks).
        self.ack_cache: dict[tuple[str, bytes], tuple[list[str], list[str]]] = {}

    @property
    def signatures_required(self) -> bool:
        if self.require_signature is None:
            return signing.configured()
        return self.require_signature

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
            fd = fsio.open_root(self._anchor, create=create, missing=missing)
            stack.callback(os.close, fd)
            for i, part in enumerate(self._root_parts):
                where = "/".join(self._root_parts[: i + 1])
                child, created = fsio.open_dir(fd, part, where, create=create, missing=missing)
                stack.callback(os.close, child)
                if created:
                    fsio.fsync_fd(fd, where)
                fd = child
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
        status: DlqRunStatus,
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
            return read_index_at(
                run_fd,
                run_id,
                cache=self.index_cache,
                require_signature=self.signatures_required,
            )

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
                    if self.signatures_required and index.signature is None:
                        # Rebuilding signs the aborted index: never from an unsigned one (a
                        # present signature was verified by the read).
                        check_index_signature({}, f"{RUNS_DIR}/{run_id}/{INDEX_FILE}", require=True)
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
                index = read_index_at(run_fd, run_id, require_signature=self.signatures_required)
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

    # --- acknowledgements (dpone.dlq.acks) ------------------------------------------------------

    def write_ack(
        self,
        run_id: str,
        record_id: str,
        ack: ReplayAck | Mapping[str, Any],
        *,
        index: DlqIndex | None = None,
    ) -> ReplayAck:
        """:func:`dpone.dlq.acks.write_ack`: acknowledge the replay of one record."""
        return dlq_acks.write_ack(self, run_id, record_id, ack, index=index)

    def write_acks(
        self,
        run_id: str,
        replay_id: str,
        acks: Collection[ReplayAck | Mapping[str, Any]],
        *,
        index: DlqIndex | None = None,
    ) -> list[ReplayAck]:
        """:func:`dpone.dlq.acks.write_acks`: acknowledge a batch as one ack segment."""
        return dlq_acks.write_acks(self, run_id, replay_id, acks, index=index)

    def read_ack(self, run_id: str, record_id: str) -> ReplayAck:
        """:func:`dpone.dlq.acks.read_ack`: one record's acknowledgement, verified."""
        return dlq_acks.read_ack(self, run_id, record_id)

    def read_acks(self, run_id: str) -> dict[str, ReplayAck]:
        """:func:`dpone.dlq.acks.read_acks`: every acknowledgement of a run, by record id."""
        return dlq_acks.read_acks(self, run_id)

    def ack_checksums(self, run_id: str) -> dict[str, str]:
        """:func:`dpone.dlq.acks.ack_checksums`: record id -> its acknowledgement's sha256."""
        return dlq_acks.ack_checksums(self, run_id)

    def ack_segments(self, run_id: str) -> list[tuple[str, bytes, list[ReplayAck]]]:
        """:func:`dpone.dlq.acks.ack_segments`: ``(name, bytes, acks)`` per ack segment."""
        return dlq_acks.ack_segments(self, run_id)

    def ack_segment_ids(self, run_id: str) -> list[tuple[str, bytes, list[str]]]:
        """:func:`dpone.dlq.acks.ack_segment_ids`: ``(name, bytes, record ids)`` per segment."""
        return dlq_acks.ack_segment_ids(self, run_id)

    # --- deletion (dpone.dlq.compaction) ----------------------------------------------------------

    def delete_records(
        self, run_id: str, record_ids: Collection[str], *, known: DlqIndex | None = None
    ) -> DlqIndex:
        """:func:`dpone.dlq.compaction.delete_records`: delete records of an ended run."""
        return compaction.delete_records(self, run_id, record_ids, known=known)

    def delete_many(
        self, deletes: Sequence[tuple[str, Collection[str], DlqIndex | None]]
    ) -> list[DlqIndex]:
        """:func:`dpone.dlq.compaction.delete_many`: :meth:`delete_records` of several runs."""
        return compaction.delete_many(self, deletes)

    def remove_acks(self, run_id: str, record_ids: Collection[str]) -> None:
        """:func:`dpone.dlq.compaction.remove_acks`: drop acks of records no longer listed."""
        compaction.remove_acks(self, run_id, record_ids)

    # --- the writer's own check -----------------------------------------------------------------

    def check_written(self, index: DlqIndex) -> list[Finding]:
        """The findings of an ended run that this process just wrote ``index`` for: the file
        must hold that very index, and every segment it lists the bytes it lists (checked by
        their SHA-256; the lines were verified when they were written or compacted). The
        whole-store verify is :func:`dpone.ops.verification.verify_store`."""
        from dpone.dlq.integrity import verify_written

        return verify_written(self, index)


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


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        if fd >= 0:
            with suppress(OSError):
                os.close(fd)
    fds.clear()


__all__ = [
    "DlqStore",
    "SegmentScan",
    "scan_segments",
    "segment_documents",
]
