"""The driver of a scale-out run (SPEC §12): the local stream's place in the run, on Dask.

:class:`DaskScaleOut` is the :class:`~dpone.runtime.stream.ScaleOut` of the run's stream: it
sends the partitions to a Dask cluster instead of the stream reading them itself; the rest of
the run (the lifecycle's commit, evidence, state and failure paths) is the local run's,
unchanged:

    partitions (deterministic) -> DLQ run opened -> one task per partition (Dask)
    -> every task's result checked: a failed partition fails the run, nothing committed
    -> the tasks' DLQ segments indexed from what the tasks report; the run closed
    -> batch assertions over every partition's rows -> the staged Parquet files checked and
       handed to ONE sink load, which reads them itself when it commits (the lifecycle's
       commit) -> evidence -> state

Neither the DLQ segments nor the staged rows pass through the driver: a task reports each
segment's descriptor (name, byte SHA-256, count, first/last id, expiry) and its records'
index entries, and the driver writes the index from them (every read of a record and
``dpone ops dlq verify`` check the bytes against the index); the staged files are checked
against what their task reported (name, size, SHA-256, rows from the footer) and loaded by
the sink in its commit's transaction (DuckDB: ``INSERT ... SELECT FROM read_parquet``; other
sinks stream the files' batches into the load).

The cluster is the manifest's (``runtime.dask.address``) or a ``LocalCluster`` started and
closed by the run. Every task writes under the work dir and the DLQ directory, so both must
be on storage every worker reaches (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dpone import durable
from dpone.assertions.engine import AssertionEngine
from dpone.connectors.objectstore import standard_variables
from dpone.contracts.types import sink_schema
from dpone.dlq.index import StatusReason
from dpone.dlq.result import RunResult
from dpone.dlq.writer import RunWriter
from dpone.errors import DponeError
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.manifest.plan import DaskPlan, Plan
from dpone.manifest.specs import FileSourceSpec
from dpone.runtime.context import RunContext
from dpone.runtime.cursor import CursorTracker
from dpone.runtime.dlq_pipe import DlqPipe, OwnDlqRun
from dpone.runtime.report import RunProgress
from dpone.runtime.scaleout.cluster import ScaleOutError, cluster_client
from dpone.runtime.scaleout.partitions import Partition, plan_partitions
from dpone.runtime.scaleout.task import PartitionResult, StagedFile, TaskSpec, run_partition
from dpone.runtime.staging import Staging, widened
from dpone.runtime.stream import Stream, Streamed, streamed
from dpone.runtime.wiring import Components
from dpone.state.model import PipelineState

log = get_logger("dpone.run")

SCALEOUT_DIR = "scaleout"
_STAGED_NAME = re.compile(r"p[0-9]{5}-c[0-9]{6}\.parquet")
_SEGMENT_NAME = re.compile(r"p([0-9]{5})-c[0-9]{6}(-[0-9]+)?\.jsonl")


class AdoptedDlqRun(OwnDlqRun):
    """The run's DLQ run on the driver: the tasks write its segments, the driver indexes them
    (:func:`adopt`); an abort indexes what is on disk, adopted or not."""

    def abort(self, writer: RunWriter, reason: StatusReason) -> RunResult:
        # Tasks may have published segments the driver never adopted: index the disk.
        writer.trust_disk()
        return writer.abort(reason)


def adopt(pipe: DlqPipe, results: Sequence[PartitionResult]) -> None:
    """Index every task's segments from its descriptors and entries (in partition order),
    each segment checked to be named for its own partition."""
    for r in results:
        found = r.segments
        listed = found.descriptors()
        if not listed:
            continue
        for entry in listed:
            match = _SEGMENT_NAME.fullmatch(entry.name)
            if match is None or int(match.group(1)) != r.index:
                raise ScaleOutError("a task listed a DLQ segment of another partition")
        entries = (found.record_ids, found.sha256s, found.codes, found.columns)
        pipe.adopted(pipe.open().adopt_described(listed, entries))


def scale_out_stream(
    ctx: RunContext, parts: Components, engine: AssertionEngine, state: PipelineState
) -> Stream:
    """The stream of an ``engine: dask`` run: the local run's, read by :class:`DaskScaleOut`,
    its DLQ run indexed from the tasks' segments and its load made of their staged files."""
    scale_out = DaskScaleOut(ctx)
    return Stream(
        ctx,
        parts,
        engine,
        state,
        pipe=DlqPipe(parts.dlq, AdoptedDlqRun(ctx.identity)),
        staging=Staging(parts.sink, ctx.load_spec, on_end=scale_out.remove_folder),
        scale_out=scale_out,
    )


