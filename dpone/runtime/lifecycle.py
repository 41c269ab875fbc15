"""One run of a pipeline, in the order of SPEC §6.

    compile + preflight (exit 2, nothing read)
    -> lock the pipeline, recover an interrupted earlier run
    -> per chunk: read, enforce, assert, write the chunk's DLQ records durably, stage valid rows
    -> batch verdicts -> DLQ index closed -> sink commit -> evidence -> state advance -> report

A failure before the sink commit drops the staged rows, aborts the DLQ run and leaves the
sink and the state exactly as they were. The run journal (``runtime/journal.py``) holds what
a run intends to publish, so a run killed after its sink commit is finished by the next one.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import structlog
from ulid import ULID

from dpone.assertions.engine import AssertionEngine
from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import LoadSpec, SinkLoad, SourceChunk
from dpone.connectors.errors import SourceDecodeError
from dpone.connectors.sinks import make_sink
from dpone.connectors.sources import make_source
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.errors import ContractError
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import EnforcementResult
from dpone.contracts.types import sink_schema
from dpone.dlq.errors import DlqRunNotFound
from dpone.dlq.ids import is_identifier
from dpone.dlq.model import RejectedRow, rejected_rows
from dpone.dlq.refs import file_line_refs, file_refs, run_row_refs
from dpone.dlq.store import DlqStore
from dpone.dlq.writer import RunResult, RunWriter
from dpone.errors import EXIT_OK, ConfigError, DponeError, ErrorDetail, Interrupted, UsageError
from dpone.evidence import lineage
from dpone.evidence.model import DlqEvidence, Evidence, Summary, schema_changes
from dpone.evidence.writer import EVIDENCE_FILE, bundle_dir, publish_evidence_doc
from dpone.faults import checkpoint
from dpone.manifest.plan import Plan
from dpone.runtime.cursor import CursorTracker
from dpone.runtime.interrupts import InterruptWatch
from dpone.runtime.journal import JournalEntry, RunJournal
from dpone.runtime.labels import ColumnLabels
from dpone.runtime.prefetch import Inline, ReadAhead
from dpone.runtime.report import Recovery, RowCounts, RunReport
from dpone.runtime.sampling import primed
from dpone.state.model import Cursor, PipelineState
from dpone.state.store import StateStore

log = structlog.get_logger("dpone.run")

#: Failures that say the data broke the contract, not that the machinery broke.
_PIPELINE_NAME = re.compile(r"[a-z0-9_]{3,64}")
QUALITY_CODES_PREFIXES = ("DPONE_CONTRACT_VIOLATION", "DPONE_SCHEMA_FROZEN", "DPONE_ASSERTION")


@dataclass(frozen=True, slots=True)
class RunOptions:
    run_id: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = utc_now
    progress: Callable[[RowCounts], None] | None = None
    #: the caller's watch of SIGINT/SIGTERM, already started (the CLI starts it before the
    #: compile); without one the run watches the signals itself while it runs
    interrupts: InterruptWatch | None = None
    #: without ``interrupts``: whether the run installs its own SIGINT/SIGTERM watch while it
    #: runs (the default) or leaves the process's handlers alone (a library call, ``dpone.run``)
    watch_signals: bool = True


@dataclass(frozen=True, slots=True)
class Paths:
    work_dir: Path
    runs_dir: Path
    state_dir: Path
    dlq_dir: Path
    evidence_dir: Path

    @classmethod
    def of(cls, plan: Plan) -> Paths:
        work = plan.runtime.work_dir
        return cls(
            work_dir=work,
            runs_dir=work / "runs",
            state_dir=work / "state",
            dlq_dir=Path(plan.sink.dlq.directory),
            evidence_dir=plan.sink.evidence_dir,
        )


def relative(path: Path, base: Path) -> str:
    """For reports and evidence: never an absolute path when the manifest's folder will do."""
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path.name


