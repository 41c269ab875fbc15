"""Stage chunk N in the sink while the main thread enforces chunk N+1.

Staging a chunk's valid rows is DuckDB's Arrow scan and insert, or PostgreSQL's COPY: C code
that releases the GIL. On two cores, handing it to one background thread lets it overlap the
next chunk's contract (Arrow kernels, which release the GIL too): the run's wall time loses
most of the staging (for 1,000,000 rows into DuckDB, 0.45 s of 1.5 s). A process that may run
on one core, or a sink whose connection is bound to the thread that opened it, stages inline:
nothing would overlap.

Order is kept: one thread stages the chunks in the order they were handed over, at most
``depth`` of them in flight (one, unless chunks are small: :func:`stage_depth`) and at most
:data:`QUEUE_BYTES` of their valid rows (one chunk always, however large); a hand-off
past either waits for the oldest. So memory holds at most that much more than the chunk being
enforced: a run of wide rows in small chunks queues few of them. ``after_chunk_staged`` is
passed where the chunk's rows are staged (on the staging thread, or inline), so a crash test
that kills the process there finds exactly the chunks before it staged. The main thread hands
a chunk over only after its rejected rows went to the DLQ pipe, so a chunk's rows are never
staged before its rejects were handed over (SPEC §6's order of durability is the commit's,
and the commit waits for both). An error of the staging thread is raised on the main thread
at a later hand-off or at :meth:`StageBehind.close`, as the chunk's own would have been; the
chunks handed over after it are not staged (nor after :meth:`StageBehind.stop`).

Threads: the staging thread is the one user of the :class:`Staging` (and so of the sink's
connection) while a chunk is in flight; the main thread touches it again only after the
``Future`` is done, and ``Future.result()`` orders everything the worker did before whatever
follows.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from time import perf_counter

import pyarrow as pa

from dpone.faults import checkpoint
from dpone.runtime.inflight import InFlight
from dpone.runtime.staging import Staging

Nested = tuple[pa.StringArray, Mapping[str, pa.RecordBatch]]

#: About how many valid rows may be in flight to the staging thread (:func:`stage_depth`),
#: and the most bytes of them (Arrow's count), unless one chunk alone is more: small chunks
#: of wide rows must not queue a ``depth`` of them.
QUEUE_ROWS = 131_072
QUEUE_BYTES = 64 << 20
QUEUE_CHUNKS = 32


def stage_depth(chunk_size: int) -> int:
    """How many chunks may be in flight to the staging thread: one when chunks are large, more
    when they are small, up to about :data:`QUEUE_ROWS` rows (at most :data:`QUEUE_CHUNKS`).

    A sink may stage in units larger than a chunk: DuckDB inserts whole row groups (122,880
    rows, ``connectors/sinks/duckdb_load.py``), so the chunk that completes one takes as long
    as a dozen chunks of 10,000 rows to stage. With one chunk in flight the main thread
    waited for each such insert instead of enforcing the chunks after it: a 336,776-row CSV
    of 19 columns in the default chunks of 10,000 spent 0.18 s of its 0.47 s stream waiting
    so, on two cores."""
    return max(1, min(QUEUE_CHUNKS, QUEUE_ROWS // max(1, chunk_size)))


def _size(batch: pa.RecordBatch, nested: Nested | None) -> int:
    """The bytes of a chunk's valid rows, its child tables' rows included."""
    if nested is None:
        return int(batch.nbytes)
    ids, children = nested
    return int(batch.nbytes + ids.nbytes + sum(c.nbytes for c in children.values()))


def _stage(staging: Staging, batch: pa.RecordBatch, nested: Nested | None) -> float:
    """One chunk's valid rows staged; the seconds taken."""
    start = perf_counter()
    staging.write(batch, nested)
    checkpoint("after_chunk_staged")
    return perf_counter() - start


class StageBehind:
    """Stages each chunk on one background thread (``behind``), or inline."""

    def __init__(self, staging: Staging, *, behind: bool, depth: int = 1) -> None:
        self._staging = staging
        self._behind = behind
        self._flight: InFlight[float] = InFlight("dpone-stage", depth)
        #: set when a chunk's staging failed or the stager was stopped: the chunks still
        #: waiting are not staged
        self._halted = threading.Event()
        #: the bytes of each chunk in flight, oldest first, and their sum
        self._sizes: deque[int] = deque()
        self._queued = 0
        #: seconds the staging thread spent staging (read after ``Future.result()``)
        self.thread_seconds = 0.0

    def write(self, batch: pa.RecordBatch, nested: Nested | None = None) -> None:
        """Stage one chunk's valid rows; the error of a chunk before, if any, is raised."""
        if not self._behind:
            _stage(self._staging, batch, nested)
            return
        size = _size(batch, nested)
        while self._flight.full or (self._flight.busy and self._queued + size > QUEUE_BYTES):
            self._collect()
        self._flight.start(self._behind_stage, batch, nested)
        self._sizes.append(size)
        self._queued += size

    def _behind_stage(self, batch: pa.RecordBatch, nested: Nested | None) -> float:
        """On the staging thread: one chunk, unless one before failed or the run stopped."""
        if self._halted.is_set():
            return 0.0
        try:
            return _stage(self._staging, batch, nested)
        except BaseException:
            self._halted.set()
            raise

    def drain(self) -> None:
        """Wait for every chunk in flight; the first error, if any, is raised here."""
        while self._flight.busy:
            self._collect()

    def _collect(self) -> None:
        """Wait for the oldest chunk in flight (its error raised here)."""
        if not self._flight.busy:
            return
        self._queued -= self._sizes.popleft()
        seconds = self._flight.result()
        if seconds is not None:
            self.thread_seconds += seconds

    def close(self) -> None:
        """Every chunk staged (its error raised), the thread ended."""
        try:
            self.drain()
        finally:
            self.stop()

    def stop(self) -> None:
        """After a failure: let the chunk being staged end (its outcome is not looked at;
        those waiting are dropped), so that the staging's abort has the sink's connection to
        itself."""
        self._halted.set()
        self._flight.stop()
        self._sizes.clear()
        self._queued = 0


__all__ = ["QUEUE_BYTES", "QUEUE_CHUNKS", "QUEUE_ROWS", "StageBehind", "stage_depth"]
