"""The first-party replay executor for file sources (``quarantine-replay --execute --manifest``).

It binds a manifest to the replay executor (:mod:`dpone.ops.replay.executor`) through the
same component wiring as a run (``runtime/wiring.py``): the resolver is
:class:`~dpone.ops.replay.file_resolver.FileRowResolver`, and :class:`SinkReplayTarget`
applies the rows in batches of ``runtime.chunk_size``: one load of the manifest's sink per
batch, carrying the rows' idempotency keys, which the sink commits in the same transaction as
the rows (``LoadSpec.keys``). The executor asks the sink which keys it committed before
applying anything, which is what lets a replay killed between a commit and its
acknowledgements simply run again. One sink connection serves the whole replay.

The executor holds the pipeline's run lock, so a replay never overlaps a run of the same
pipeline, and refuses a DLQ run whose own load never committed (the next run would read those
rows again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from dpone.clock import Clock, format_timestamp, utc_now
from dpone.connectors.base import KeyedSink, LoadSpec
from dpone.connectors.sources.file import FileSource
from dpone.dlq.store import DlqStore
from dpone.faults import checkpoint
from dpone.manifest.plan import Plan
from dpone.ops.replay.document import ReplayPlan, replay_bound
from dpone.ops.replay.errors import (
    ReplayLoadNotCommitted,
    ReplayPipelineMismatch,
    ReplayPlanMismatch,
    ReplayUnsupported,
)
from dpone.ops.replay.executor import ReplayResult, execute
from dpone.ops.replay.file_resolver import FileRowResolver, bounded_identity
from dpone.ops.replay.reading import plan, read_run, replayable_index
from dpone.records import frozen
from dpone.runtime import wiring
from dpone.runtime.children import normalize_of
from dpone.runtime.context import environment

# --- applying -----------------------------------------------------------------------------------


def batch_load_id(keys: Sequence[str]) -> str:
    """The load id of one replay batch, derived from the keys it carries."""
    return "replay-batch-" + hashlib.sha256("\n".join(keys).encode()).hexdigest()[:48]


class SinkReplayTarget:
    """A manifest's sink as a replay sink: one load per batch of at most ``chunk_size`` rows,
    the rows' idempotency keys committed in the same transaction as the rows."""

    def __init__(self, sink: KeyedSink, manifest: Plan, run_id: str) -> None:
        strategy = manifest.sink.strategy
        if normalize_of(manifest) is not None:
            raise ReplayUnsupported(
                "the manifest loads child tables (source.normalize): a replayed row would load "
                "without its child rows",
                fixes=("fix the source file and rerun the pipeline: its root rows load whole",),
            )
        if strategy.mode == "replace":
            raise ReplayUnsupported(
                "the manifest's sink strategy is replace: a replayed row would replace the table",
                fixes=("rerun the pipeline instead: a replace load reads the whole source again",),
            )
        self.sink = sink
        self.identity = bounded_identity(sink.identity, "sink")
        self.batch_rows = manifest.runtime.chunk_size
        self._pipeline = manifest.name
        self._run_id = run_id
        self._mode = strategy.mode
        self._unique_key = strategy.unique_key
        self._strategy = strategy
        self._load_columns = manifest.sink.load_columns

    def committed(self, keys: Sequence[str]) -> set[str]:
        return self.sink.committed_keys(keys)

    def apply(self, keys: Sequence[str], rows: pa.Table) -> None:
        load = self.sink.begin(
            LoadSpec(
                pipeline=self._pipeline,
                run_id=self._run_id,
                load_id=batch_load_id(keys),
                schema=rows.schema,
                mode=self._mode,
                unique_key=self._unique_key,
                keys=tuple(keys),
                merge_strategy=self._strategy.merge_strategy or "upsert",
                merge_key=self._strategy.merge_key,
                deleted_column=self._strategy.deleted_column,
                # None under scd2: versions open when the replay batch commits (the sink's
                # clock), unless the manifest fixes the boundary.
                valid_at=self._strategy.boundary(),
                load_columns=self._load_columns,
            )
        )
        try:
            for batch in rows.to_batches():
                load.write(batch)
            checkpoint("replay_before_batch_commit")
            load.commit()
        except BaseException:
            load.abort()
            raise


