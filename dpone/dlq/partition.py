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
publish). The driver indexes the segments from the descriptors the task returns
(:meth:`RunWriter.adopt_segments`), after checking them against the bytes on disk.
"""

from __future__ import annotations

import os
from base64 import b32encode
from collections.abc import Sequence
from datetime import datetime

from dpone.dlq import fsio
from dpone.dlq.errors import DlqLimitExceeded
from dpone.dlq.fsio import check_identifier
from dpone.dlq.model import RejectedRow
from dpone.dlq.segments import SEGMENT_SUFFIX, SEGMENTS_DIR, SegmentEntry
from dpone.dlq.store import RUNS_DIR, DlqStore, RunHeader, read_index_at
from dpone.dlq.writer import RunWriter

# The 80 bits under the ULID's timestamp: partition, chunk, row (most significant first).
PARTITION_BITS = 20
CHUNK_BITS = 28
ROW_BITS = 32
MAX_PARTITIONS = 2**PARTITION_BITS
_CROCKFORD = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)


def _time_prefix(ms: int) -> str:
    digits = []
    for _ in range(10):
        digits.append("0123456789ABCDEFGHJKMNPQRSTVWXYZ"[ms & 31])
        ms >>= 5
    return "".join(reversed(digits))


def partition_ids(start: datetime, partition: int, chunk: int, first: int, count: int) -> list[str]:
    """``count`` record ids for rows ``first``.. of ``chunk`` of ``partition`` of a run that
    started at ``start``; the same arguments always give the same ids."""
    if not (0 <= partition < MAX_PARTITIONS and 0 <= chunk < 2**CHUNK_BITS):
        raise DlqLimitExceeded("partitions", partition, MAX_PARTITIONS - 1, "too many partitions")
    if first + count > 2**ROW_BITS:
        raise DlqLimitExceeded("rows", first + count, 2**ROW_BITS, "too many rows in a chunk")
    prefix = _time_prefix(int(start.timestamp() * 1000))
    base = (partition << (CHUNK_BITS + ROW_BITS)) | (chunk << ROW_BITS)
    raw = b"".join((base | (first + i)).to_bytes(10, "big") for i in range(count))
    digits = b32encode(raw).translate(_CROCKFORD).decode("ascii")
    return [prefix + digits[16 * i : 16 * i + 16] for i in range(count)]


def partition_segment_name(partition: int, chunk: int, piece: int = 0) -> str:
    suffix = f"-{piece}" if piece else ""
    return f"p{partition:05d}-c{chunk:06d}{suffix}{SEGMENT_SUFFIX}"


class PartitionWriter(RunWriter):
    """Writes one partition's records into a run another process (the driver) holds open.

    It takes no lock and never writes the index: :meth:`finish` hands back the descriptors of
    the segments it published (or found already published, byte for byte) for the driver.
    """

    def __init__(self, store: DlqStore, run_id: str, partition: int, started: datetime) -> None:
        check_identifier(run_id, "run id")
        where = f"{RUNS_DIR}/{run_id}"
        with store.open_path(RUNS_DIR) as runs_fd:
            run_fd, _ = fsio.open_dir(runs_fd, run_id, where)
        try:
            header = RunHeader.of(read_index_at(run_fd, run_id))
            segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}")
        except BaseException:
            os.close(run_fd)
            raise
        # No lock of its own (-1): the driver holds the run's lock while the tasks run.
        super().__init__(store, header, (run_fd, segments_fd, -1))
        self.partition = partition
        self._started = started
        self._chunk = -1
        self._piece = 0
        self._first = 0

    def write_chunk(self, rows: Sequence[RejectedRow]) -> list[str]:
        """The next chunk's records (chunks numbered in call order, from 0)."""
        self._chunk += 1
        self._piece = 0
        self._first = 0
        return super().write_chunk(rows)

    def _now(self) -> datetime:
        return self._started

    def _new_ids(self, count: int, now: datetime) -> list[str]:
        ids = partition_ids(self._started, self.partition, self._chunk, self._first, count)
        self._first += count
        return ids

    def _next_segment_name(self) -> str:
        name = partition_segment_name(self.partition, self._chunk, self._piece)
        self._piece += 1
        return name

    def finish(self) -> list[SegmentEntry]:
        """The segments this partition published, in name order; the writer is done."""
        listed = sorted(self._segments.values(), key=lambda s: s.name)
        self._state = "closed"
        os.close(self._segments_fd)
        os.close(self._run_fd)
        return listed


__all__ = ["PartitionWriter", "partition_ids", "partition_segment_name"]