class DaskScaleOut:
    """Reads an ``engine: dask`` run's partitions on a cluster into its stream (see the
    module's docstring)."""

    #: the evidence's section :meth:`evidence` fills
    section = "scale_out"

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        #: per partition: index, label, counts (evidence and the report's log)
        self.partition_counts: list[dict[str, Any]] = []
        #: seconds per stage of the driver's work (logged as ``scaleout.stages``)
        self.stage_seconds: dict[str, float] = {}
        self._single_reason: str | None = None
        #: the run's scale-out folder, once made: removed when the load commits or the run
        #: fails (nothing else reads it)
        self.folder: Path | None = None
        #: per partition index: its staged files' schemas, checked as its task ended
        self._schemas: dict[int, list[pa.Schema]] = {}
        #: how many partitions (in order) have their DLQ segments indexed
        self._adopted = 0

    def evidence(self) -> dict[str, Any]:
        """The evidence's ``scale_out`` section."""
        return {
            "partitions": list(self.partition_counts),
            "single_partition_reason": self._single_reason,
        }

    def remove_folder(self) -> None:
        if self.folder is not None:
            # Reached from the work dir without following a link: a scaleout/ swapped for
            # one during the run must not make this delete a folder elsewhere.
            with contextlib.suppress(OSError, DponeError):
                durable.remove_tree_below(self.folder.parent.parent, self.folder)

    def read(self, stream: Stream) -> Streamed:
        ctx, parts, state = self.ctx, stream.parts, stream.state
        plan, source = ctx.plan, parts.source
        clock = time.perf_counter()
        existing = stream.staging.open()
        bounds = CursorTracker.create(plan.sink.contract, plan.source.incremental, state)
        after = bounds.pushdown() if source.cursor_pushdown else None
        partitioning = plan_partitions(plan, source, after)
        partitions = partitioning.partitions
        self._single_reason = partitioning.single_reason
        if partitioning.single_reason is not None:
            log.warning("scaleout.single_partition", reason=partitioning.single_reason)
        folder = ctx.paths.work_dir / SCALEOUT_DIR / ctx.run_id
        durable.make_below(ctx.paths.work_dir, folder / "staged")
        self.folder = folder
        if parts.dlq is not None:
            stream.pipe.open()  # the run's ``open`` index exists before any task writes into it
        spec = TaskSpec(
            plan=plan,
            identity=ctx.identity,
            env={k: ctx.options.env[k] for k in _variables(plan) if k in ctx.options.env},
            existing=existing,
            state=state,
            folder=str(folder),
        )
        self.stage_seconds["partitioning"] = time.perf_counter() - clock
        clock = time.perf_counter()
        results = self._execute(stream, spec, partitions, plan.runtime.dask)
        self.stage_seconds["tasks"] = time.perf_counter() - clock
        for result in results:  # the first failed partition's error is the run's
            if result.failure is not None:
                raise result.failure.error()
        tracker = self._merge(stream, results, partitions)
        stream.engine.finalize()
        clock = time.perf_counter()
        stream.pipe.close()  # every partition's segments were adopted as its task ended
        self._add_seconds("index_close", clock)
        checkpoint("after_dlq_close")
        self._report_progress(stream, len(partitions), len(partitions))
        clock = time.perf_counter()
        staged = [f for r in results for f in r.staged]
        schemas = [s for r in results for s in self._schemas[r.index]]
        empty = [r.empty_schema for r in results if r.empty_schema is not None]
        # Tasks' files differ in the variant columns their chunks needed: the load holds them
        # all, in the order one chunk would have given them.
        fallback = empty[0] if empty else sink_schema(plan.sink.contract)
        schema = functools.reduce(widened, schemas) if schemas else fallback
        stream.staging.begin_staged([folder / "staged" / f.name for f in staged], schema)
        self._add_seconds("staged_check", clock)
        log.info("scaleout.stages", **{k: round(v, 3) for k, v in self.stage_seconds.items()})
        return streamed(ctx, tracker, stream.tally.late_skipped)

    # --- the cluster ----------------------------------------------------------------------------

    def _execute(
        self, stream: Stream, spec: TaskSpec, partitions: Sequence[Partition], config: DaskPlan
    ) -> list[PartitionResult]:
        from distributed import as_completed

        results: dict[int, PartitionResult] = {}
        with cluster_client(config) as client:
            if client.dashboard_link:
                log.info("scaleout.dashboard", url=client.dashboard_link)
            futures = [
                client.submit(
                    run_partition,
                    spec,
                    part,
                    key=f"dpone-{spec.identity.run_id}-p{part.index:05d}",
                    pure=False,
                )
                for part in partitions
            ]
            for future in as_completed(futures):
                if future.status != "finished":
                    error = type(future.exception()).__name__
                    raise ScaleOutError(
                        f"a partition's task failed on the cluster ({error}); nothing was "
                        "committed",
                        fixes=(
                            "see the workers' logs; a worker killed again and again (out of "
                            "memory?) makes the scheduler give the task up",
                        ),
                    )
                result = future.result()
                if not isinstance(result, PartitionResult):
                    raise ScaleOutError("a task returned something that is not its result")
                results[result.index] = result
                if result.failure is not None:
                    break  # the run fails: the other tasks are cancelled with the client
                self._absorb(stream, spec, result, results, partitions)
                log.info(
                    "scaleout.partition_done",
                    partition=result.index,
                    completed=len(results),
                    total=len(partitions),
                    rows_read=result.read,
                    seconds=round(result.seconds, 3),
                )
                self._report_progress(stream, len(results), len(partitions), results.values())
        return [results[k] for k in sorted(results)]

    def _absorb(
        self,
        stream: Stream,
        spec: TaskSpec,
        result: PartitionResult,
        results: dict[int, PartitionResult],
        partitions: Sequence[Partition],
    ) -> None:
        """While the other tasks run: the staged files of the task that just ended checked,
        and every task's DLQ segments indexed (in partition order, as far as the partitions
        ended so far reach). A run that fails later aborts its DLQ run with what is on disk."""
        clock = time.perf_counter()
        self._schemas[result.index] = [_check_staged(spec.staged_dir, f) for f in result.staged]
        self._add_seconds("staged_check", clock)
        clock = time.perf_counter()
        while self._adopted < len(partitions) and partitions[self._adopted].index in results:
            adopt(stream.pipe, [results[partitions[self._adopted].index]])
            self._adopted += 1
        self._add_seconds("index_close", clock)

    def _add_seconds(self, stage: str, since: float) -> None:
        took = time.perf_counter() - since
        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + took

    def _report_progress(self, stream: Stream, done: int, total: int, results: Any = None) -> None:
        """The CLI's bar fills with the partitions done (its "share read")."""
        if self.ctx.options.progress is None:
            return
        adopted = stream.pipe.records  # the DLQ pipe's count is of the segments indexed
        if results is not None:
            rows = list(results)
            stream.tally.read = sum(r.read for r in rows)
            stream.tally.loaded = sum(r.loaded for r in rows)
            stream.pipe.records = sum(r.quarantined for r in rows)
        progress = RunProgress.of(stream.counts(), bytes_read=done, bytes_total=total)
        stream.pipe.records = adopted
        self.ctx.options.progress(progress)

    # --- the results ----------------------------------------------------------------------------

    def _merge(
        self, stream: Stream, results: Sequence[PartitionResult], partitions: Sequence[Partition]
    ) -> CursorTracker:
        """Every partition's counts, verdicts and cursor into the run's (in partition order)."""
        ctx, tally, engine = self.ctx, stream.tally, stream.engine
        plan = ctx.plan
        labels = {p.index: p.label for p in partitions}
        tracker = CursorTracker.create(
            plan.sink.contract,
            plan.source.incremental,
            stream.state,
            merge=plan.sink.strategy.mode == "merge",
        )
        tally.read = tally.loaded = tally.warned = tally.skipped = tally.chunks = 0
        tally.rejected = tally.dropped = 0
        tally.late_skipped = 0
        tally.violations.clear()
        for r in results:
            ctx.names.see(r.renamed)
            tally.read += r.read
            tally.loaded += r.loaded
            tally.warned += r.warned
            tally.skipped += r.skipped
            tally.late_skipped += r.late_skipped
            tally.chunks += r.chunks
            tally.rejected += r.rejected
            tally.dropped += r.dropped
            for (column, reason), count in r.violations.items():
                tally.violation(column, reason, count)
            engine.rows_passed += r.rows_passed
            if len(r.assertions) != len(engine.tallies):
                raise ScaleOutError("a task judged other assertions than the plan's")
            for t, (failed, observed, logged) in zip(engine.tallies, r.assertions, strict=True):
                t.failed += failed
                t.observed += observed
                t.logged += logged
            top = r.cursor_highest
            if top is not None and (tracker.highest is None or top > tracker.highest):
                tracker.highest = top
            tracker.read_keys.update(r.cursor_read_keys)
            if tracker.window is not None and r.boundary is not None:
                tracker.window.absorb(r.boundary)
            for key, rows in r.cursor_seen.items():
                tracker.seen.setdefault(key, set()).update(rows)
            self.partition_counts.append(
                {
                    "partition": r.index,
                    "source_partition": labels.get(r.index, ""),
                    "rows_read": r.read,
                    "rows_staged": r.loaded,
                    "rows_quarantined": r.quarantined,
                }
            )
        log.info("scaleout.partitions", partitions=self.partition_counts)
        return tracker