class DlqPipe:
    """Writes each chunk's DLQ records on one background thread, one chunk in flight.

    A chunk's records are built on the main thread and made durable on this one while the
    main thread reads and enforces the next chunk: file creation is IO the CPU work can
    overlap. At most one chunk waits, so memory stays bounded by two chunks' rejects, and
    :meth:`drain` runs before the DLQ index closes, so every record is durable before the
    sink may commit (SPEC §6). Rows count as quarantined only once durable.
    """

    def __init__(self, run: _Run, dlq: DlqStore | None) -> None:
        self._run = run
        self._dlq = dlq
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[int] | None = None

    def submit(self, rows: list[RejectedRow]) -> None:
        self.drain()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpone-dlq")
        self._pending = self._pool.submit(self._write, rows)

    def _write(self, rows: list[RejectedRow]) -> int:
        run = self._run
        if self._dlq is None:
            # The compiler refuses `dlq.enabled: false` wherever a row may be dead-lettered.
            raise DponeError(
                "a row was to be dead-lettered but dlq.enabled is false",
                code="DPONE_DLQ_DISABLED",
            )
        if run.dlq_writer is None:
            run.dlq_writer = self._dlq.open_run(run.run_id, run.load_id, pipeline=run.plan.name)
        run.dlq_writer.write_chunk(rows)
        checkpoint("after_chunk_dlq")
        return len(rows)

    def drain(self) -> None:
        """Wait for the chunk in flight; its error, if any, is raised here."""
        pending, self._pending = self._pending, None
        if pending is not None:
            written = pending.result()
            self._run.counts.quarantined += written
            self._run.report.dlq["run_id"] = self._run.run_id
            self._run.report.dlq["records"] = self._run.counts.quarantined

    def shutdown(self) -> None:
        """After a failure: let the write in flight end (its outcome no longer matters)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            wait([pending])
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class _Run:
    """The mutable bookkeeping of one run; the control flow lives in :func:`run_pipeline`."""

    def __init__(self, plan: Plan, options: RunOptions) -> None:
        # Run ids and pipeline names become folder names (evidence, DLQ, staging): checked
        # whole, before anything is written anywhere.
        if options.run_id is not None and not is_identifier(options.run_id):
            raise UsageError(
                "--run-id must be 1 to 128 characters of [A-Za-z0-9._-], not starting with '.'",
                fixes=("use a run id such as nightly-2026-01-31, or leave it out for a ULID",),
            )
        if not _PIPELINE_NAME.fullmatch(plan.name):
            raise ConfigError(
                "the manifest name must be 3 to 64 characters of [a-z0-9_]",
                code="DPONE_MANIFEST_PATTERN",
                fixes=("rename the pipeline (name:) to lowercase letters, digits and _",),
            )
        self.plan = plan
        self.options = options
        self.clock = options.clock
        self.started = time.perf_counter()
        self.run_id = options.run_id or str(ULID.from_datetime(self.clock()))
        self.load_id = str(ULID.from_datetime(self.clock()))
        self.paths = Paths.of(plan)
        self.report = RunReport(
            run_id=self.run_id,
            load_id=self.load_id,
            pipeline=plan.name,
            started_at=iso_utc(self.clock()),
        )
        self.counts = self.report.rows
        self.violations: dict[tuple[str, str], int] = {}
        self.dlq_writer: RunWriter | None = None
        self.dlq_result: RunResult | None = None
        self.sink_load: SinkLoad | None = None
        self.global_row = 0
        self.lineage: lineage.LineageEmitter | None = None
        self.dlq_pipe: DlqPipe | None = None
        self.existing: pa.Schema | None = None  # the sink table before this run; None: absent
        self.written: dict[str, pa.Field] = {}  # every column this run staged, in order
        self.interrupts = options.interrupts or InterruptWatch()
        #: how artifacts name columns (undeclared ones by position unless pii_policy preserve)
        self.labels = ColumnLabels(
            (c.name for c in plan.sink.contract.columns), plan.sink.dlq.pii_policy
        )
        # An unstarted watch never reports a signal: with watch_signals off, check() is a no-op.
        self.owns_watch = options.interrupts is None and options.watch_signals


def run_pipeline(plan: Plan, options: RunOptions | None = None) -> RunReport:
    """Run ``plan`` once. Returns the report; failures are in it (``exit_code`` != 0)."""
    options = options or RunOptions()
    run = _Run(plan, options)
    log.info("run.start", pipeline=plan.name, run_id=run.run_id)

    # Preflight: secrets, connectors, stores. A problem here is exit 2 and nothing is read.
    source_conn = plan.source.connection.resolve(options.env) if plan.source.connection else None
    sink_conn = plan.sink.connection.resolve(options.env) if plan.sink.connection else None
    source = make_source(
        plan.source.config,
        plan.manifest_dir,
        read_all_as_text=True,
        connection=source_conn,
    )
    sink = make_sink(
        plan.sink.config,
        plan.manifest_dir,
        plan.runtime.work_dir,
        plan.name,
        sink_conn,
        clock=options.clock,
    )
    # `dlq.enabled: false` (refused wherever a row may be dead-lettered) means no DLQ files.
    dlq = (
        DlqStore(
            run.paths.dlq_dir, plan.sink.dlq, clock=options.clock, environment=plan.environment
        )
        if plan.sink.dlq.enabled
        else None
    )
    states = StateStore(run.paths.state_dir)
    engine = AssertionEngine(plan.quality.assertions, plan.manifest_dir)
    journal = RunJournal(run.paths.runs_dir, plan.name)
    run.report.sink = {
        "type": plan.sink.type,
        "table": f"{plan.sink.dataset}.{plan.sink.table}",
        "load_id": run.load_id,
        "committed": False,
    }
    run.report.dlq = {
        "directory": relative(run.paths.dlq_dir, plan.manifest_dir) if dlq else None,
        "run_id": None,
        "records": 0,
    }

    journal.lock()
    if run.owns_watch:
        run.interrupts.start()
    try:
        run.report.recovered = recover(plan, journal, sink, dlq, states, options.clock)
        checkpoint("after_recover")
        run.interrupts.check()  # a stop asked for during recovery: nothing of this run began
        _emit(run, source.identity, sink.identity, "START")
        _refuse_used_run_id(run, dlq)
        state = states.read(plan.name)
        journal.write(
            JournalEntry(plan.name, run.run_id, run.load_id, "running", run.report.started_at)
        )
        try:
            evidence_doc, cursor_to, unplaced = _load(run, source, sink, dlq, engine, state)
            # What this run will publish is durable before the sink commits, so a process
            # killed right after the commit is finished, identically, by the next run.
            journal.write(
                JournalEntry(
                    plan.name,
                    run.run_id,
                    run.load_id,
                    "running",
                    run.report.started_at,
                    evidence=evidence_doc,
                    unplaced=unplaced,
                )
            )
            checkpoint("before_sink_commit")
            run.interrupts.check()
            assert run.sink_load is not None
            run.sink_load.commit(cursor_to=cursor_to)
            run.report.sink["committed"] = True
            checkpoint("after_sink_commit")
        except (Exception, KeyboardInterrupt) as exc:
            # Every failure before the sink commit, expected or not (a library's ValueError,
            # a RecursionError), takes the same way back: staging dropped, DLQ run aborted.
            err = _as_dpone_error(exc)
            _fail(run, err, engine, state)
            _emit(run, source.identity, sink.identity, "FAIL")
            journal.write(
                JournalEntry(plan.name, run.run_id, run.load_id, "failed", run.report.started_at)
            )
            return run.report

        # The sink committed: from here on the run is finished even if this process dies.
        try:
            _publish_evidence(run, evidence_doc)
            checkpoint("after_evidence")
            _advance_state(run, states, state, evidence_doc, unplaced)
            checkpoint("after_state")
            journal.write(
                JournalEntry(plan.name, run.run_id, run.load_id, "finished", run.report.started_at)
            )
        except KeyboardInterrupt:  # a second signal: the stop could not wait
            raise Interrupted(
                "the run was interrupted after its sink commit; the next run of the pipeline "
                "publishes its evidence and advances the state"
            ) from None
        if run.interrupts.received is not None:
            log.warning("run.stop_too_late", run_id=run.run_id, detail="the sink had committed")
        _finish(run, evidence_doc["data_outcome"])
        _emit(run, source.identity, sink.identity, "COMPLETE", evidence_doc)
        return run.report
    finally:
        if run.owns_watch:
            run.interrupts.stop()
        journal.unlock()


def _as_dpone_error(exc: BaseException) -> DponeError:
    if isinstance(exc, DponeError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("the run was interrupted")
    # A bug or an unforeseen library failure: its text may quote a row value, so only its
    # class name is kept; DPONE_DEBUG=1 shows the traceback.
    if os.environ.get("DPONE_DEBUG") == "1":
        traceback.print_exception(exc)
    return DponeError(
        f"an unexpected {type(exc).__name__} stopped the run before the sink commit; "
        "nothing was loaded and the state was not advanced",
        code="DPONE_INTERNAL",
        fixes=(
            "rerun with DPONE_DEBUG=1 for the traceback and report it with the manifest "
            "(without secrets) and the dpone version",
        ),
    )


def _refuse_used_run_id(run: _Run, dlq: DlqStore | None) -> None:
    """A run id names one run's evidence and DLQ run for good. Reusing one (``--run-id``)
    would commit the rows and only then collide with the earlier, immutable evidence."""
    evidence = bundle_dir(run.paths.evidence_dir, run.plan.name, run.run_id) / EVIDENCE_FILE
    if evidence.exists() or (dlq is not None and run.run_id in dlq.run_ids()):
        raise UsageError(
            f"run id '{run.run_id}' was already used by an earlier run",
            stage="preflight",
            fixes=("use a new --run-id, or leave it out for a fresh one",),
        )


# --- the stream ------------------------------------------------------------------------------


def _load(
    run: _Run,
    source: Any,
    sink: Any,
    dlq: DlqStore | None,
    engine: AssertionEngine,
    state: PipelineState,
) -> tuple[dict[str, Any], str | None, dict[str, list[int]]]:
    """Read, enforce, assert, quarantine, stage; close the DLQ run. Returns the evidence the
    run will publish and the cursor it will commit. The sink has not committed yet."""
    plan = run.plan
    enforcer = ContractEnforcementService(plan.sink.contract)
    tracker = CursorTracker.create(plan.sink.contract, plan.source.incremental, state)
    existing = run.existing = sink.existing_schema()
    after = state.cursor.value if (state.cursor and source.cursor_pushdown) else None
    run.dlq_pipe = pipe = DlqPipe(run, dlq)
    with _chunks(source, plan.runtime.chunk_size, after) as chunks:
        for chunk in primed(chunks, enforcer):
            _one_chunk(run, chunk, tracker, enforcer, engine, sink, existing, pipe)

    engine.finalize()
    pipe.drain()
    pipe.shutdown()
    if run.dlq_writer is not None:
        run.dlq_result = run.dlq_writer.close()
    checkpoint("after_dlq_close")
    if run.sink_load is None:
        # Nothing valid to load still commits an empty load: its marker is the run's proof.
        empty = sink_schema(plan.sink.contract)
        run.sink_load = sink.begin(_load_spec(run, empty))
        run.written = {f.name: f for f in empty}
    cursor_to = tracker.committed_text()
    evidence = _evidence(run, engine, failure=None, state=state, cursor_to=cursor_to)
    return evidence, cursor_to, tracker.unplaced_after_run()


def _chunks(
    source: Any, chunk_size: int, after: object | None
) -> ReadAhead[SourceChunk] | Inline[SourceChunk]:
    """The source's chunks, read one ahead on a thread when the source allows it (file
    sources: pyarrow's reading overlaps enforcement and staging). Other sources run user code
    or hold driver connections bound to the thread that opened them: they are read inline."""
    if getattr(source, "read_ahead", False):
        return ReadAhead(lambda: source.chunks(chunk_size, after=after), depth=1)
    return Inline(source.chunks(chunk_size, after=after))


def _one_chunk(
    run: _Run,
    chunk: SourceChunk,
    tracker: CursorTracker,
    enforcer: ContractEnforcementService,
    engine: AssertionEngine,
    sink: Any,
    existing: pa.Schema | None,
    pipe: DlqPipe,
) -> None:
    """Enforce, assert, quarantine and stage one chunk."""
    if chunk.failures:
        _decode_failures(run, pipe, chunk)
    if not chunk.num_rows:
        return
    run.counts.read += chunk.num_rows
    run.counts.chunks += 1
    batch, positions, skipped = tracker.keep(chunk)
    run.counts.skipped += skipped
    run.labels.see(chunk.batch.schema.names)
    try:
        result = enforcer.enforce(batch, existing_schema=existing)
        _count_violations(run, result)
        result.raise_for_failure()
    except ContractError as exc:
        raise run.labels.error(exc) from None
    valid, quarantine_mask, rules = engine.observe(result.valid, source_columns=batch.schema.names)
    _quarantine(run, pipe, chunk, positions, batch, result, quarantine_mask, rules)
    if quarantine_mask is not None:
        valid = valid.filter(pc.invert(quarantine_mask))
    if valid.num_rows:
        if run.sink_load is None:
            run.sink_load = sink.begin(_load_spec(run, valid.schema))
        run.sink_load.write(valid)
        for f in valid.schema:
            run.written.setdefault(f.name, f)
    run.counts.loaded += valid.num_rows
    run.counts.warned += result.warned_rows
    tracker.observe()
    checkpoint("after_chunk_staged")
    run.interrupts.check()
    if run.options.progress is not None:
        run.options.progress(run.counts)


def _decode_failures(run: _Run, pipe: DlqPipe, chunk: SourceChunk) -> None:
    """Lines the source could not decode: dead-lettered under quarantine (the run goes on),
    the run's failure in every other mode. Neither names the line's content."""
    first = chunk.failures[0]
    if run.plan.sink.contract.enforcement != "quarantine" or not chunk.file_sha256:
        raise SourceDecodeError(
            f"{chunk.partition}: line {first.line}: {first.what}",
            path=chunk.partition,
            line=first.line,
            fixes=(
                "fix or remove the line in the file",
                "or set enforcement: quarantine to dead-letter lines that do not decode and "
                "load the other rows",
            ),
        )
    lines = [failure.line for failure in chunk.failures]
    values = None
    if run.plan.sink.dlq.pii_policy != "reference_only":
        # The line's text is all there is of the row: preserve keeps it, masked its shape.
        values = [{"line": failure.text} for failure in chunk.failures]
    run.counts.read += len(lines)
    pipe.submit(
        rejected_rows(
            file_line_refs(chunk.partition, chunk.file_sha256, lines),
            ReasonCode.DECODE_FAILED,
            source_offsets=lines,
            source_partitions=chunk.partition,
            rows=values,
        )
    )
    key = ("", str(ReasonCode.DECODE_FAILED))
    run.violations[key] = run.violations.get(key, 0) + len(lines)


def _load_spec(run: _Run, schema: pa.Schema) -> LoadSpec:
    """The load's identity and strategy; its cursor is given at commit, once it is known."""
    strategy = run.plan.sink.strategy
    return LoadSpec(
        pipeline=run.plan.name,
        run_id=run.run_id,
        load_id=run.load_id,
        schema=schema,
        mode=strategy.mode,
        unique_key=strategy.unique_key,
    )


