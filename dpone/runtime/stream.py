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
from dpone.connectors.base import (
    DescribedLoad,
    LoadSpec,
    Sink,
    SinkLoad,
    Source,
    SourceChunk,
    TableDefinition,
    reads_ahead,
)
from dpone.connectors.errors import SinkSchemaError, SourceDecodeError, SourceTooManyColumns
from dpone.connectors.progress import MeasuredSource
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.errors import NAMED_ROWS, ContractError, ContractViolation
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import EnforcementResult
from dpone.contracts.spec import VARIANT_PREFIX
from dpone.contracts.types import sink_schema
from dpone.dlq.refs import file_line_refs, file_refs, run_row_refs
from dpone.dlq.rejects import rejected_rows
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.runtime.context import RunContext
from dpone.runtime.cursor import CursorTracker
from dpone.runtime.dlq_pipe import DlqPipe
from dpone.runtime.hints import HintTally
from dpone.runtime.names import ColumnOrder
from dpone.runtime.prefetch import Inline, ReadAhead
from dpone.runtime.report import Hint, RowCounts, RunProgress, StageSeconds
from dpone.runtime.sampling import primed
from dpone.runtime.stages import stage_seconds, timed
from dpone.runtime.wiring import Components
from dpone.state.model import Boundary, PipelineState

log = get_logger("dpone.run")


@dataclass(slots=True)
class Tally:
    """What the chunks so far amounted to (the DLQ pipe counts the quarantined rows)."""

    read: int = 0
    loaded: int = 0
    warned: int = 0
    skipped: int = 0
    late_skipped: int = 0
    chunks: int = 0
    #: rows the contract rejected (dead-lettered or dropped): a coerce run holds its state
    rejected: int = 0
    #: rejected rows with no DLQ record to go to (``dlq.enabled: false``): counted only
    dropped: int = 0
    #: rows of the run before the current chunk (the row numbers of run-scoped refs)
    rows_before: int = 0
    #: (column, reason code) -> rows
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
            late_skipped=self.late_skipped,
            chunks=self.chunks,
            dropped=self.dropped,
        )


class Staging:
    """This run's load in the sink: begun at the first valid rows, committed or aborted once."""

    def __init__(self, sink: Sink, spec: Callable[[pa.Schema], LoadSpec]) -> None:
        self._sink = sink
        self._spec = spec
        self._load: SinkLoad | None = None
        #: the load's columns (:func:`widened` as chunks bring new ones)
        self._schema = pa.schema([])
        #: the sink table before this run (None: absent); read by :meth:`open`
        self.existing: pa.Schema | None = None
        #: every column this run staged, in order
        self.written: dict[str, pa.Field] = {}

    def open(self) -> pa.Schema | None:
        self.existing = self._sink.existing_schema()
        return self.existing

    def write(self, batch: pa.RecordBatch) -> None:
        """Stage a chunk's valid rows. A chunk without any still names its columns: one chunk
        holding every row of the run would have created them (a JSONL key whose rows were
        all rejected), so the load gets them too, once it has a row at all."""
        if self._load is None:
            self._schema = widened(self._schema, batch.schema)
            if not batch.num_rows:
                return
            self._load = self._sink.begin(self._spec(self._schema))
        elif any(self._schema.get_field_index(n) < 0 for n in batch.schema.names):
            # A chunk brings a column the load lacks (a variant column's first value): the
            # load grows before the chunk is staged, so no chunk size changes the table.
            self._schema = widened(self._schema, batch.schema)
            widen = getattr(self._load, "widen", None)
            if widen is None:
                new = next(n for n in batch.schema.names if n not in self.written)
                raise SinkSchemaError(
                    f"column {new!r} is not in the load schema, and this sink cannot add "
                    "columns to a load in progress"
                )
            widen(self._schema)
        if batch.num_rows:
            self._load.write(batch)
        self.written = {f.name: f for f in self._schema}

    @property
    def begun(self) -> bool:
        """Whether this run's load has begun (rows were staged, or an empty load)."""
        return self._load is not None

    def begin_empty(self, schema: pa.Schema) -> None:
        """Nothing valid to load still commits an empty load: its marker is the run's proof."""
        if self._load is None:
            self._load = self._sink.begin(self._spec(schema))
            self.written = {f.name: f for f in schema}

    def target_definition(self) -> TableDefinition | None:
        """The target as this load's commit leaves it, when the sink can say (SPEC §7 ``ddl``)."""
        if isinstance(self._load, DescribedLoad):
            return self._load.target_definition()
        return None

    def commit(self, cursor_to: str | None) -> None:
        assert self._load is not None, "begin_empty() runs before the commit"
        self._load.commit(cursor_to=cursor_to)

    def abort(self) -> None:
        if self._load is not None:
            self._load.abort()


