"""The stream of a run: per chunk read, enforce, assert, quarantine, stage (SPEC §6, step 5-6).

:class:`Stream` owns what the chunks change: the counts (:class:`Tally`), the sink load being
staged (:class:`Staging`) and the DLQ pipe. All three are the run's main thread's alone; the
pipe's own thread is reached only through the pipe (``runtime/dlq_pipe.py``). Nothing is
committed here: :meth:`Stream.run` ends with the DLQ run closed and every valid row staged,
and the lifecycle decides what happens next.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from time import perf_counter

import pyarrow as pa
import pyarrow.compute as pc

from dpone.assertions.engine import AssertionEngine
from dpone.connectors.base import LoadSpec, Sink, SinkLoad, Source, SourceChunk
from dpone.connectors.errors import SourceDecodeError
from dpone.connectors.progress import MeasuredSource
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.errors import ContractError, ContractViolation
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import EnforcementResult
from dpone.contracts.types import sink_schema
from dpone.dlq.model import rejected_rows
from dpone.dlq.refs import file_line_refs, file_refs, run_row_refs
from dpone.faults import checkpoint
from dpone.runtime.context import RunContext
from dpone.runtime.cursor import CursorTracker
from dpone.runtime.dlq_pipe import DlqPipe
from dpone.runtime.hints import HintTally
from dpone.runtime.prefetch import Inline, ReadAhead
from dpone.runtime.report import Hint, RowCounts, RunProgress, StageSeconds
from dpone.runtime.sampling import primed
from dpone.runtime.wiring import Components
from dpone.state.model import PipelineState


@dataclass(slots=True)
class Tally:
    """What the chunks so far amounted to (the DLQ pipe counts the quarantined rows)."""

    read: int = 0
    loaded: int = 0
    warned: int = 0
    skipped: int = 0
    chunks: int = 0
    #: rows of the run before the current chunk (the row numbers of run-scoped refs)
    rows_before: int = 0
    #: (column label, reason code) -> rows
    violations: dict[tuple[str, str], int] = field(default_factory=dict)

    def violation(self, column: str, reason: str, rows: int) -> None:
        key = (column, reason)
        self.violations[key] = self.violations.get(key, 0) + rows

    def counts(self, quarantined: int) -> RowCounts:
        return RowCounts(
            read=self.read,
            loaded=self.loaded,
            quarantined=quarantined,
            warned=self.warned,
            skipped=self.skipped,
            chunks=self.chunks,
        )


class Staging:
    """This run's load in the sink: begun at the first valid rows, committed or aborted once."""

    def __init__(self, sink: Sink, spec: Callable[[pa.Schema], LoadSpec]) -> None:
        self._sink = sink
        self._spec = spec
        self._load: SinkLoad | None = None
        #: the sink table before this run (None: absent); read by :meth:`open`
        self.existing: pa.Schema | None = None
        #: every column this run staged, in order
        self.written: dict[str, pa.Field] = {}

    def open(self) -> pa.Schema | None:
        self.existing = self._sink.existing_schema()
        return self.existing

    def write(self, batch: pa.RecordBatch) -> None:
        if self._load is None:
            self._load = self._sink.begin(self._spec(batch.schema))
        self._load.write(batch)
        for f in batch.schema:
            self.written.setdefault(f.name, f)

    def begin_empty(self, schema: pa.Schema) -> None:
        """Nothing valid to load still commits an empty load: its marker is the run's proof."""
        if self._load is None:
            self._load = self._sink.begin(self._spec(schema))
            self.written = {f.name: f for f in schema}

    def commit(self, cursor_to: str | None) -> None:
        assert self._load is not None, "begin_empty() runs before the commit"
        self._load.commit(cursor_to=cursor_to)

    def abort(self) -> None:
        if self._load is not None:
            self._load.abort()


@dataclass(frozen=True, slots=True)
class Streamed:
    """What the stream leaves for the commit: the cursor and the unplaced-row memory."""

    cursor_to: str | None
    unplaced: dict[str, list[int]]