def _count_violations(run: _Run, result: EnforcementResult) -> None:
    for (column, code), count in result.counts.items():
        key = (run.labels(column), str(code))
        run.violations[key] = run.violations.get(key, 0) + count


def _quarantine(
    run: _Run,
    pipe: DlqPipe,
    chunk: SourceChunk,
    positions: pa.Int64Array | None,
    batch: pa.RecordBatch,
    result: EnforcementResult,
    quarantine_mask: pa.BooleanArray | None,
    rules: list[str | None] | None,
) -> None:
    """Hand this chunk's rejected rows to the DLQ pipe (durable before the index closes)."""
    rejects = result.rejects
    contract_rows = len(rejects)
    rule_rows = 0 if quarantine_mask is None else int(pc.sum(quarantine_mask).as_py() or 0)
    if not contract_rows and not rule_rows:
        run.global_row += chunk.num_rows
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
        refs = run_row_refs(run.run_id, run.load_id, [run.global_row + p + 1 for p in chunk_rows])
    values = None
    if run.plan.sink.dlq.pii_policy != "reference_only":
        taken = batch.take(pa.array(in_batch, pa.int64())).to_pylist()
        values = [run.labels.row(row) for row in taken]
    expected = [result.expected_types.get(c) if c else None for c in columns]
    actual = [result.actual_types.get(c) if c else None for c in columns]
    columns = [run.labels.optional(c) for c in columns]
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
    pipe.submit(rows)
    run.global_row += chunk.num_rows


