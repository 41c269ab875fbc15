"""The first-party replay executor for file sources (``quarantine-replay --execute --manifest``).

It binds :mod:`dpone.dlq.replay` to a manifest:

* :class:`FileRowResolver` re-reads each quarantined row from the manifest's file source by its
  ``record_ref`` (path, SHA-256, row). Every file's SHA-256 is checked before any row is read:
  one changed file refuses the whole replay (``DPONE_DLQ_REPLAY_SOURCE_CHANGED``). The rows
  are then re-enforced exactly as a run enforces them (the same
  :class:`~dpone.contracts.enforcer.ContractEnforcementService`, chunk by chunk as the source
  yields them), checked by the manifest's row-scope assertions, and fitted to the target
  table's current columns: a value the target cannot hold without loss (a ``decimal(12,3)``
  into a ``DECIMAL(12,2)`` column the sink would round) keeps the row pending as
  ``sink.row_rejected`` instead of loading something else than the source said.
* :class:`SinkReplayTarget` applies one row as one load of the manifest's sink whose load id
  is the item's idempotency key: the sink's marker-by-load-id makes a second apply a no-op,
  which is what lets a replay killed between apply and acknowledgement simply run again.

The executor holds the pipeline's run lock, so a replay never overlaps a run of the same
pipeline, and refuses a DLQ run whose own load never committed (the next run would read those
rows again).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import structlog

from dpone.assertions.engine import AssertionEngine, AssertionFailed
from dpone.clock import Clock, utc_now
from dpone.connectors._util import conform, sha256_file
from dpone.connectors.base import LoadSpec, Sink
from dpone.connectors.errors import SinkSchemaError
from dpone.connectors.sinks import make_sink
from dpone.connectors.sources import make_source
from dpone.connectors.sources.file import FileSource
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.errors import SchemaFrozen
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import TABLE_SCOPE
from dpone.dlq.canonical import checksum
from dpone.dlq.model import DlqRecord
from dpone.dlq.refs import FileRef, parse_ref
from dpone.dlq.replay import (
    ReplayError,
    ReplayLoadNotCommitted,
    ReplayPlan,
    ReplayPlanMismatch,
    ReplayResult,
    ReplaySourceChanged,
    ReplayUnsupported,
    RowStillRejected,
    execute,
    is_valid_identity,
    plan,
    replayable_index,
)
from dpone.dlq.store import DlqStore
from dpone.manifest.plan import Plan
from dpone.runtime.journal import RunJournal

log = structlog.get_logger("dpone.replay")


class ReplayPipelineMismatch(ReplayError):
    """The DLQ run belongs to another pipeline than the manifest's."""

    code = "DPONE_DLQ_REPLAY_PIPELINE_MISMATCH"
    exit_code = 2


class ReplayRefOutsideSource(ReplayError):
    """A record names a file the manifest's source glob does not match."""

    code = "DPONE_DLQ_REPLAY_REF_OUTSIDE_SOURCE"
    exit_code = 2


# --- identities ---------------------------------------------------------------------------------


def _bounded(identity: str, prefix: str) -> str:
    """``identity`` when it is a valid identity, else its prefix and a digest of it."""
    if is_valid_identity(identity):
        return identity
    return f"{prefix}:{checksum(identity)[7:39]}"


def resolver_identity(manifest: Plan, source_identity: str) -> str:
    """Where a replay reads rows: the pipeline and its source (format and glob).

    Deliberately not the contract: the identity is part of the plan id and so of every
    idempotency key, and the keys must not change when the contract is fixed once more after
    an interrupted execution, or the retry would load the rows already committed again.
    """
    return _bounded(f"dpone-file:{manifest.name}:{source_identity}", "dpone-file")


# --- resolving ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Wanted:
    row: int
    record_id: str