class Stream:
    """Reads the source through the contract, the assertions and the DLQ pipe into staging."""

    def __init__(
        self,
        ctx: RunContext,
        parts: Components,
        engine: AssertionEngine,
        state: PipelineState,
    ) -> None:
        self.ctx = ctx
        self.parts = parts
        self.engine = engine
        self.state = state
        self.tally = Tally()
        self.staging = Staging(parts.sink, ctx.load_spec)
        self.pipe = DlqPipe(
            parts.dlq, run_id=ctx.run_id, load_id=ctx.load_id, pipeline=ctx.plan.name
        )
        #: the incremental window of :meth:`run` (a scale-out task returns what it saw)
        self.tracker: CursorTracker | None = None
        #: seconds per stage of the main thread (see :class:`StageSeconds`)
        self.seconds: dict[str, float] = dict.fromkeys(
            ("read", "enforce", "dlq", "sink_write", "commit"), 0.0
        )
        self.hint_tally = HintTally(
            safe_coercion=ctx.plan.sink.contract.safe_coercion,
            csv_source=getattr(ctx.plan.source.spec, "format", None) == "csv",
        )

    def stages(self) -> StageSeconds:
        return StageSeconds(**self.seconds, dlq_writer=self.pipe.writer_seconds)

    def hints(self, *, loaded: int | None = None) -> tuple[Hint, ...]:
        """What to change so that the rejected rows load (``loaded``: the rows the sink got,
        when it is not the staged count: none after a failure)."""
        counts = self.counts()
        return self.hint_tally.hints(
            self.ctx.labels,
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
        plan, source, state = self.ctx.plan, self.parts.source, self.state
        enforcer = self.parts.enforcer()
        tracker = self.tracker = CursorTracker.create(
            plan.sink.contract, plan.source.incremental, state
        )
        seconds = self.seconds
        start = perf_counter()
        existing = self.staging.open()
        seconds["sink_write"] += perf_counter() - start
        after = state.cursor.value if (state.cursor and source.cursor_pushdown) else None
        with _chunks(source, plan.runtime.chunk_size, after) as chunks:
            for chunk in primed(_timed(chunks, seconds), enforcer):
                self.chunk(chunk, tracker, enforcer, existing)
        self.engine.finalize()
        start = perf_counter()
        self.pipe.close()
        seconds["dlq"] += perf_counter() - start
        checkpoint("after_dlq_close")
        if self.ctx.options.progress is not None:  # once more: every DLQ record is durable
            self.ctx.options.progress(self._progress())
        start = perf_counter()
        self.staging.begin_empty(sink_schema(plan.sink.contract))
        seconds["sink_write"] += perf_counter() - start
        return Streamed(tracker.committed_text(), tracker.unplaced_after_run())

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
            self._decode_failures(chunk, tracker)
            seconds["dlq"] += perf_counter() - start
        if not chunk.num_rows:
            return
        start = perf_counter()
        tally.read += chunk.num_rows
        tally.chunks += 1
        batch, positions, skipped = tracker.keep(chunk)
        tally.skipped += skipped
        ctx.labels.see(chunk.batch.schema.names)
        try:
            result = enforcer.enforce(batch, existing_schema=existing)
            for (column, code), count in result.counts.items():
                tally.violation(ctx.labels(column), str(code), count)
            self.hint_tally.rows += batch.num_rows
            if result.rejects:
                self.hint_tally.observe(batch, result, enforcer.plan(batch.schema, existing))
            result.raise_for_failure()
        except ContractError as exc:
            raise self._with_hints(ctx.labels.error(exc)) from None
        valid, quarantine_mask, rules = self.engine.observe(
            result.valid, source_columns=batch.schema.names
        )
        enforced = perf_counter()
        seconds["enforce"] += enforced - start
        self._quarantine(chunk, positions, batch, result, quarantine_mask, rules)
        quarantined = perf_counter()
        seconds["dlq"] += quarantined - enforced
        if quarantine_mask is not None:
            valid = valid.filter(pc.invert(quarantine_mask))
        if valid.num_rows:
            self.staging.write(valid)
        seconds["sink_write"] += perf_counter() - quarantined
        tally.loaded += valid.num_rows
        tally.warned += result.warned_rows
        tracker.observe()
        checkpoint("after_chunk_staged")
        ctx.interrupts.check()
        if ctx.options.progress is not None:
            ctx.options.progress(self._progress())

    def _with_hints(self, err: ContractError) -> ContractError:
        """A strict run's violation with the fixes the rejected values point to first."""
        if isinstance(err, ContractViolation):
            found = [h for h in self.hints(loaded=0) if h.fix and not h.warning]
            err.fixes = (*(f"{h.message}: set {h.fix}" for h in found), *err.fixes)
        return err

    def _decode_failures(self, chunk: SourceChunk, tracker: CursorTracker) -> None:
        """Lines the source could not decode: dead-lettered under quarantine (the run goes
        on; an incremental pipeline skips the lines a committed run dead-lettered already),
        the run's failure in every other mode. Neither names the line's content."""
        plan = self.ctx.plan
        first = chunk.failures[0]
        if plan.sink.contract.enforcement != "quarantine" or not chunk.file_sha256:
            raise SourceDecodeError(
                f"{chunk.partition}: line {first.line}: {first.what}",
                path=chunk.partition,
                line=first.line,
                fixes=(
                    "fix or remove the line in the file",
                    "or set enforcement: quarantine to dead-letter lines that do not decode "
                    "and load the other rows",
                ),
            )
        failures = tracker.new_failures(chunk)
        self.tally.read += len(chunk.failures)
        self.tally.skipped += len(chunk.failures) - len(failures)
        if not failures:
            return
        lines = [failure.line for failure in failures]
        values = None
        if plan.sink.dlq.pii_policy != "reference_only":
            # The line's text is all there is of the row: preserve keeps it, masked its shape.
            values = [{"line": failure.text} for failure in failures]
        self.pipe.submit(
            rejected_rows(
                file_line_refs(chunk.partition, chunk.file_sha256, lines),
                ReasonCode.DECODE_FAILED,
                source_offsets=lines,
                source_partitions=chunk.partition,
                rows=values,
            )
        )
        self.tally.violation("", str(ReasonCode.DECODE_FAILED), len(lines))

    def _quarantine(
        self,
        chunk: SourceChunk,
        positions: pa.Int64Array | None,
        batch: pa.RecordBatch,
        result: EnforcementResult,
        quarantine_mask: pa.BooleanArray | None,
        rules: list[str | None] | None,
    ) -> None:
        """Hand this chunk's rejected rows to the DLQ pipe (durable before the index closes)."""
        ctx, tally = self.ctx, self.tally
        rejects = result.rejects
        contract_rows = len(rejects)
        rule_rows = 0 if quarantine_mask is None else int(pc.sum(quarantine_mask).as_py() or 0)
        if not contract_rows and not rule_rows:
            tally.rows_before += chunk.num_rows
            checkpoint("after_chunk_dlq")
            return
        in_batch = rejects.positions.to_pylist()
        reasons: list[str] = [str(r) for r in rejects.reasons.to_pylist()]
        columns: list[str | None] = list(rejects.columns.to_pylist())
        rule_ids: list[str | None] = [None] * contract_rows
        if rule_rows and quarantine_mask is not None and rules is not None:
            valid_positions = result.valid_positions.to_pylist()
            for i, flagged in enumerate(quarantine_mask.to_pylist()):
                if flagged:
                    in_batch.append(valid_positions[i])
                    reasons.append(ReasonCode.RULE_FAILED.value)
                    columns.append(None)
                    rule_ids.append(rules[i])
        chunk_rows = (
            [positions[p].as_py() for p in in_batch] if positions is not None else list(in_batch)
        )
        row_numbers = [chunk.first_row + p for p in chunk_rows]
        if chunk.rereadable and chunk.file_sha256:
            refs = file_refs(chunk.partition, chunk.file_sha256, row_numbers)
        else:
            refs = run_row_refs(
                ctx.run_id, ctx.load_id, [tally.rows_before + p + 1 for p in chunk_rows]
            )
        values = None
        if ctx.plan.sink.dlq.pii_policy != "reference_only":
            taken = batch.take(pa.array(in_batch, pa.int64())).to_pylist()
            values = [ctx.labels.row(row) for row in taken]
        expected = [result.expected_types.get(c) if c else None for c in columns]
        actual = [result.actual_types.get(c) if c else None for c in columns]
        columns = [ctx.labels.optional(c) for c in columns]
        rows = rejected_rows(
            refs,
            reasons,
            columns=columns,
            actual_types=actual,
            expected_types=expected,
            rule_ids=rule_ids,
            source_offsets=row_numbers,
            source_partitions=chunk.partition,
            rows=values,
        )
        self.pipe.submit(rows)
        tally.rows_before += chunk.num_rows


def _chunks(
    source: Source, chunk_size: int, after: object | None
) -> ReadAhead[SourceChunk] | Inline[SourceChunk]:
    """The source's chunks, read one ahead on a thread when the source allows it (file
    sources: pyarrow's reading overlaps enforcement and staging) and the process may run on
    more than one core. Other sources run user code or hold driver connections bound to the
    thread that opened them: they are read inline. On a single core nothing overlaps, and the
    thread would only add switches and a chunk more in memory."""
    if getattr(source, "read_ahead", False) and _usable_cores() > 1:

        def make() -> Iterator[SourceChunk]:
            return source.chunks(chunk_size, after=after)

        return ReadAhead(make, depth=1)
    return Inline(source.chunks(chunk_size, after=after))


def _timed(chunks: Iterable[SourceChunk], seconds: dict[str, float]) -> Iterator[SourceChunk]:
    """``chunks`` unchanged; the time spent waiting for each one added to ``read``."""
    it = iter(chunks)
    while True:
        start = perf_counter()
        chunk = next(it, None)
        seconds["read"] += perf_counter() - start
        if chunk is None:
            return
        yield chunk


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS reports one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


__all__ = ["Staging", "Stream", "Streamed", "Tally"]