# --- evidence, state, failure -----------------------------------------------------------------


def _evidence(
    run: _Run,
    engine: AssertionEngine,
    *,
    failure: DponeError | None,
    state: PipelineState,
    cursor_to: str | None,
) -> dict[str, Any]:
    plan = run.plan
    dlq_result = run.dlq_result
    folder = bundle_dir(run.paths.evidence_dir, plan.name, run.run_id)
    index_ref = None
    if dlq_result is not None:
        index_ref = relative(run.paths.dlq_dir / dlq_result.index_ref, folder)
    failure_code = failure.code if failure is not None else None
    committed_from = state.cursor.value if state.cursor else None
    evidence = Evidence(
        run_id=run.run_id,
        pipeline=plan.name,
        manifest_fingerprint=plan.fingerprint,
        enforcement=plan.sink.contract.enforcement,
        failure_code=failure_code,
        quality_failure=bool(failure_code and failure_code.startswith(QUALITY_CODES_PREFIXES)),
        summary=Summary(
            rows_read=run.counts.read,
            rows_loaded=run.counts.loaded if failure is None else 0,
            rows_quarantined=run.counts.quarantined,
            rows_warned=run.counts.warned,
            rows_skipped=run.counts.skipped,
            chunks=run.counts.chunks,
        ),
        violations=run.violations,
        assertions=engine.verdicts(),
        dlq=DlqEvidence(
            record_count=dlq_result.record_count if dlq_result else 0,
            reasons=dict(dlq_result.reason_counts) if dlq_result else {},
            index_ref=index_ref,
            index_fingerprint=dlq_result.fingerprint if dlq_result else None,
            run_status=dlq_result.status if dlq_result else None,
        ),
        sink={
            "type": plan.sink.type,
            "table": f"{plan.sink.dataset}.{plan.sink.table}",
            "load_id": run.load_id if failure is None else None,
            "mode": plan.sink.strategy.mode,
        },
        state={
            "advanced": failure is None and plan.state_type == "file",
            "from": committed_from,
            "to": cursor_to if failure is None else committed_from,
            "revision": state.revision + 1 if failure is None else state.revision,
        },
        started_at=run.report.started_at,
        finished_at=iso_utc(run.clock()),
        schema_changes=()
        if failure is not None
        else schema_changes(
            f"{plan.sink.dataset}.{plan.sink.table}",
            run.labels.schema(run.existing),
            run.labels.fields(run.written),
        ),
        facets=lineage.facets(
            engine.verdicts(),
            rows_read=run.counts.read,
            rows_loaded=run.counts.loaded if failure is None else 0,
            rows_quarantined=run.counts.quarantined,
            enforcement=plan.sink.contract.enforcement,
        ),
    )
    return evidence.to_json()


