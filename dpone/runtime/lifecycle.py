"""One run of a pipeline, in the order of SPEC §6.

    compile + preflight (exit 2, nothing read)
    -> lock the pipeline, recover an interrupted earlier run
    -> per chunk: read, enforce, assert, write the chunk's DLQ records durably, stage valid rows
    -> batch verdicts -> DLQ index closed -> sink commit -> evidence -> state advance -> report

A failure before the sink commit drops the staged rows, aborts the DLQ run and leaves the
sink and the state exactly as they were. The run journal (``runtime/journal.py``) holds what
a run intends to publish, so a run killed after its sink commit is finished by the next one.

This module is the orchestration only. Its parts: ``context.py`` (the run's identity and
options), ``wiring.py`` (plan → source, sink, stores, engines), ``recovery.py`` (earlier runs
that died), ``stream.py`` (the chunks), ``dlq_pipe.py`` (the DLQ writer thread),
``outcome.py`` (the evidence), ``commit.py`` (the state move) and ``report.py``
(``dpone.run.v1``).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import replace
from time import perf_counter
from typing import Any

from dpone import startup
from dpone.assertions.engine import AssertionEngine
from dpone.connectors.base import KeyedSink, Sink, SourceChunk
from dpone.errors import (
    EXIT_OK,
    ConfigError,
    DponeError,
    ErrorDetail,
    InternalError,
    Interrupted,
    UsageError,
)
from dpone.evidence import lineage
from dpone.evidence.model import DataOutcome, SchemaChange
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.manifest.plan import Plan
from dpone.runtime import commit, outcome, systables
from dpone.runtime.context import RunContext, RunOptions
from dpone.runtime.journal import JournalEntry, JournalPhase
from dpone.runtime.prefetch import EarlyRead, ReadAhead, early_chunks
from dpone.runtime.recovery import recover
from dpone.runtime.report import (
    DlqSection,
    Recovery,
    RunReport,
    RunStatus,
    SinkSection,
    StateSection,
    Timings,
)
from dpone.runtime.stream import Stream
from dpone.runtime.wiring import Components, relative, wire
from dpone.state.model import PipelineState

log = get_logger("dpone.run")


def run_pipeline(
    plan: Plan, options: RunOptions | None = None, early: EarlyRead | None = None
) -> RunReport:
    """Run ``plan`` once. Returns the report; failures are in it (``exit_code`` != 0).

    ``early``: the plan's source and its chunks, already being read
    (:func:`~dpone.runtime.prefetch.read_early`); closed whatever happens."""
    try:
        return _run_pipeline(plan, options or RunOptions(), early)
    finally:
        if early is not None:
            early.chunks.close()  # a run that failed before its stream: the reader lets go


def _run_pipeline(plan: Plan, options: RunOptions, given: EarlyRead | None) -> RunReport:
    ctx = RunContext.start(plan, options)
    # Preflight: secrets, connectors, stores, predicates. A problem here is exit 2 and
    # nothing read so far is used.
    source = options.source
    if source is None and given is not None:
        source = given.source
    parts = wire(plan, env=options.env, clock=options.clock, source=source, sink=options.sink)
    systables.preflight(plan, parts.sink)
    engine = parts.assertion_engine()
    startup.resume()  # the command's modules are loaded (dpone/startup.py)
    parts.paths.check_owned()  # a link where dpone keeps a folder: refused before any write
    parts.journal.lock()
    # Logged once the run is this process's: a refused preflight or a locked pipeline logs
    # no run.start (and so no run without a run.finished or run.failed).
    log.info("run.start", pipeline=plan.name, run_id=ctx.run_id)
    for warning in plan.warnings:  # a deprecated key: the run goes on, the operator is told
        log.warning("manifest.warning", code=warning.code, pointer=warning.pointer)
    engine.announce(pipeline=plan.name, run_id=ctx.run_id)
    if ctx.owns_watch:
        ctx.interrupts.start()
    early: ReadAhead[SourceChunk] | None = None
    try:
        early = given.chunks if given is not None else early_chunks(plan, parts.source)
        with _one_connection(plan, parts.sink):
            return _Run(ctx, parts, engine, early).execute()
    finally:
        if early is not None:
            early.close()  # a run that failed before its stream: the reader lets go
        if ctx.owns_watch:
            ctx.interrupts.stop()
        parts.journal.unlock()


def _one_connection(plan: Plan, sink: Sink) -> AbstractContextManager[None]:
    """A DuckDB sink opens its file once for the whole run (recovery, the schema look-up,
    staging, the commit or the rollback, the failed run's row): each open of the file costs
    about 0.05 s, and each close checkpoints its WAL. Every step still takes a cursor of its
    own (its own transaction), and every commit is as durable as before; the file is locked
    while the run holds it, as it already was from the first staged batch to the commit. Not
    with ``engine: dask``, whose local cluster forks workers from this process (no DuckDB
    database may be open across a fork), nor for other sinks (a PostgreSQL session shares one
    connection and its transactions)."""
    if plan.sink.type == "duckdb" and plan.runtime.engine != "dask" and isinstance(sink, KeyedSink):
        return sink.session()
    return contextlib.nullcontext()


class _Run:
    """The steps of one run once its pipeline is locked. Single-threaded: every attribute is
    the calling thread's; the DLQ writer thread is reached only through the stream's pipe."""

    def __init__(
        self,
        ctx: RunContext,
        parts: Components,
        engine: AssertionEngine,
        early: ReadAhead[SourceChunk] | None = None,
    ) -> None:
        self.ctx = ctx
        self.parts = parts
        self.engine = engine
        self.early = early
        self.lineage = _Lineage(ctx, parts)
        self.recovered: tuple[Recovery, ...] = ()

    def _journal(self, phase: JournalPhase, **publish: Any) -> None:
        self.parts.journal.write(JournalEntry.of(self.ctx.identity, phase, **publish))

    def execute(self) -> RunReport:
        ctx, parts = self.ctx, self.parts
        self.recovered = tuple(recover(parts, ctx.clock))
        checkpoint("after_recover")
        ctx.interrupts.check()  # a stop asked for during recovery: nothing of this run began
        self.lineage.emit("START")
        self._refuse_used_run_id()
        state = parts.states.read(ctx.plan.name)
        self._journal("running")
        stream = _stream(ctx, parts, self.engine, state, self.early)
        try:
            streamed = stream.run()
            held = commit.holds_state(ctx.plan, stream.tally.rejected)
            move = commit.state_move(
                ctx.plan, state, failure=None, cursor_to=streamed.cursor_to, held=held
            )
            evidence = outcome.evidence(stream, failure=None, move=move)
            doc = evidence.to_json()
            # What this run will publish is durable before the sink commits, so a process
            # killed right after the commit is finished, identically, by the next run.
            self._journal(
                "running",
                evidence=doc,
                unplaced=streamed.unplaced,
                boundary=streamed.boundary.to_json() if streamed.boundary else None,
            )
            if ctx.plan.sink.system_tables:
                rows = systables.committed_rows(ctx, stream, evidence.data_outcome)
                stream.staging.attach_system_rows(rows)
            checkpoint("before_sink_commit")
            ctx.interrupts.check()
            # The marker carries the cursor the evidence moves the state to: the run's highest
            # value, or the held cursor of a coerce run that rejected rows (recovery holds a
            # dead run's marker against its evidence).
            started = perf_counter()
            stream.staging.commit(doc["state"]["to"])
            stream.seconds["commit"] += perf_counter() - started
            checkpoint("after_sink_commit")
        except (Exception, KeyboardInterrupt) as exc:
            # Every failure before the sink commit, expected or not (a library's ValueError,
            # a RecursionError), takes the same way back: staging dropped, DLQ run aborted.
            report = self._fail(stream, _as_dpone_error(exc), state)
            self.lineage.emit("FAIL")
            self._journal("failed")
            return report

        # The sink committed: from here on the run is finished even if this process dies.
        try:
            published = self._publish(doc)
            checkpoint("after_evidence")
            moved = commit.advance_state(
                ctx.plan,
                parts.states,
                state,
                move,
                identity=ctx.identity,
                held=held,
                rejected=stream.tally.rejected,
                unplaced=streamed.unplaced,
                boundary=streamed.boundary,
                clock=ctx.clock,
            )
            checkpoint("after_state")
            self._journal("finished")
        except KeyboardInterrupt:  # a second signal: the stop could not wait
            raise Interrupted(
                "the run was interrupted after its sink commit; the next run of the pipeline "
                "publishes its evidence and advances the state"
            ) from None
        if ctx.interrupts.received is not None:
            log.warning("run.stop_too_late", run_id=ctx.run_id, detail="the sink had committed")
        report = self._report(
            stream,
            status="succeeded",
            data_outcome=evidence.data_outcome,
            exit_code=EXIT_OK,
            committed=True,
            state=moved,
            evidence=published,
            schema_changes=evidence.schema_changes,
        )
        log.info(
            "run.finished",
            pipeline=ctx.plan.name,
            run_id=ctx.run_id,
            rows_read=report.rows.read,
            rows_loaded=report.rows.loaded,
            rows_quarantined=report.rows.quarantined,
        )
        self.lineage.emit("COMPLETE", doc)
        return report

    def _refuse_used_run_id(self) -> None:
        """A run id names one run's evidence and DLQ run for good. Reusing one (``--run-id``)
        would commit the rows and only then collide with the earlier, immutable evidence."""
        run_id, dlq = self.ctx.run_id, self.parts.dlq
        if self.parts.evidence.exists(run_id) or (dlq is not None and run_id in dlq.run_ids()):
            raise UsageError(
                f"run id '{run_id}' was already used by an earlier run",
                stage="preflight",
                fixes=("use a new --run-id, or leave it out for a fresh one",),
            )

    def _publish(self, doc: dict[str, Any]) -> str:
        """Publish the evidence; its bundle's path relative to the manifest's folder."""
        path = self.parts.evidence.publish(doc)
        log.info("evidence.written", run_id=self.ctx.run_id)
        return relative(path, self.ctx.plan.manifest_dir)

    def _timings(self, stream: Stream) -> Timings:
        ctx = self.ctx
        return Timings(ctx.started_at, ctx.now(), ctx.elapsed(), stream.stages())

    def _report(
        self,
        stream: Stream,
        *,
        status: RunStatus,
        data_outcome: DataOutcome | None,
        exit_code: int,
        committed: bool,
        state: StateSection,
        evidence: str | None,
        schema_changes: tuple[SchemaChange, ...] = (),
        error: ErrorDetail | None = None,
        timings: Timings | None = None,
    ) -> RunReport:
        ctx, pipe = self.ctx, stream.pipe
        plan = ctx.plan
        return RunReport(
            run_id=ctx.run_id,
            load_id=ctx.load_id,
            pipeline=plan.name,
            status=status,
            data_outcome=data_outcome,
            exit_code=exit_code,
            timings=timings or self._timings(stream),
            rows=stream.counts(),
            dlq=DlqSection(
                directory=relative(ctx.paths.dlq_dir, plan.manifest_dir)
                if self.parts.dlq is not None
                else None,
                run_id=ctx.run_id if pipe.used else None,
                records=pipe.records,
            ),
            sink=SinkSection(
                plan.sink.type,
                ctx.target,
                ctx.load_id,
                committed,
                stream.children.staged() if committed and stream.children is not None else (),
            ),
            state=state,
            evidence=evidence,
            schema_changes=schema_changes,
            recovered=self.recovered,
            error=error,
            renamed_columns=ctx.names.renamed,
            hints=stream.hints(loaded=0 if error is not None else None),
        )

    def _fail(self, stream: Stream, err: DponeError, state: PipelineState) -> RunReport:
        """Before the sink commit: drop staging, abort the DLQ run, record the failure."""
        ctx = self.ctx
        stream.pipe.stop()
        stream.staging.abort()
        try:
            stream.pipe.abort("run_failed")
        except DponeError as abort_err:
            # The DLQ's storage failed too (a full disk cannot take the aborted index): the
            # run stays open on disk, its writer gone, and the next run of the pipeline closes
            # it as aborted. This run still reports its own error, evidence and journal.
            log.error("dlq.abort_failed", run_id=ctx.run_id, code=abort_err.code)
        stream.tally.loaded = 0  # staged rows were dropped: none of them reached the sink
        move = commit.state_move(ctx.plan, state, failure=err, cursor_to=None)
        timings = self._timings(stream)
        data_outcome: DataOutcome | None = None
        published = None
        try:
            evidence = outcome.evidence(stream, failure=err, move=move)
            data_outcome = evidence.data_outcome
            published = self._publish(evidence.to_json())
        except DponeError as evidence_err:
            log.error("evidence.failed", run_id=ctx.run_id, code=evidence_err.code)
        systables.record_failure(ctx, self.parts.sink, stream.counts(), err, data_outcome)
        log.error("run.failed", pipeline=ctx.plan.name, run_id=ctx.run_id, code=err.code)
        return self._report(
            stream,
            status="failed",
            data_outcome=data_outcome,
            exit_code=err.exit_code,
            committed=False,
            state=move,
            evidence=published,
            error=_error_detail(err),
            timings=timings,
        )


def _stream(
    ctx: RunContext,
    parts: Components,
    engine: AssertionEngine,
    state: PipelineState,
    early: ReadAhead[SourceChunk] | None = None,
) -> Stream:
    """This process reads the source (``engine: local``), or a Dask cluster does (§12), or
    this process checks a prevalidated source's files and the sink reads them."""
    if getattr(ctx.plan.source.spec, "prevalidated", False):
        from dpone.runtime.prevalidated import prevalidated_stream

        return prevalidated_stream(ctx, parts, engine, state)
    if ctx.plan.runtime.engine == "dask":
        from dpone.runtime.scaleout.driver import scale_out_stream

        return scale_out_stream(ctx, parts, engine, state)
    return Stream(ctx, parts, engine, state, early=early)


class _Lineage:
    """OpenLineage events, when the manifest asks for them; never fails the run."""

    def __init__(self, ctx: RunContext, parts: Components) -> None:
        self._ctx = ctx
        self._source = parts.source.identity
        self._target = parts.sink.identity
        self._emitter: lineage.LineageEmitter | None = None

    def emit(self, state: str, evidence: dict[str, Any] | None = None) -> None:
        ctx = self._ctx
        config = ctx.plan.observability.get("openlineage")
        if not config:
            return
        try:
            if self._emitter is None:
                self._emitter = lineage.LineageEmitter(config, ctx.plan.manifest_dir, ctx.plan.name)
            self._emitter.emit(
                state,
                run_id=ctx.run_id,
                event_time=ctx.now(),
                source=self._source,
                target=self._target,
                facets_doc=evidence["openlineage_facets"] if evidence else None,
            )
        except Exception as exc:  # lineage is observability: report it, keep the run's outcome
            log.warning("lineage.emit_failed", run_id=ctx.run_id, error=type(exc).__name__)


def _as_dpone_error(exc: BaseException) -> DponeError:
    if isinstance(exc, DponeError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("the run was interrupted")
    return InternalError.wrapping(
        exc,
        consequence="stopped the run before the sink commit; nothing was loaded and the "
        "state was not advanced",
    )


def _error_detail(err: DponeError) -> ErrorDetail:
    """The report's ``error``: the error's first problem under the error's own code and
    message (an invalid manifest's first detail, a run error as it is)."""
    return replace(err.errors[0], code=err.code, message=err.message)


__all__ = ["ConfigError", "RunOptions", "run_pipeline"]