@dataclass(frozen=True, slots=True)
class Streamed:
    """What the stream leaves for the commit: the cursor, the unplaced-row memory and the
    boundary window (None: not incremental)."""

    cursor_to: str | None
    unplaced: dict[str, list[int]]
    boundary: Boundary | None = None


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
        #: the first chunk with columns but no rows (a header-only CSV file): its columns
        #: make the table when no chunk brings a row
        self.empty: pa.RecordBatch | None = None
        #: seconds per stage of the main thread (see :class:`StageSeconds`)
        self.seconds = stage_seconds()
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
        with _chunks(source, plan.runtime.chunk_size, after) as chunks:
            # Named in this thread, before inference sees a name (the read-ahead's is not).
            bounded_chunks = bounded(timed(chunks, seconds), plan.runtime.max_columns)
            order = ColumnOrder()
            named = (order.chunk(self.ctx.names.chunk(chunk)) for chunk in bounded_chunks)
            for chunk in primed(named, enforcer):
                self.chunk(chunk, tracker, enforcer, existing)
        self.engine.finalize()
        start = perf_counter()
        self.pipe.close()
        seconds["dlq"] += perf_counter() - start
        checkpoint("after_dlq_close")
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
            declared = sink_schema(self.ctx.plan.sink.contract)
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
            self._decode_failures(chunk, tracker)
            seconds["dlq"] += perf_counter() - start
        if not chunk.num_rows:
            if self.empty is None and chunk.batch.num_columns:
                self.empty = chunk.batch
            return
        start = perf_counter()
        tally.read += chunk.num_rows
        tally.chunks += 1
        late = tracker.late
        batch, positions, skipped = tracker.keep(chunk)
        tally.skipped += skipped
        tally.late_skipped += tracker.late - late
        result = enforcer.enforce(batch, existing_schema=existing)
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
        self._quarantine(chunk, positions, batch, result, quarantine_mask, rules)
        quarantined = perf_counter()
        seconds["dlq"] += quarantined - enforced
        if quarantine_mask is not None:
            keep = pc.invert(quarantine_mask)
            valid = valid.filter(keep)
            warned = None if warned is None else warned.filter(keep)
        self.staging.write(valid)
        seconds["sink_write"] += perf_counter() - quarantined
        tally.loaded += valid.num_rows
        # Rows, not values: a row warned by the contract and by an assertion counts once.
        tally.warned += 0 if warned is None else int(warned.true_count)
        tracker.observe()
        checkpoint("after_chunk_staged")
        ctx.interrupts.check()
        if ctx.options.progress is not None:
            ctx.options.progress(self._progress())

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
        tally.rejected += contract_rows
        if self.parts.dlq is None:
            # dlq.enabled: false (coerce, warn): the rows are counted, never silently lost;
            # the compiler refuses it wherever else a row would be dead-lettered.
            tally.dropped += contract_rows
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
        refs, row_numbers = self._refs(chunk, positions, in_batch)
        values = None
        if ctx.plan.sink.dlq.pii_policy != "reference_only":
            values = batch.take(pa.array(in_batch, pa.int64())).to_pylist()
        expected = [result.expected_types.get(c) if c else None for c in columns]
        actual = [result.actual_types.get(c) if c else None for c in columns]
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

    def _refs(
        self, chunk: SourceChunk, positions: pa.Int64Array | None, in_batch: list[int]
    ) -> tuple[list[str], list[int]]:
        """The record refs and source row numbers of rows of the (windowed) batch."""
        ctx = self.ctx
        chunk_rows = (
            [positions[p].as_py() for p in in_batch] if positions is not None else list(in_batch)
        )
        row_numbers = [chunk.first_row + p for p in chunk_rows]
        if chunk.rereadable and chunk.file_sha256:
            refs = file_refs(chunk.partition, chunk.file_sha256, row_numbers)
        else:
            before = self.tally.rows_before
            refs = run_row_refs(ctx.run_id, ctx.load_id, [before + p + 1 for p in chunk_rows])
        return refs, row_numbers

    def _named(
        self, result: EnforcementResult, chunk: SourceChunk, positions: pa.Int64Array | None
    ) -> ContractError:
        """The chunk's contract error; a strict violation names its first failing rows by
        record_ref (earlier chunks had none: this chunk holds the run's first)."""
        assert result.error is not None
        err = result.error
        if isinstance(err, ContractViolation):
            first = result.rejects.positions.slice(0, NAMED_ROWS).to_pylist()
            err = err.naming(self._refs(chunk, positions, first)[0])
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


def widened(schema: pa.Schema, batch: pa.Schema) -> pa.Schema:
    """``schema`` with the columns of ``batch`` it lacks, in the order one chunk holding
    every row would have given them (the enforcer's: the other columns, then the variant
    columns in the order of their columns), whichever chunk brought each first."""
    fields = [*schema, *(f for f in batch if schema.get_field_index(f.name) < 0)]
    plain = [f.name for f in fields if not f.name.startswith(VARIANT_PREFIX)]

    def rank(f: pa.Field) -> tuple[int, int]:
        if not f.name.startswith(VARIANT_PREFIX):
            return 0, plain.index(f.name)
        base = f.name[len(VARIANT_PREFIX) :]
        return 1, plain.index(base) if base in plain else len(plain)

    return pa.schema(sorted(fields, key=rank))


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
    if reads_ahead(source) and _usable_cores() > 1:

        def make() -> Iterator[SourceChunk]:
            return source.chunks(chunk_size, after=after)

        return ReadAhead(make, depth=1)
    return Inline(source.chunks(chunk_size, after=after))


def _usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS reports one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


__all__ = ["Staging", "Stream", "Streamed", "Tally", "widened"]