def _publish_evidence(run: _Run, doc: dict[str, Any]) -> None:
    path = publish_evidence_doc(run.paths.evidence_dir, doc)
    run.report.schema_changes = list(doc.get("schema_changes", []))
    run.report.evidence = relative(path, run.plan.manifest_dir)
    log.info("evidence.written", run_id=run.run_id)


def commit_state(
    plan: Plan,
    states: StateStore,
    *,
    expected_revision: int,
    run_id: str,
    load_id: str,
    cursor_to: str | int | None,
    unplaced: dict[str, list[int]] | None,
    clock: Clock,
) -> None:
    """Advance the pipeline's state to a committed load (a live run's, or a dead one's)."""
    inc = plan.source.incremental
    cursor = None
    if inc is not None and cursor_to is not None:
        declared = plan.sink.contract.column(inc.cursor_column)
        cursor = Cursor(inc.cursor_column, declared.type if declared else "string", cursor_to)
    with states.commit(plan.name, expected_revision=expected_revision) as txn:
        txn.set(
            txn.current.advanced(
                run_id=run_id,
                load_id=load_id,
                cursor=cursor,
                manifest_fingerprint=plan.fingerprint,
                updated_at=iso_utc(clock()),
                unplaced=unplaced,
            )
        )
        txn.before_publish = lambda: checkpoint("during_state_replace")


