"""The work of one partition on a Dask worker (SPEC §12).

A task runs the local run's own stream (``runtime/stream.py``: read, enforce, row
assertions, quarantine, stage) over its partition, given three other collaborators:

- the DLQ pipe's :class:`PartitionDlqRun` writes through a partition's writer
  (:mod:`dpone.dlq.partition`) into the run the driver holds open: ids, names and bytes
  derived from (run, partition, chunk, row);
- the sink is :class:`StagedParquet`: each chunk's valid rows become one Parquet file under
  the run's staging folder, published create-only under a name derived from (partition,
  chunk) — the driver loads them all in one sink load;
- the stream judges rows only (``batch_verdicts=False``): batch verdicts need every
  partition's count and are the driver's.

Everything a task writes is a function of its input, so a task the scheduler runs again
(its worker died) finds its files already there with the very same bytes and writes nothing
new. It returns only counts, cursor maxima, segment descriptors and staged-file names
(:class:`PartitionResult`), never rows. An expected failure (a contract violation, an
assertion, a source error) comes back as :class:`TaskFailure` — data errors are
deterministic, retrying them reads the same thing — and the driver raises it as the run's.
"""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from dpone import logs
from dpone.clock import utc_now
from dpone.connectors.base import LoadMarker, LoadSpec, Sink, Source, SourceChunk, reads_ahead
from dpone.connectors.batches import rechunk
from dpone.connectors.errors import SourceDecodeError, SourceUnavailable
from dpone.connectors.fs import SourceFile
from dpone.connectors.sources.file import FileSource
from dpone.connectors.sql.select import KeyRange
from dpone.contracts.names import Renamed
from dpone.dlq import partition as dlq_partition
from dpone.dlq.index import StatusReason
from dpone.dlq.partition import PartitionSegments
from dpone.dlq.result import RunResult
from dpone.dlq.store import DlqStore
from dpone.dlq.writer import RunWriter
from dpone.durable import create_only
from dpone.errors import DponeError, Stage
from dpone.manifest.plan import Plan
from dpone.records import frozen
from dpone.runtime import wiring
from dpone.runtime.context import RunContext
from dpone.runtime.dlq_pipe import DlqPipe
from dpone.runtime.identity import RunIdentity
from dpone.runtime.scaleout.partitions import Partition
from dpone.runtime.stream import Stream
from dpone.runtime.window import BoundarySeen
from dpone.state.model import PipelineState

log = logs.get_logger("dpone.run")

#: Test hook: the index of a partition whose task kills its worker once, mid-task (after its
#: second staged chunk), so that the scheduler runs it again elsewhere. The marker file beside
#: the run's scale-out folder records that it fired.
FAULT_ENV = "DPONE_SCALEOUT_FAULT"
FAULT_MARKER = "fault-fired"


@frozen
class TaskSpec:
    """What every task of a run shares (sent once per task; small)."""

    plan: Plan
    #: the driver's run: every task writes under its ids
    identity: RunIdentity
    #: the values of the manifest's ${VAR} references only (secrets resolved on the worker)
    env: Mapping[str, str]
    existing: pa.Schema | None
    state: PipelineState
    #: the run's scale-out folder (shared storage): staged/ and the fault marker
    folder: str

    @property
    def staged_dir(self) -> Path:
        return Path(self.folder) / "staged"


@frozen
class StagedFile:
    """A staged Parquet file as its task wrote it: the driver checks the file against it."""

    name: str
    rows: int
    size: int
    sha256: str


@frozen
class TaskFailure:
    """An expected failure of a task, rebuilt on the driver as the same error class."""

    error_class: type[DponeError]
    message: str
    code: str
    stage: Stage
    fixes: tuple[str, ...]

    def error(self) -> DponeError:
        err = self.error_class.__new__(self.error_class)
        DponeError.__init__(err, self.message, code=self.code, stage=self.stage, fixes=self.fixes)
        return err


@frozen
class PartitionResult:
    """What a partition's task hands the driver: counts, cursor, segments, staged files; no rows."""

    index: int
    read: int = 0
    loaded: int = 0
    warned: int = 0
    skipped: int = 0
    late_skipped: int = 0
    chunks: int = 0
    quarantined: int = 0
    rejected: int = 0
    dropped: int = 0
    violations: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the source's column names, in the order first seen
    columns: tuple[str, ...] = ()
    #: the source columns the task's run renamed (``dpone/runtime/names.py``)
    renamed: tuple[Renamed, ...] = ()
    #: the table a partition of no row but named columns (a header-only CSV file) makes
    empty_schema: pa.Schema | None = None
    rows_passed: int = 0
    #: per row assertion (in the plan's order): failed rows, observed rows, warnings logged
    assertions: tuple[tuple[int, int, int], ...] = ()
    cursor_highest: Any = None
    cursor_read_keys: dict[str, str] = field(default_factory=dict)
    cursor_seen: dict[str, list[int]] = field(default_factory=dict)
    #: what the partition saw of the boundary (``runtime/window.py``), for the driver's window
    boundary: BoundarySeen | None = None
    segments: PartitionSegments = field(default_factory=PartitionSegments)
    staged: tuple[StagedFile, ...] = ()
    failure: TaskFailure | None = None
    seconds: float = 0.0