# --- binding a manifest -------------------------------------------------------------------------


@frozen
class ReplayBinding:
    """A manifest bound for replaying one DLQ run: its store, resolver and target."""

    manifest: Plan
    run_id: str
    store: DlqStore
    resolver: FileRowResolver
    target: SinkReplayTarget

    def plan(self, *, max_items: int | None = None) -> ReplayPlan:
        """The bound plan of the run (nothing is read from the source or the sink)."""
        return plan(
            self.store,
            self.run_id,
            self.resolver.identity,
            self.target.identity,
            max_items=replay_bound(max_items, manifest=self.manifest),
        )


def bind(
    manifest: Plan,
    run_id: str,
    *,
    dlq_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    clock: Clock = utc_now,
) -> ReplayBinding:
    """Build the resolver and the target of ``manifest`` (connects to nothing yet)."""
    if manifest.source.type != "file":
        raise ReplayUnsupported(
            f"the first-party replay executor re-reads file sources; this manifest reads "
            f"a {manifest.source.type} source",
            fixes=("replay through dpone.ops.replay with a resolver for that source",),
        )
    source, sink = wiring.connectors(manifest, environment(env), clock)
    assert isinstance(source, FileSource)
    store = wiring.dlq_store(manifest, clock, dlq_dir)
    strategy = manifest.sink.strategy
    unique_key = strategy.unique_key if strategy.mode == "merge" else ()
    if not isinstance(sink, KeyedSink):
        raise ReplayUnsupported(
            f"the manifest's {manifest.sink.type} sink cannot commit idempotency keys with its "
            "rows, so a replay could not be made exactly once",
            fixes=(
                "replay into a duckdb, postgres or filesystem sink: a manifest with the same "
                "source and contract and one of those sinks",
                "or rerun the pipeline once the source rows are fixed",
            ),
        )
    resolver = FileRowResolver(manifest, source, sink, unique_key=unique_key)
    return ReplayBinding(
        manifest, run_id, store, resolver, SinkReplayTarget(sink, manifest, run_id)
    )


def execute_replay(
    binding: ReplayBinding, stored: ReplayPlan | None = None, *, max_items: int | None = None
) -> ReplayResult:
    """Execute the replay of ``binding``'s run: ``stored`` (``--plan FILE``) must be the plan
    the store, the resolver and the target give now; without it the fresh plan is used."""
    manifest, store = binding.manifest, binding.store
    journal = wiring.journal(manifest)
    journal.lock()
    try:
        index = replayable_index(store, binding.run_id)
        if index.pipeline is not None and index.pipeline != manifest.name:
            raise ReplayPipelineMismatch(
                f"run {binding.run_id} belongs to pipeline {index.pipeline}, "
                f"not to {manifest.name}",
                fixes=("replay a run with the manifest of the pipeline that quarantined it",),
            )
        if binding.target.sink.committed_load(index.load_id) is None:
            raise ReplayLoadNotCommitted(
                f"the load of run {binding.run_id} never committed: its rows are read again "
                "by the pipeline's next run, which also closes this DLQ run as aborted",
                fixes=("run the pipeline instead of replaying",),
            )
        if stored is not None and stored.run_id != binding.run_id:
            raise ReplayPlanMismatch(
                f"the plan is for run {stored.run_id}, not for run {binding.run_id}"
            )
        bound = replay_bound(max_items, manifest=manifest, stored=stored)
        run = read_run(store, binding.run_id, bound, index=index)  # each record read once
        chosen = stored or run.plan(
            binding.resolver.identity, binding.target.identity, format_timestamp(store.now())
        )
        with binding.target.sink.session():  # one connection for the whole replay
            return execute(store, chosen, binding.resolver, binding.target, run=run)
    finally:
        journal.unlock()


__all__ = ["ReplayBinding", "SinkReplayTarget", "batch_load_id", "bind", "execute_replay"]