def _advance_state(
    run: _Run,
    states: StateStore,
    state: PipelineState,
    evidence: dict[str, Any],
    unplaced: dict[str, list[int]],
) -> None:
    if run.plan.state_type == "disabled":
        run.report.state = {"advanced": False, "from": None, "to": None, "revision": None}
        return
    to = evidence["state"]["to"]
    commit_state(
        run.plan,
        states,
        expected_revision=state.revision,
        run_id=run.run_id,
        load_id=run.load_id,
        cursor_to=to,
        unplaced=unplaced,
        clock=run.clock,
    )
    run.report.state = {
        "advanced": True,
        "from": evidence["state"]["from"],
        "to": to,
        "revision": state.revision + 1,
    }
    log.info("state.advanced", pipeline=run.plan.name, revision=state.revision + 1)


def _finish(run: _Run, outcome: str) -> None:
    run.report.status = "succeeded"
    run.report.data_outcome = outcome
    run.report.exit_code = EXIT_OK
    run.report.finished_at = iso_utc(run.clock())
    run.report.duration_s = time.perf_counter() - run.started
    log.info(
        "run.finished",
        pipeline=run.plan.name,
        run_id=run.run_id,
        rows_read=run.counts.read,
        rows_loaded=run.counts.loaded,
        rows_quarantined=run.counts.quarantined,
    )