# --- the collaborators of the local stream -----------------------------------------------------


class PartitionSource:
    """The chunks of one partition, named as the local run names them."""

    def __init__(self, base: Source, part: Partition) -> None:
        self._base = base
        self._part = part
        self.identity = base.identity
        self.cursor_pushdown = base.cursor_pushdown
        self.read_ahead = reads_ahead(base)
        self.columns: dict[str, None] = {}

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        for chunk in self._chunks(chunk_size, after):
            self.columns.update(dict.fromkeys(chunk.batch.schema.names))
            yield chunk

    def _chunks(self, chunk_size: int, after: object | None) -> Iterator[SourceChunk]:
        part, base = self._part, self._base
        if part.kind in ("file", "row_groups"):
            assert isinstance(base, FileSource)
            assert part.file is not None
            path = base.resolve(part.file)
            if part.kind == "file":
                return base.read_file(part.file, path, chunk_size)
            return _row_groups(part, path, chunk_size)
        if part.kind == "key_range":
            relation = base.relation  # type: ignore[attr-defined]
            base.relation = KeyRange(  # type: ignore[attr-defined]
                relation.table, None, where=part.where or "TRUE", order_by=part.order_by or ""
            )
        return base.chunks(chunk_size, after)


def _row_groups(part: Partition, path: SourceFile, chunk_size: int) -> Iterator[SourceChunk]:
    """Some row groups of a Parquet file; row numbers are the file's (as a local run's)."""
    try:
        digest = path.sha256()
    except OSError as exc:
        raise SourceUnavailable(
            f"{part.label}: cannot read the file ({type(exc).__name__})"
        ) from None
    row = part.first_row
    try:
        with path.open_random() as handle, pq.ParquetFile(handle, pre_buffer=False) as pf:
            batches = pf.iter_batches(batch_size=chunk_size, row_groups=list(part.row_groups))
            for batch in rechunk(batches, chunk_size):
                yield SourceChunk(batch, part.label, digest, row, True)
                row += batch.num_rows
        path.verify(digest)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SourceDecodeError(
            f"{part.label}: not a readable Parquet file",
            path=part.label,
            fixes=("replace the file with an intact copy; retrying reads the same bytes",),
        ) from None


class _StagedLoad:
    def __init__(self, sink: StagedParquet) -> None:
        self._sink = sink

    def write(self, batch: pa.RecordBatch) -> None:
        self._sink.stage(batch)

    def commit(self, *, cursor_to: str | None = None) -> LoadMarker:
        # A task only stages: its files are committed by the driver, all partitions in one
        # load (SinkLoad.commit_staged_parquet). Reaching here is a bug in the scale-out stream.
        raise RuntimeError("a scale-out task never commits; the driver commits its staged files")

    def abort(self) -> None:
        """The driver removes the run's staged files when the run fails."""


