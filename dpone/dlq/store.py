"""The file store of the dead-letter queue (SPEC §5): the entry point other layers use.

:class:`DlqStore` is a :class:`dpone.dlq.rundir.RunDir` (where the store is, its clock, its
policy, index documents, aborting a run) with the public operations on top: opening a run
for its writer (:mod:`dpone.dlq.writer`), reading records, recovering abandoned runs, and
the acknowledgement (:mod:`dpone.dlq.acks`) and deletion (:mod:`dpone.dlq.compaction`)
operations other layers call on it. Nothing inside ``dpone.dlq`` imports this module. The
layout on disk is :mod:`dpone.dlq.layout`.

A run directory appears atomically: it is built as ``runs/.new-<run_id>-<token>`` (lock taken,
``open`` index durable) and renamed into place, so a run folder without an index or without a
lock holder at birth never exists. Segments are published whole (:mod:`dpone.dlq.segments`).
Every read verifies checksums; :mod:`dpone.ops.verification` checks a whole store. POSIX only
(``fcntl.flock``, directory descriptors).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone.clock import Clock
from dpone.contracts.dlq import PII_POLICIES, DlqPolicy, is_production
from dpone.dlq import fsio, integrity, opening, segments
from dpone.dlq.errors import (
    DlqChecksumMismatch,
    DlqError,
    DlqIndexDrift,
    DlqPolicyInvalid,
    DlqPreserveRefused,
    DlqRecordNotFound,
    DlqRunNotFound,
    DlqRunNotOpen,
)
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import PIPELINE_PATTERN, DlqIndex
from dpone.dlq.indexfile import check_index_signature, read_index_at
from dpone.dlq.integrity import Finding
from dpone.dlq.layout import (
    HARD_MAX_SEGMENT_BYTES,
    LOCK_FILE,
    NEW_RUN_PREFIX,
    RUNS_DIR,
    index_where,
    segment_where,
)
from dpone.dlq.lock import name_exists, release_lock, take_lock
from dpone.dlq.model import DlqRecord
from dpone.dlq.rundir import RunDir, RunHeader
from dpone.dlq.scan import scan_segments
from dpone.dlq.segments import SEGMENTS_DIR, SegmentEntry
from dpone.dlq.writer import RunWriter
from dpone.logs import get_logger

if TYPE_CHECKING:
    from dpone.dlq.acks import ReplayAck

_PIPELINE = re.compile(PIPELINE_PATTERN)
log = get_logger("dpone.dlq")


class DlqStore(RunDir):
    """A dead-letter store rooted at one folder.

    ``clock`` returns aware datetimes (``dpone.testing.FrozenClock`` in tests).
    ``environment`` is the manifest's; ``preserve`` is refused in a production one.
    ``require_signature``: whether an index this store acts on must carry a signature that
    verifies (by default whenever a signing key is configured; ``--allow-unsigned`` sets
    False). ``anchor``: the work dir, for the default ``<work_dir>/dlq``, whose folders down
    to the root are dpone's own (see :class:`RunDir`).
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
        super().__init__(
            root,
            policy if policy is not None else DlqPolicy(directory=str(Path(root))),
            clock=clock,
            require_signature=require_signature,
            anchor=anchor,
        )
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
        self.environment = environment

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
        return opening.open_run(self, run_id, load_id, pipeline=pipeline)

    # --- reading --------------------------------------------------------------------------------

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
                        check_index_signature({}, index_where(run_id), require=True)
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
        from dpone.dlq import acks as dlq_acks

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
        from dpone.dlq import acks as dlq_acks

        return dlq_acks.write_acks(self, run_id, replay_id, acks, index=index)

    def read_acks(self, run_id: str) -> dict[str, ReplayAck]:
        """:func:`dpone.dlq.acks.read_acks`: every acknowledgement of a run, by record id."""
        from dpone.dlq import acks as dlq_acks

        return dlq_acks.read_acks(self, run_id)

    def ack_checksums(self, run_id: str) -> dict[str, str]:
        """:func:`dpone.dlq.acks.ack_checksums`: record id -> its acknowledgement's sha256."""
        from dpone.dlq import acks as dlq_acks

        return dlq_acks.ack_checksums(self, run_id)

    # --- deletion (dpone.dlq.compaction) ----------------------------------------------------------

    def delete_records(
        self, run_id: str, record_ids: Collection[str], *, known: DlqIndex | None = None
    ) -> DlqIndex:
        """:func:`dpone.dlq.compaction.delete_records`: delete records of an ended run."""
        from dpone.dlq import compaction

        return compaction.delete_records(self, run_id, record_ids, known=known)

    def delete_many(
        self, deletes: Sequence[tuple[str, Collection[str], DlqIndex | None]]
    ) -> list[DlqIndex]:
        """:func:`dpone.dlq.compaction.delete_many`: :meth:`delete_records` of several runs."""
        from dpone.dlq import compaction

        return compaction.delete_many(self, deletes)

    def remove_acks(self, run_id: str, record_ids: Collection[str]) -> None:
        """:func:`dpone.dlq.compaction.remove_acks`: drop acks of records no longer listed."""
        from dpone.dlq import compaction

        compaction.remove_acks(self, run_id, record_ids)

    # --- the writer's own check -----------------------------------------------------------------

    def check_written(self, index: DlqIndex) -> list[Finding]:
        """:func:`dpone.dlq.integrity.verify_written`. The whole-store verify is
        :func:`dpone.ops.verification.verify_store`."""
        return integrity.verify_written(self, index)


__all__ = ["DlqStore"]