def _emit(
    run: _Run, source: str, target: str, state: str, evidence: dict[str, Any] | None = None
) -> None:
    """OpenLineage events, when the manifest asks for them; never fails the run."""
    config = run.plan.observability.get("openlineage")
    if not config:
        return
    try:
        if run.lineage is None:
            run.lineage = lineage.LineageEmitter(config, run.plan.manifest_dir, run.plan.name)
        run.lineage.emit(
            state,
            run_id=run.run_id,
            event_time=iso_utc(run.clock()),
            source=source,
            target=target,
            facets_doc=evidence["openlineage_facets"] if evidence else None,
        )
    except Exception as exc:  # lineage is observability: report it, keep the run's outcome
        log.warning("lineage.emit_failed", run_id=run.run_id, error=type(exc).__name__)


def _fail(run: _Run, err: DponeError, engine: AssertionEngine, state: PipelineState) -> None:
    """Before the sink commit: drop staging, abort the DLQ run, record the failure."""
    if run.dlq_pipe is not None:
        run.dlq_pipe.shutdown()
    if run.sink_load is not None:
        run.sink_load.abort()
    if run.dlq_writer is not None:
        # Open or already closed (the sink commit itself failed): either way the run's DLQ
        # records must not count, so the run ends aborted.
        try:
            run.dlq_result = run.dlq_writer.abort("run_failed")
        except DponeError as abort_err:
            # The DLQ's storage failed too (a full disk cannot take the aborted index): the
            # run stays open on disk, its writer gone, and the next run of the pipeline closes
            # it as aborted. This run still reports its own error, evidence and journal.
            log.error("dlq.abort_failed", run_id=run.run_id, code=abort_err.code)
        else:
            # The aborted index holds every record that reached the disk, in flight or not.
            run.counts.quarantined = run.dlq_result.record_count
            run.report.dlq.update(run_id=run.run_id, records=run.dlq_result.record_count)
    run.report.sink["committed"] = False
    run.counts.loaded = 0  # staged rows were dropped: none of them reached the sink
    run.report.status = "failed"
    run.report.exit_code = err.exit_code
    run.report.error = _error_doc(err)
    run.report.finished_at = iso_utc(run.clock())
    run.report.duration_s = time.perf_counter() - run.started
    try:
        doc = _evidence(run, engine, failure=err, state=state, cursor_to=None)
        run.report.data_outcome = doc["data_outcome"]
        _publish_evidence(run, doc)
    except DponeError as evidence_err:
        log.error("evidence.failed", run_id=run.run_id, code=evidence_err.code)
    run.report.state = {
        "advanced": False,
        "from": state.cursor.value if state.cursor else None,
        "to": state.cursor.value if state.cursor else None,
        "revision": state.revision,
    }
    log.error("run.failed", pipeline=run.plan.name, run_id=run.run_id, code=err.code)