class FileRowResolver:
    """Re-reads, re-enforces and fits quarantined rows of a manifest's file source."""

    def __init__(
        self,
        manifest: Plan,
        source: FileSource,
        existing_schema: Callable[[], pa.Schema | None],
        *,
        unique_key: tuple[str, ...] = (),
    ) -> None:
        self.manifest = manifest
        self.source = source
        self.identity = resolver_identity(manifest, source.identity)
        self._existing_schema = existing_schema
        self._unique_key = unique_key
        self._outcomes: dict[str, pa.RecordBatch | RowStillRejected] = {}

    def prepare(self, records: Sequence[DlqRecord]) -> None:
        """Check every file's SHA-256, then read, enforce and fit every wanted row."""
        if not records:
            return
        files = self._files(records)
        for path, (sha, _) in sorted(files.items()):
            self._check_file(path, sha)
        existing = self._existing_schema()
        enforcer = ContractEnforcementService(self.manifest.sink.contract)
        engine = AssertionEngine(self.manifest.quality.assertions, self.manifest.manifest_dir)
        for path, (sha, wanted) in sorted(files.items()):
            for piece, ids in self._read_rows(path, sha, wanted):
                self._judge(piece, ids, enforcer, engine, existing)

    def resolve(self, record: DlqRecord) -> pa.RecordBatch:
        outcome = self._outcomes.get(record.record_id)
        if outcome is None:
            raise ReplayError(f"record {record.record_id} was not prepared for replay")
        if isinstance(outcome, RowStillRejected):
            raise outcome
        return outcome

    # --- reading --------------------------------------------------------------------------------

    def _files(self, records: Sequence[DlqRecord]) -> dict[str, tuple[str, list[_Wanted]]]:
        files: dict[str, tuple[str, list[_Wanted]]] = {}
        for record in records:
            ref = parse_ref(record.record_ref)
            if not isinstance(ref, FileRef):
                raise ReplayUnsupported(
                    f"record {record.record_id} is not a row read from a file; it cannot be re-read"
                )
            if not self.source.matches(ref.path):
                # The ref is input: a record must not make the replay read any file the
                # manifest does not name (another folder, the home folder, /etc).
                raise ReplayRefOutsideSource(
                    f"record {record.record_id} names a file the manifest's source path "
                    f"{self.source.pattern!r} does not match",
                    path=ref.path,
                    fixes=(
                        "replay the run with the manifest whose source read it, or restore "
                        "that source.path",
                    ),
                )
            sha, wanted = files.setdefault(ref.path, (ref.sha256, []))
            if sha != ref.sha256:
                raise ReplaySourceChanged(
                    f"the records name two versions of {ref.path}; at most one can be replayed",
                    path=ref.path,
                )
            wanted.append(_Wanted(ref.row, record.record_id))
        return files

    def _full_path(self, partition: str) -> Path:
        return self.source.resolve(partition)

    def _check_file(self, partition: str, sha: str) -> None:
        fixes = (
            "restore the file as it was when the run read it, or rerun the pipeline on the "
            "new file instead of replaying",
        )
        try:
            actual = sha256_file(self._full_path(partition))
        except FileNotFoundError:
            raise ReplaySourceChanged(
                f"{partition} is gone; the records cannot be read again",
                path=partition,
                fixes=fixes,
            ) from None
        except OSError as exc:
            raise ReplaySourceChanged(
                f"{partition} cannot be read ({type(exc).__name__})", path=partition
            ) from None
        if actual != sha:
            raise ReplaySourceChanged(
                f"{partition} changed since the run read it (its SHA-256 differs)",
                path=partition,
                fixes=fixes,
            )

    def _read_rows(
        self, partition: str, sha: str, wanted: list[_Wanted]
    ) -> list[tuple[pa.RecordBatch, list[str]]]:
        """The wanted rows, one piece per source chunk (each enforced as that chunk was)."""
        order = sorted(wanted, key=lambda w: w.row)
        pieces: list[tuple[pa.RecordBatch, list[str]]] = []
        i = 0
        chunk_size = self.manifest.runtime.chunk_size
        for chunk in self.source.read_file(partition, self._full_path(partition), chunk_size):
            if chunk.file_sha256 != sha:
                raise ReplaySourceChanged(f"{partition} changed while it was read", path=partition)
            end = chunk.first_row + chunk.num_rows
            take: list[int] = []
            ids: list[str] = []
            while i < len(order) and order[i].row < end:
                take.append(order[i].row - chunk.first_row)
                ids.append(order[i].record_id)
                i += 1
            if take:
                pieces.append((chunk.batch.take(pa.array(take, pa.int64())), ids))
            if i == len(order):
                break
        if i < len(order):
            raise ReplaySourceChanged(
                f"{partition} has fewer rows than a record names", path=partition
            )
        return pieces

    # --- judging --------------------------------------------------------------------------------

    def _judge(
        self,
        piece: pa.RecordBatch,
        ids: list[str],
        enforcer: ContractEnforcementService,
        engine: AssertionEngine,
        existing: pa.Schema | None,
    ) -> None:
        result = enforcer.enforce(piece, existing_schema=existing)
        if isinstance(result.error, SchemaFrozen):
            raise result.error  # the contract refuses the target's shape: fix the manifest
        rejects = result.rejects
        for position, reason, column in zip(
            rejects.positions.to_pylist(),
            rejects.reasons.to_pylist(),
            rejects.columns.to_pylist(),
            strict=True,
        ):
            self._outcomes[ids[position]] = RowStillRejected(
                ReasonCode(reason), None if column == TABLE_SCOPE else column
            )
        valid = result.valid
        for j, position in enumerate(result.valid_positions.to_pylist()):
            row = valid.slice(j, 1)
            self._outcomes[ids[position]] = self._check_row(row, engine, existing)

    def _check_row(
        self, row: pa.RecordBatch, engine: AssertionEngine, existing: pa.Schema | None
    ) -> pa.RecordBatch | RowStillRejected:
        try:
            _, quarantine, _ = engine.observe(row)
        except AssertionFailed:
            return RowStillRejected(ReasonCode.RULE_FAILED)
        if quarantine is not None and quarantine[0].as_py():
            return RowStillRejected(ReasonCode.RULE_FAILED)
        return fit_to_target(row, existing, self._unique_key)