def _check_staged(staged_dir: Path, staged: StagedFile) -> pa.Schema:
    """A staged file as its task reported it (name, size, bytes, rows); its Arrow schema.
    The file is the task's word, read back: it is checked before the sink reads it."""
    if not _STAGED_NAME.fullmatch(staged.name):
        raise ScaleOutError("a task named a staged file outside its naming scheme")
    path = staged_dir / staged.name
    digest = hashlib.sha256()
    size = 0
    try:
        with path.open("rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
                size += len(block)
        if size != staged.size or digest.hexdigest() != staged.sha256:
            raise ScaleOutError(
                f"staged file {staged.name} does not hold the bytes its task reported"
            )
        meta = pq.read_metadata(path)
    except OSError as exc:
        raise ScaleOutError(
            f"staged file {staged.name} cannot be read ({type(exc).__name__})"
        ) from None
    except pa.ArrowException:
        raise ScaleOutError(f"staged file {staged.name} is not a readable Parquet file") from None
    if meta.num_rows != staged.rows:
        raise ScaleOutError(f"staged file {staged.name} holds another number of rows")
    return pq.read_schema(path).remove_metadata()


def _variables(plan: Plan) -> tuple[str, ...]:
    """What a task is handed of the run's environment: the manifest's ``${VAR}`` references
    and the standard variables of an object store the source reads (its credentials)."""
    spec = plan.source.spec
    store = standard_variables(spec.path) if isinstance(spec, FileSourceSpec) else ()
    return (*plan.secret_names, *store)


__all__ = ["SCALEOUT_DIR", "DaskScaleOut", "ScaleOutError", "scale_out_stream"]