def _error_doc(err: DponeError) -> dict[str, Any]:
    detail: ErrorDetail = err.errors[0]
    return detail.to_json() | {"code": err.code, "message": err.message}


# --- recovery ----------------------------------------------------------------------------------


def recover(
    plan: Plan,
    journal: RunJournal,
    sink: Any,
    dlq: DlqStore | None,
    states: StateStore,
    clock: Clock,
) -> list[Recovery]:
    """Finish or roll back the previous run of this pipeline if it died midway."""
    recovered: list[Recovery] = []
    entry = journal.read()
    # First what killed runs left in the sink: staging goes, a committed load whose files were
    # still moving (filesystem sink) is completed, a dlt package dlt was loading is finished
    # or dropped. Only then does the sink's marker say for good whether the run committed.
    dropped = sink.cleanup_abandoned(plan.name)
    if entry is not None and entry.phase == "running":
        marker = sink.committed_load(entry.load_id)
        if marker is not None:
            recovered.append(_finish_committed(plan, entry, marker, states, clock))
        else:
            aborted: list[str] = []
            try:
                if dlq is not None:
                    aborted.append(dlq.abort_run(entry.run_id, "writer_gone").run_id)
            except DlqRunNotFound:
                pass
            recovered.append(
                Recovery(
                    run_id=entry.run_id,
                    action="rolled_back",
                    reason="the run died before its sink commit; nothing of it was loaded",
                    dlq_runs_aborted=tuple(aborted),
                    staging_dropped=tuple(dropped),
                )
            )
        journal.write(
            JournalEntry(plan.name, entry.run_id, entry.load_id, "recovered", entry.started_at)
        )
    # Open DLQ runs whose writer died are closed as aborted.
    if dlq is not None:
        dlq.recover_abandoned(pipeline=plan.name)
    for rec in recovered:
        log.warning("run.recovered", run_id=rec.run_id, action=rec.action, reason=rec.reason)
    return recovered


def _finish_committed(
    plan: Plan, entry: JournalEntry, marker: Any, states: StateStore, clock: Clock
) -> Recovery:
    state = states.read(plan.name)
    if state.last_load_id != entry.load_id and plan.state_type == "file":
        commit_state(
            plan,
            states,
            expected_revision=state.revision,
            run_id=entry.run_id,
            load_id=entry.load_id,
            cursor_to=marker.cursor_to,
            unplaced=entry.unplaced,
            clock=clock,
        )
    note = "its evidence was already published"
    if entry.evidence is not None:
        publish_evidence_doc(plan.sink.evidence_dir, entry.evidence, exist_ok=True)
        note = "its evidence was published"
    elif not (bundle_dir(plan.sink.evidence_dir, plan.name, entry.run_id) / EVIDENCE_FILE).exists():
        note = "its evidence could not be rebuilt"
    return Recovery(
        run_id=entry.run_id,
        action="finished",
        reason=f"the run died after its sink commit; its state was advanced and {note}",
    )


__all__ = ["ConfigError", "RunOptions", "run_pipeline"]