def fit_to_target(
    row: pa.RecordBatch, existing: pa.Schema | None, unique_key: tuple[str, ...] = ()
) -> pa.RecordBatch | RowStillRejected:
    """``row`` cast to the target's column types, or why the target cannot hold it as is.

    Columns the target lacks keep the contract's type (the sink adds them, as in a run).
    """
    if existing is None:
        return row
    fields = []
    for field in row.schema:
        index = existing.get_field_index(field.name)
        fields.append(field if index < 0 else existing.field(index).with_metadata(field.metadata))
    schema = pa.schema(fields)
    for field in schema:
        single = pa.RecordBatch.from_arrays([row.column(field.name)], names=[field.name])
        try:
            conform(single, pa.schema([field]))
        except SinkSchemaError:
            return RowStillRejected(ReasonCode.SINK_ROW_REJECTED, field.name)
    for key in unique_key:
        if key in schema.names and row.column(key).null_count:
            return RowStillRejected(ReasonCode.SINK_ROW_REJECTED, key)
    return conform(row, schema)


# --- applying -----------------------------------------------------------------------------------


class SinkReplayTarget:
    """A manifest's sink as a replay sink: one load per row, load id = idempotency key."""

    def __init__(self, sink: Sink, manifest: Plan, run_id: str) -> None:
        strategy = manifest.sink.strategy
        if strategy.mode == "replace":
            raise ReplayUnsupported(
                "the manifest's sink strategy is replace: a replayed row would replace the table",
                fixes=("rerun the pipeline instead: a replace load reads the whole source again",),
            )
        self.sink = sink
        self.identity = _bounded(sink.identity, "sink")
        self._pipeline = manifest.name
        self._run_id = run_id
        self._mode = strategy.mode
        self._unique_key = strategy.unique_key

    def apply(self, idempotency_key: str, batch: pa.RecordBatch) -> None:
        # No "already committed?" look-up first: the sink's commit of a load id whose marker
        # exists applies nothing (a retry after a crash between commit and acknowledgement),
        # and the look-up would cost a connection per row on the common path.
        load = self.sink.begin(
            LoadSpec(
                pipeline=self._pipeline,
                run_id=self._run_id,
                load_id=idempotency_key,
                schema=batch.schema,
                mode=self._mode,
                unique_key=self._unique_key,
            )
        )
        try:
            load.write(batch)
            load.commit()  # a load id that committed meanwhile is a no-op (the marker)
        except BaseException:
            load.abort()
            raise


# --- binding a manifest -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayBinding:
    """A manifest bound for replaying one DLQ run: its store, resolver and target."""

    manifest: Plan
    run_id: str
    store: DlqStore
    resolver: FileRowResolver
    target: SinkReplayTarget

    def plan(self, *, max_items: int | None = None) -> ReplayPlan:
        """The bound plan of the run (nothing is read from the source or the sink)."""
        bound = max_items if max_items is not None else self.manifest.sink.dlq.max_records_per_run
        return plan(
            self.store,
            self.run_id,
            self.resolver.identity,
            self.target.identity,
            max_items=bound,
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
            fixes=("replay through dpone.dlq.replay with a resolver for that source",),
        )
    environ = dict(os.environ) if env is None else env
    sink_conn = manifest.sink.connection.resolve(environ) if manifest.sink.connection else None
    source = make_source(
        manifest.source.config, manifest.manifest_dir, read_all_as_text=True, connection=None
    )
    assert isinstance(source, FileSource)
    sink = make_sink(
        manifest.sink.config,
        manifest.manifest_dir,
        manifest.runtime.work_dir,
        manifest.name,
        sink_conn,
        clock=clock,
    )
    store = DlqStore(
        dlq_dir if dlq_dir is not None else Path(manifest.sink.dlq.directory),
        manifest.sink.dlq,
        clock=clock,
        environment=manifest.environment,
    )
    strategy = manifest.sink.strategy
    unique_key = strategy.unique_key if strategy.mode == "merge" else ()
    resolver = FileRowResolver(manifest, source, sink.existing_schema, unique_key=unique_key)
    return ReplayBinding(
        manifest, run_id, store, resolver, SinkReplayTarget(sink, manifest, run_id)
    )


def execute_replay(
    binding: ReplayBinding, stored: ReplayPlan | None = None, *, max_items: int | None = None
) -> ReplayResult:
    """Execute the replay of ``binding``'s run: ``stored`` (``--plan FILE``) must be the plan
    the store, the resolver and the target give now; without it the fresh plan is used."""
    manifest, store = binding.manifest, binding.store
    journal = RunJournal(manifest.runtime.work_dir / "runs", manifest.name)
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
        chosen = stored if stored is not None else binding.plan(max_items=max_items)
        return execute(store, chosen, binding.resolver, binding.target)
    finally:
        journal.unlock()


__all__ = [
    "FileRowResolver",
    "ReplayBinding",
    "ReplayPipelineMismatch",
    "ReplayRefOutsideSource",
    "SinkReplayTarget",
    "bind",
    "execute_replay",
    "fit_to_target",
    "resolver_identity",
]
