"""The stream of a run: per chunk read, enforce, assert, quarantine, stage (SPEC §6, step 5-6).

:class:`Stream` owns what the chunks change: the counts (``runtime/tally.py``), the sink load
being staged (``runtime/staging.py``) and the DLQ pipe (``runtime/dlq_pipe.py``), which a
chunk's rejected rows reach through ``runtime/quarantine.py``. All of it is the run's main
thread's alone; the pipe's own thread is reached only through the pipe. Nothing is committed
here: :meth:`Stream.run` ends with the DLQ run closed and every valid row staged, and the
lifecycle decides what happens next.

A scale-out run (SPEC §12) is the same stream with other collaborators, never a subclass: the
driver's :class:`ScaleOut` reads the partitions on a cluster into the stream's tally, pipe and
staging; a task's stream judges rows only (``batch_verdicts=False``) and writes through its
own share of the DLQ run (``runtime/scaleout/``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from time import perf_counter
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from dpone.assertions.engine import AssertionEngine
from dpone.connectors.base import Source, SourceChunk, reads_ahead, stages_behind
from dpone.connectors.errors import SourceTooManyColumns
from dpone.connectors.progress import MeasuredSource
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.errors import NAMED_ROWS, ContractError, ContractViolation
from dpone.contracts.result import EnforcementResult
from dpone.contracts.types import sink_schema
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.records import frozen
from dpone.runtime.children import ChildTables
from dpone.runtime.context import RunContext
from dpone.runtime.cursor import CursorTracker
from dpone.runtime.dlq_pipe import DlqPipe, OwnDlqRun
from dpone.runtime.hints import HintTally
from dpone.runtime.names import ColumnOrder
from dpone.runtime.prefetch import Inline, ReadAhead, usable_cores
from dpone.runtime.quarantine import Quarantine
from dpone.runtime.report import Hint, RowCounts, RunProgress, StageSeconds
from dpone.runtime.sampling import primed
from dpone.runtime.stage_behind import StageBehind, stage_depth
from dpone.runtime.stages import stage_seconds, timed
from dpone.runtime.staging import Staging
from dpone.runtime.tally import Tally
from dpone.runtime.wiring import Components
from dpone.state.model import Boundary, PipelineState

log = get_logger("dpone.run")


@frozen
class Streamed:
    """What the stream leaves for the commit: the cursor, the unplaced-row memory and the
    boundary window (None: not incremental)."""

    cursor_to: str | None
    unplaced: dict[str, list[int]]
    boundary: Boundary | None = None


class ScaleOut(Protocol):
    """Reads a stream's source elsewhere (``engine: dask``; or checks a prevalidated source's
    files instead of reading them): the counts, verdicts, DLQ records and staged rows end up
    in the stream as a local read's would."""

    #: the evidence's section :meth:`evidence` fills (``scale_out``, ``prevalidated``)
    section: str

    def read(self, stream: Stream) -> Streamed:
        """What :meth:`Stream.run` returns: the DLQ run closed, every valid row staged."""
        ...

    def evidence(self) -> dict[str, Any]:
        """The evidence's :attr:`section` (so far, when the run failed)."""
        ...