class StagedParquet:
    """A task's "sink": each chunk's valid rows as one create-only Parquet file."""

    identity = "staged-parquet"

    def __init__(self, spec: TaskSpec, partition: int) -> None:
        self._spec = spec
        self._partition = partition
        self.files: list[StagedFile] = []

    def existing_schema(self) -> pa.Schema | None:
        return self._spec.existing  # read once by the driver, before any task ran

    def begin(self, load: LoadSpec) -> _StagedLoad:
        return _StagedLoad(self)

    def stage(self, batch: pa.RecordBatch) -> None:
        name = f"p{self._partition:05d}-c{len(self.files):06d}.parquet"
        buf = io.BytesIO()
        # Plain values in LZ4 pages, no statistics: the file is written once, read once by the
        # sink's commit and removed. Dictionary pages and column statistics (which nothing
        # reads here) cost most of the write; LZ4 makes the file about 5x smaller for little
        # CPU, which the file's write, its two SHA-256s and the sink's read more than repay
        # (zstd took twice the CPU of the write itself).
        pq.write_table(
            pa.Table.from_batches([batch]),
            buf,
            compression="lz4",
            use_dictionary=False,
            write_statistics=False,
        )
        data = buf.getvalue()
        path = self._spec.staged_dir / name
        try:
            # Anchored at the work dir (the folder is <work_dir>/scaleout/<run>): no link below.
            # Published atomically but not fsynced: the file lives until this run's commit,
            # and one lost with a machine's page cache fails the driver's check (size and
            # SHA-256 against this report), so nothing is committed from it.
            create_only(path, data, anchor=Path(self._spec.folder).parent.parent, fsync=False)
        except FileExistsError:
            # An earlier attempt of this task published it: the same input gives the same
            # bytes, so anything else is not this run's file.
            if path.read_bytes() != data:
                raise DponeError(
                    f"staged file {name} exists with other bytes",
                    code="DPONE_SCALEOUT_STAGING_CONFLICT",
                ) from None
        self.files.append(StagedFile(name, batch.num_rows, len(data), _sha256(data)))
        _maybe_fault(self._spec, self._partition, len(self.files))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _maybe_fault(spec: TaskSpec, partition: int, staged: int) -> None:
    if os.environ.get(FAULT_ENV) != str(partition) or staged != 2:
        return
    try:
        fd = os.open(fault_marker(spec.folder), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # fired once already: this is the retry
    os.close(fd)
    os._exit(1)


def fault_marker(folder: str | Path) -> Path:
    """The fault hook's marker: beside the run's scale-out folder (which a run removes)."""
    folder = Path(folder)
    return folder.parent / f"{folder.name}.{FAULT_MARKER}"


class PartitionDlqRun:
    """A task's share of the driver's DLQ run: a partition writer, whose ids, names and bytes
    derive from (run, partition, chunk, row); it ends by listing its segments for the driver
    to index, never by closing the run (the driver holds it open)."""

    def __init__(self, spec: TaskSpec, partition: int) -> None:
        self._spec = spec
        self._partition = partition
        #: the segments written, once :meth:`close` ended the writing
        self.segments = PartitionSegments()

    def open(self, store: DlqStore) -> RunWriter:
        identity = self._spec.identity
        return dlq_partition.partition_writer(
            store, identity.run_id, self._partition, identity.started()
        )

    def close(self, writer: RunWriter) -> RunResult | None:
        self.segments = dlq_partition.finish(writer)
        return None

    def abort(self, writer: RunWriter, reason: StatusReason) -> RunResult:
        return writer.abort(reason)


# --- the task ---------------------------------------------------------------------------------


def run_partition(spec: TaskSpec, part: Partition) -> PartitionResult:
    """Read, enforce, assert, quarantine and stage one partition (on a worker)."""
    started = time.perf_counter()
    if not logs.is_configured():  # a fresh worker process: the driver's log format
        logs.configure(json=True)
    logs.bind(run_id=spec.identity.run_id, partition=part.index)
    try:
        log.info("partition.start", kind=part.kind)
        result = _run(spec, part)
        log.info(
            "partition.finished",
            rows_read=result.read,
            rows_staged=result.loaded,
            rows_quarantined=result.quarantined,
        )
        return _with(result, seconds=time.perf_counter() - started)
    except DponeError as err:
        log.error("partition.failed", code=err.code)
        failure = TaskFailure(type(err), err.message, err.code, err.stage, err.fixes)
        return PartitionResult(part.index, failure=failure, seconds=time.perf_counter() - started)
    finally:
        logs.unbind("run_id", "partition")


def _with(result: PartitionResult, **changes: Any) -> PartitionResult:
    from dataclasses import replace

    return replace(result, **changes)


def _run(spec: TaskSpec, part: Partition) -> PartitionResult:
    plan = spec.plan
    staged = StagedParquet(spec, part.index)
    sink = cast(Sink, staged)
    base, _ = wiring.connectors(plan, spec.env, utc_now, sink=sink)
    source = PartitionSource(base, part)
    parts = wiring.wire(plan, env=spec.env, clock=utc_now, source=source, sink=sink)
    ctx = RunContext.of_task(plan, spec.identity, spec.env)
    engine = parts.assertion_engine()
    dlq_run = PartitionDlqRun(spec, part.index)
    # Row verdicts only: the driver judges the batch over every partition's rows.
    stream = Stream(
        ctx, parts, engine, spec.state, pipe=DlqPipe(parts.dlq, dlq_run), batch_verdicts=False
    )
    stream.tally.rows_before = part.row_offset
    try:
        stream.run()
    finally:
        stream.pipe.stop()
    tally, tracker = stream.tally, stream.tracker
    assert tracker is not None
    return PartitionResult(
        index=part.index,
        read=tally.read,
        loaded=tally.loaded,
        warned=tally.warned,
        skipped=tally.skipped,
        late_skipped=tally.late_skipped,
        chunks=tally.chunks,
        quarantined=stream.pipe.records,
        rejected=tally.rejected,
        dropped=tally.dropped,
        violations=dict(tally.violations),
        columns=tuple(source.columns),
        renamed=ctx.names.renamed,
        empty_schema=None
        if stream.empty is None
        else pa.schema(list(stream.staging.written.values())),
        rows_passed=engine.rows_passed,
        assertions=tuple((t.failed, t.observed, t.logged) for t in engine.tallies),
        cursor_highest=tracker.highest,
        cursor_read_keys=dict(tracker.read_keys),
        cursor_seen={k: sorted(v) for k, v in tracker.seen.items()},
        boundary=None if tracker.window is None else BoundarySeen.of(tracker.window),
        segments=dlq_run.segments,
        staged=tuple(staged.files),
    )


__all__ = [
    "FAULT_ENV",
    "PartitionResult",
    "StagedFile",
    "TaskFailure",
    "TaskSpec",
    "run_partition",
]
