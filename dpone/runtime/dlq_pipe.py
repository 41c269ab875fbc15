"""The DLQ pipe: a run's rejected rows made durable on one background thread.

A chunk's records are built on the run's main thread and written on the pipe's thread while
the main thread reads and enforces the next chunk: file creation is IO the CPU work can
overlap. At most one chunk is in flight, so memory stays bounded by two chunks' rejects, and
:meth:`DlqPipe.close` waits for it before the DLQ index closes, so every record is durable
before the sink may commit (SPEC §6). Rows count as quarantined only once durable.

Threads: the pipe is the one owner of the run's DLQ writer, and all of its own attributes are
read and written by the thread that calls its methods (the run's main thread). The main
thread opens the writer, then hands it to the worker together with one chunk's rows through a
single ``Future``; it uses the writer again (the next hand-off, the close, the abort) only
after that ``Future`` is done, and ``Future.result()`` orders everything the worker did
before whatever follows. The worker's one output is the ``Future``'s outcome: the number of
records written, or the error, re-raised on the main thread.

Which writer the pipe writes through, and how its DLQ run ends, is the pipe's :class:`DlqRun`:
the run's own (:class:`OwnDlqRun`), or a scale-out driver's or task's share of one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter
from typing import Protocol

from dpone.dlq.index import StatusReason
from dpone.dlq.rejects import RejectedRow
from dpone.dlq.result import RunResult
from dpone.dlq.store import DlqStore
from dpone.dlq.writer import RunWriter
from dpone.errors import DponeError
from dpone.faults import checkpoint
from dpone.runtime.identity import RunIdentity
from dpone.runtime.inflight import InFlight


class DlqRun(Protocol):
    """How a pipe opens its DLQ run's writer and how it ends that run."""

    def open(self, store: DlqStore) -> RunWriter:
        """The writer of the run's records (called once, at the first record or before)."""
        ...

    def close(self, writer: RunWriter) -> RunResult | None:
        """Every record is durable: end the writing (None: the run is ended elsewhere)."""
        ...

    def abort(self, writer: RunWriter, reason: StatusReason) -> RunResult:
        """End the run ``aborted``, every record that reached the disk listed."""
        ...


class OwnDlqRun:
    """A run's own DLQ run: opened, then closed or aborted by this pipe."""

    def __init__(self, identity: RunIdentity) -> None:
        self._identity = identity

    def open(self, store: DlqStore) -> RunWriter:
        identity = self._identity
        return store.open_run(identity.run_id, identity.load_id, pipeline=identity.pipeline)

    def close(self, writer: RunWriter) -> RunResult | None:
        return writer.close()

    def abort(self, writer: RunWriter, reason: StatusReason) -> RunResult:
        return writer.abort(reason)


def _write(writer: RunWriter, rows: Sequence[RejectedRow]) -> tuple[int, float]:
    """On the pipe's thread: one chunk's records, durably; their count and the seconds taken."""
    start = perf_counter()
    writer.write_chunk(rows)
    checkpoint("after_chunk_dlq")
    return len(rows), perf_counter() - start


class DlqPipe:
    """Writes each chunk's DLQ records on one background thread, one chunk in flight."""

    def __init__(self, store: DlqStore | None, run: DlqRun) -> None:
        self._store = store
        self._run = run
        self._writer: RunWriter | None = None
        self._flight: InFlight[tuple[int, float]] = InFlight("dpone-dlq")
        #: records durable so far (after an abort: every record the aborted index lists)
        self.records = 0
        #: whether any record of this run reached the DLQ (its DLQ run exists)
        self.used = False
        #: the DLQ run's outcome once :meth:`close` or :meth:`abort` ended it
        self.result: RunResult | None = None
        #: seconds the pipe's thread spent writing the records it was handed (read on the
        #: main thread after ``Future.result()``, which orders the worker's work before it)
        self.writer_seconds = 0.0

    def submit(self, rows: Sequence[RejectedRow]) -> None:
        """Hand one chunk's records over; the error of the chunk before, if any, is raised."""
        self.drain()
        writer = self.open()
        self._flight.start(_write, writer, rows)

    def open(self) -> RunWriter:
        """The DLQ run's writer, opened at the first call (its ``open`` index then exists)."""
        if self._writer is None:
            if self._store is None:
                # The compiler refuses `dlq.enabled: false` wherever a row may be dead-lettered.
                raise DponeError(
                    "a row was to be dead-lettered but dlq.enabled is false",
                    code="DPONE_DLQ_DISABLED",
                )
            self._writer = self._run.open(self._store)
        return self._writer

    def adopted(self, records: int) -> None:
        """``records`` written into this pipe's DLQ run by others (scale-out tasks) and
        indexed through its writer: durable, and the run's."""
        self.records += records
        self.used = True

    def drain(self) -> None:
        """Wait for the chunk in flight; its error, if any, is raised here."""
        done = self._flight.result()
        if done is not None:
            written, seconds = done
            self.records += written
            self.writer_seconds += seconds
            self.used = True

    def stop(self) -> None:
        """Let the write in flight end (its outcome is not looked at) and end the thread."""
        self._flight.stop()

    def close(self) -> RunResult | None:
        """Every record durable, then the DLQ run's ``closed`` index (None: no DLQ run)."""
        self.drain()
        self.stop()
        if self._writer is not None:
            self.result = self._run.close(self._writer)
        return self.result

    def abort(self, reason: StatusReason = "run_failed") -> RunResult | None:
        """After a failure: end the DLQ run ``aborted``, every record that reached the disk
        listed (in flight or not). Raises the DLQ's error when even that cannot be written:
        the run then stays open on disk, and the next run of the pipeline aborts it."""
        self.stop()
        if self._writer is None:
            return None
        # Open or already closed (the sink commit itself failed): either way the run's DLQ
        # records must not count, so the run ends aborted.
        self.result = self._run.abort(self._writer, reason)
        self.records = self.result.record_count
        self.used = True
        return self.result


__all__ = ["DlqPipe", "DlqRun", "OwnDlqRun"]