class Stream:
    """Reads the source through the contract, the assertions and the DLQ pipe into staging.

    ``pipe`` and ``staging`` replace the run's own (a scale-out run's share of them);
    ``scale_out`` reads the source elsewhere; ``batch_verdicts=False`` leaves the batch
    assertions to whoever sees every row (a scale-out task sees one partition); ``early``:
    the source's chunks, already being read (:func:`early_chunks`)."""

    def __init__(
        self,
        ctx: RunContext,
        parts: Components,
        engine: AssertionEngine,
        state: PipelineState,
        *,
        pipe: DlqPipe | None = None,
        staging: Staging | None = None,
        scale_out: ScaleOut | None = None,
        batch_verdicts: bool = True,
        early: ReadAhead[SourceChunk] | None = None,
    ) -> None:
        self.ctx = ctx
        self.parts = parts
        self.engine = engine
        self.state = state
        self.tally = Tally()
        self.staging = staging or Staging(parts.sink, ctx.load_spec)
        self.pipe = pipe or DlqPipe(parts.dlq, OwnDlqRun(ctx.identity))
        self.scale_out = scale_out
        self.batch_verdicts = batch_verdicts
        self.early = early
        self.quarantine = Quarantine(ctx, self.tally, self.pipe, dlq_enabled=parts.dlq is not None)
        #: ``source.normalize: {nested: child_tables}``: the lists of objects' tables
        self.children = ChildTables.of(ctx.plan, parts.sink)
        #: the incremental window of :meth:`run` (a scale-out task returns what it saw)
        self.tracker: CursorTracker | None = None
        #: the first chunk with columns but no rows (a header-only CSV file): its columns
        #: make the table when no chunk brings a row
        self.empty: pa.RecordBatch | None = None
        #: seconds per stage of the main thread (see :class:`StageSeconds`)
        self.seconds = stage_seconds()
        #: stages each chunk's valid rows, on a thread of its own where that overlaps
        self.stager = StageBehind(self.staging, behind=False)
        self.hint_tally = HintTally(
            safe_coercion=ctx.plan.sink.contract.safe_coercion,
            csv_source=getattr(ctx.plan.source.spec, "format", None) == "csv",
        )

    def stages(self) -> StageSeconds:
        return StageSeconds(
            **self.seconds,
            dlq_writer=self.pipe.writer_seconds,
            sink_writer=self.stager.thread_seconds,
        )

    def hints(self, *, loaded: int | None = None) -> tuple[Hint, ...]:
        """What to change so that the rejected rows load (``loaded``: the rows the sink got,
        when it is not the staged count: none after a failure)."""
        counts = self.counts()
        return self.hint_tally.hints(
            read=counts.read,
            loaded=counts.loaded if loaded is None else loaded,
            quarantined=counts.quarantined,
        )

    def counts(self) -> RowCounts:
        return self.tally.counts(self.pipe.records)

    def _progress(self) -> RunProgress:
        source = self.parts.source
        read, total = source.read_progress() if isinstance(source, MeasuredSource) else (None, None)
        return RunProgress.of(self.counts(), bytes_read=read, bytes_total=total)

    def run(self) -> Streamed:
        """Read, enforce, assert, quarantine, stage; close the DLQ run. The sink has not
        committed when this returns."""
        if self.scale_out is not None:
            return self.scale_out.read(self)
        plan, source, state = self.ctx.plan, self.parts.source, self.state
        enforcer = self.parts.enforcer()
        # A chunk of thousands of columns takes seconds to enforce: a stop is honoured
        # between its columns too, not only between chunks.
        enforcer.checkpoint = self.ctx.interrupts.check
        tracker = self.tracker = CursorTracker.create(
            plan.sink.contract,
            plan.source.incremental,
            state,
            merge=plan.sink.strategy.mode == "merge",
        )
        seconds = self.seconds
        start = perf_counter()
        existing = self.staging.open()
        seconds["sink_write"] += perf_counter() - start
        if existing is not None and plan.sink.type != "dlt":
            # dlt's schema holds names as its naming convention spelled them (Amount ->
            # amount), which the convention maps the source's onto again.
            self.ctx.names.against(existing.names)
        after = tracker.pushdown() if source.cursor_pushdown else None
        stager = self.stager = StageBehind(
            self.staging,
            behind=stages_behind(self.parts.sink) and usable_cores() > 1,
            depth=stage_depth(plan.runtime.chunk_size),
        )
        reading = self.early or _chunks(source, plan.runtime.chunk_size, after)
        try:
            with reading as chunks:
                # Named in this thread, before inference sees a name (the read-ahead's is not).
                bounded_chunks = bounded(timed(chunks, seconds), plan.runtime.max_columns)
                order = ColumnOrder()
                named = (order.chunk(self.ctx.names.chunk(chunk)) for chunk in bounded_chunks)
                for chunk in primed(named, enforcer):
                    self.chunk(chunk, tracker, enforcer, existing)
            if self.batch_verdicts:
                self.engine.finalize()
            # The DLQ run closes (its last records made durable, its index written and
            # fsynced) while the staging thread may still insert the last chunk: on two cores
            # the two overlap instead of one waiting for the other. Both end before the
            # commit, which is all SPEC §6 orders; a staging error raised below fails the run
            # as a failed commit does (the closed DLQ run is aborted).
            start = perf_counter()
            self.pipe.close()
            seconds["dlq"] += perf_counter() - start
            checkpoint("after_dlq_close")
            start = perf_counter()
            stager.close()  # every chunk staged (its error raised) before the commit
            seconds["sink_write"] += perf_counter() - start
        finally:
            stager.stop()  # a failed run's staging is aborted with the connection idle
        if self.ctx.options.progress is not None:  # once more: every DLQ record is durable
            self.ctx.options.progress(self._progress())
        start = perf_counter()
        if not self.staging.begun:
            self.staging.begin_empty(self._empty_schema(enforcer, existing))
        seconds["sink_write"] += perf_counter() - start
        return streamed(self.ctx, tracker, self.tally.late_skipped)

    def _empty_schema(
        self, enforcer: ContractEnforcementService, existing: pa.Schema | None
    ) -> pa.Schema:
        """The table a run without a single row loads: the contract's columns, and those of a
        source that named its columns but brought no row (a header-only CSV file), typed as
        the contract and inference (an empty sample: string) say."""
        if self.empty is None:
            declared = sink_schema(enforcer.contract)
            # Nothing declared and nothing read: the table as it is (a table of no column
            # is none a database can create).
            return existing if not declared and existing is not None else declared
        result = enforcer.enforce(self.empty, existing_schema=existing)
        result.raise_for_failure()
        return result.valid.schema

    def chunk(
        self,
        chunk: SourceChunk,
        tracker: CursorTracker,
        enforcer: ContractEnforcementService,
        existing: pa.Schema | None,
    ) -> None:
        """Enforce, assert, quarantine and stage one chunk."""
        ctx, tally, seconds = self.ctx, self.tally, self.seconds
        if chunk.failures:
            start = perf_counter()
            self.quarantine.decode_failures(chunk, tracker)
            seconds["dlq"] += perf_counter() - start
        if not chunk.num_rows:
            if self.empty is None and chunk.batch.num_columns:
                self.empty = chunk.batch
            return
        start = perf_counter()
        tally.read += chunk.num_rows
        tally.chunks += 1
        late = tracker.late
        whole, positions, skipped = tracker.keep(chunk)
        tally.skipped += skipped
        tally.late_skipped += tracker.late - late
        children = self.children
        # With child tables the contract sees the root's own fields; the DLQ the whole row.
        nested = children.split(whole) if children is not None else None
        batch = whole if nested is None else nested.root
        result = enforcer.enforce(batch, existing_schema=existing)
        judged, refs = None, []
        if children is not None and nested is not None and result.error is None:
            judged, result = children.judge(nested, result)
            # Before the quarantine counts this chunk's rows: a run's row refs count from them.
            refs = self.quarantine.refs(chunk, positions, list(range(batch.num_rows)))[0]
        for (column, code), count in result.counts.items():
            tally.violation(column, str(code), count)
        self.hint_tally.rows += batch.num_rows
        if result.rejects:
            self.hint_tally.observe(batch, result, enforcer.plan(batch.schema, existing))
        if result.error is not None:
            raise self._named(result, chunk, positions) from None
        present = _present(chunk, positions, result)
        valid, quarantine_mask, rules = self.engine.observe(
            result.valid, source_columns=batch.schema.names, present=present
        )
        warned = _union(result.warned, self.engine.warned)
        enforced = perf_counter()
        seconds["enforce"] += enforced - start
        self.quarantine.rows(chunk, positions, whole, result, quarantine_mask, rules)
        quarantined = perf_counter()
        seconds["dlq"] += quarantined - enforced
        kept = result.valid_positions
        if quarantine_mask is not None:
            keep = pc.invert(quarantine_mask)
            valid = valid.filter(keep)
            kept = kept.filter(keep)
            warned = None if warned is None else warned.filter(keep)
        if children is not None and judged is not None:
            self.stager.write(valid, children.rows(judged, refs, kept.to_pylist()))
        else:
            self.stager.write(valid)
        seconds["sink_write"] += perf_counter() - quarantined
        tally.loaded += valid.num_rows
        # Rows, not values: a row warned by the contract and by an assertion counts once.
        tally.warned += 0 if warned is None else int(warned.true_count)
        tracker.observe()
        ctx.interrupts.check()
        if ctx.options.progress is not None:
            ctx.options.progress(self._progress())

    def _named(
        self, result: EnforcementResult, chunk: SourceChunk, positions: pa.Int64Array | None
    ) -> ContractError:
        """The chunk's contract error; a strict violation names its first failing rows by
        record_ref (earlier chunks had none: this chunk holds the run's first)."""
        assert result.error is not None
        err = result.error
        if isinstance(err, ContractViolation):
            first = result.rejects.positions.slice(0, NAMED_ROWS).to_pylist()
            err = err.naming(self.quarantine.refs(chunk, positions, first)[0])
            # The fixes the rejected values point to (null markers, safe coercion) first.
            found = [h for h in self.hints(loaded=0) if h.fix and not h.warning]
            err.fixes = (*(f"{h.message}: set {h.fix}" for h in found), *err.fixes)
        return err


