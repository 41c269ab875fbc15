"""The DLQ writer of one scale-out partition (SPEC §12): deterministic ids, names and bytes.

A scale-out task writes its partition's rejected rows into the run's ``segments/`` folder
while the driver holds the run (its lock and its ``open`` index). A task may be run twice
(its worker died and the scheduler ran it again), so everything it writes is a function of
the run and of the row's place in the partition, never of the clock or of chance:

- record ids are ULIDs whose time is the run's start and whose 80 "random" bits are
  (partition, chunk, row) — valid ULIDs, unique in the run, sorted by partition, chunk, row;
- ``created_at``/``expires_at`` are the run's start (and start + retention);
- the segment of the c-th chunk with rejects of partition p is ``p<p>-c<c>.jsonl``
  (``-<n>`` after it for the n-th further piece when the chunk is split at
  ``max_segment_bytes``).

A retried task publishes the very same bytes under the very same names: ``link(2)`` finds the
name taken, the bytes are compared, and the write is a no-op (the base writer's create-only
publish). :func:`finish` hands the driver what its index needs — the
segments' descriptors (with the SHA-256 of the bytes this writer published) and the records'
index entries — so the driver never reads the segments back
(:meth:`~dpone.dlq.writer.RunWriter.adopt_described`).
"""

from __future__ import annotations

import os
from datetime import datetime

from dpone.dlq import fsio
from dpone.dlq.errors import DlqLimitExceeded
from dpone.dlq.fsio import check_identifier
from dpone.dlq.indexfile import read_index_at
from dpone.dlq.layout import RUNS_DIR
from dpone.dlq.rundir import RunDir, RunHeader
from dpone.dlq.segments import SEGMENT_SUFFIX, SEGMENTS_DIR, SegmentEntry
from dpone.dlq.writer import RunWriter
from dpone.ids import ulids_at
from dpone.records import frozen

# The 80 bits under the ULID's timestamp: partition, chunk, row (most significant first).
PARTITION_BITS = 20
CHUNK_BITS = 28
ROW_BITS = 32
MAX_PARTITIONS = 2**PARTITION_BITS


def partition_ids(start: datetime, partition: int, chunk: int, first: int, count: int) -> list[str]:
    """``count`` record ids for rows ``first``.. of ``chunk`` of ``partition`` of a run that
    started at ``start``; the same arguments always give the same ids."""
    if not 0 <= partition < MAX_PARTITIONS:
        raise DlqLimitExceeded("partitions", partition, MAX_PARTITIONS - 1, "too many partitions")
    if not 0 <= chunk < 2**CHUNK_BITS:
        raise DlqLimitExceeded("chunks", chunk, 2**CHUNK_BITS - 1, "too many chunks")
    if first + count > 2**ROW_BITS:
        raise DlqLimitExceeded("rows", first + count, 2**ROW_BITS, "too many rows in a chunk")
    base = (partition << (CHUNK_BITS + ROW_BITS)) | (chunk << ROW_BITS)
    return ulids_at(start, base | first, count)


def partition_segment_name(partition: int, chunk: int, piece: int = 0) -> str:
    suffix = f"-{piece}" if piece else ""
    return f"p{partition:05d}-c{chunk:06d}{suffix}{SEGMENT_SUFFIX}"


@frozen
class PartitionSegments:
    """What a partition published, for the driver's index: the segments' descriptors (JSON
    form, in record-id order) and their records' index entries as columns (in the same order)."""

    segments: tuple[dict[str, object], ...] = ()
    record_ids: tuple[str, ...] = ()
    sha256s: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    columns: tuple[str | None, ...] = ()

    def descriptors(self) -> list[SegmentEntry]:
        """The descriptors, each checked as an index's segment entry (untrusted: a task's)."""
        return [SegmentEntry.from_json(doc, i) for i, doc in enumerate(self.segments)]


class PartitionNaming:
    """Ids, times and names of one partition's records: functions of the run's start and of
    the row's place (partition, chunk in call order from 0, row), never of the clock."""

    def __init__(self, partition: int, started: datetime) -> None:
        self.partition = partition
        self._started = started
        self._chunk = -1
        self._piece = 0
        self._first = 0

    def next_chunk(self) -> None:
        self._chunk += 1
        self._piece = 0
        self._first = 0

    def now(self) -> datetime:
        return self._started

    def ids(self, count: int, now: datetime) -> list[str]:
        ids = partition_ids(self._started, self.partition, self._chunk, self._first, count)
        self._first += count
        return ids

    def segment_name(self) -> str:
        name = partition_segment_name(self.partition, self._chunk, self._piece)
        self._piece += 1
        return name


def partition_writer(runs: RunDir, run_id: str, partition: int, started: datetime) -> RunWriter:
    """A writer of one partition's records into a run another process (the driver) holds
    open. It takes no lock and never writes the index: :func:`finish` hands back what the
    driver indexes."""
    check_identifier(run_id, "run id")
    where = f"{RUNS_DIR}/{run_id}"
    with runs.open_path(RUNS_DIR) as runs_fd:
        run_fd, _ = fsio.open_dir(runs_fd, run_id, where)
    try:
        header = RunHeader.of(read_index_at(run_fd, run_id))
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}")
    except BaseException:
        os.close(run_fd)
        raise
    # No lock of its own (-1): the driver holds the run's lock while the tasks run.
    return RunWriter(
        runs, header, (run_fd, segments_fd, -1), naming=PartitionNaming(partition, started)
    )


def finish(writer: RunWriter) -> PartitionSegments:
    """What a partition's writer published, for the driver; the writer is done."""
    listed, entries = writer.hand_over()
    # Segments hold disjoint runs of ids (a chunk's pieces cut its records in id order):
    # sorted by their first id, they list the entries in the entries' own order.
    return PartitionSegments(
        segments=tuple(seg.to_json() for seg in listed),
        record_ids=tuple(e[0] for e in entries),
        sha256s=tuple(e[1] for e in entries),
        codes=tuple(e[2] for e in entries),
        columns=tuple(e[3] for e in entries),
    )


__all__ = [
    "PartitionNaming",
    "PartitionSegments",
    "finish",
    "partition_ids",
    "partition_segment_name",
    "partition_writer",
]