def _present(
    chunk: SourceChunk, positions: pa.Int64Array | None, result: EnforcementResult
) -> dict[str, pa.BooleanArray] | None:
    """The chunk's key-presence masks (sources with keys, when a row lacks one), aligned with
    the rows the contract let through. None: every row has every key."""
    if not chunk.present:
        return None
    valid = result.valid_positions
    out = {}
    for name, mask in chunk.present.items():
        if positions is not None:
            mask = mask.take(positions)
        out[name] = mask.take(valid)
    return out


def _union(a: pa.BooleanArray | None, b: pa.BooleanArray | None) -> pa.BooleanArray | None:
    if a is None:
        return b
    return a if b is None else pc.or_(a, b)


def bounded(chunks: Iterable[SourceChunk], max_columns: int) -> Iterator[SourceChunk]:
    """``chunks``, refusing one wider than ``runtime.max_columns`` before it is enforced (a
    file source stops earlier, at the header; this holds for every source)."""
    for chunk in chunks:
        if chunk.batch.num_columns > max_columns:
            where = chunk.partition or "a chunk of the source"
            raise SourceTooManyColumns.over(where, max_columns)
        yield chunk


def streamed(ctx: RunContext, tracker: CursorTracker, late: int) -> Streamed:
    """What a stream leaves for the commit; rows too late for the window are logged (their
    count only): they are not loaded, and never silently."""
    if late:
        log.warning(
            "incremental.late_rows",
            pipeline=ctx.plan.name,
            run_id=ctx.run_id,
            late_skipped=late,
            detail="rows older than the window (committed cursor minus lag) were not loaded",
        )
    return Streamed(
        tracker.committed_text(), tracker.unplaced_after_run(), tracker.boundary_after_run()
    )


def _chunks(
    source: Source, chunk_size: int, after: object | None
) -> ReadAhead[SourceChunk] | Inline[SourceChunk]:
    """The source's chunks, read one ahead on a thread when the source allows it (file
    sources: pyarrow's reading overlaps enforcement and staging) and the process may run on
    more than one core. Other sources run user code or hold driver connections bound to the
    thread that opened them: they are read inline. On a single core nothing overlaps, and the
    thread would only add switches and a chunk more in memory."""
    if reads_ahead(source) and usable_cores() > 1:

        def make() -> Iterator[SourceChunk]:
            return source.chunks(chunk_size, after=after)

        return ReadAhead(make, depth=1)
    return Inline(source.chunks(chunk_size, after=after))


__all__ = [
    "ScaleOut",
    "Stream",
    "Streamed",
    "bounded",
    "streamed",
]
