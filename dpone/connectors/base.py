"""The two small Protocols the lifecycle talks to, and the data that crosses them.

A :class:`Source` yields :class:`SourceChunk` s (Arrow RecordBatches plus where they came from).
A :class:`Sink` stages a load's rows invisibly (:class:`SinkLoad`) and commits them together
with a :class:`LoadMarker` in one atomic step, so "committed" means exactly "marker present"
(SPEC §6). Nothing here does IO; the implementations live in ``sources/`` and ``sinks/``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable

import pyarrow as pa

from dpone.connectors.errors import SinkConfigError
from dpone.manifest.plan import LoadColumn, MergeStrategy, StrategyMode
from dpone.records import frozen

if TYPE_CHECKING:  # the system tables' module is imported only by a run that keeps them
    from dpone.connectors.systables import RunRow, SystemRows

#: How a load applies its rows: the strategy the manifest chose (one vocabulary, in the plan).
LOAD_MODES: tuple[str, ...] = get_args(StrategyMode)
MERGE_STRATEGIES: tuple[str, ...] = get_args(MergeStrategy)
LOAD_COLUMNS: tuple[str, ...] = get_args(LoadColumn)
#: What a sink adds to the rows (SPEC §13): the load's id, an scd2 version's validity and hash.
LOAD_ID_COLUMN = "_dpone_load_id"
VALID_FROM, VALID_TO, ROW_HASH = "_dpone_valid_from", "_dpone_valid_to", "_dpone_row_hash"

#: load ids and run ids end up in table names, file names and markers.
ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


@frozen
class DecodeFailure:
    """A physical line (1-based; a CSV header is line 1) the source could not decode.

    ``text`` is the line as text (invalid bytes replaced, cut at 16 KiB): a row value, which
    the lifecycle keeps only under ``pii_policy: preserve``. ``what`` says what is wrong
    with it, without a value.
    """

    line: int
    what: str
    text: str = field(repr=False, compare=False)


@frozen
class SourceChunk:
    """One bounded piece of the source.

    ``first_row`` is the 1-based row number, within ``partition``, of ``batch`` row 0: for
    CSV and JSONL the row among those the reader decoded (the header, blank lines and lines
    that did not decode are not counted; a quoted multi-line field is one row), for Parquet
    the row index + 1, for database and Python sources the position in the result.
    ``partition`` is a file's path as the manifest's glob spells it (``dpone.sourcepaths``),
    or the table / query / callable name. ``file_sha256`` (hex) is computed before the file is
    read, and is None when the source cannot be re-read (``rereadable`` False).
    ``failures`` are the lines of the file that did not decode since the previous chunk (the
    batch may then be empty). ``present`` maps a key that some rows of the batch lack to a
    boolean mask (true: the row has the key), so a key absent from a row is told apart from
    one carrying null (``connectors/presence.py``); empty when every row has every column.
    """

    batch: pa.RecordBatch
    partition: str
    file_sha256: str | None
    first_row: int
    rereadable: bool
    failures: tuple[DecodeFailure, ...] = ()
    present: Mapping[str, pa.BooleanArray] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return int(self.batch.num_rows)


@runtime_checkable
class Source(Protocol):
    """Where rows come from.

    ``identity`` is stable across runs and holds no secret and no absolute path.
    ``cursor_pushdown`` tells whether :meth:`chunks` filters on the incremental cursor itself.
    Optional capabilities, each its own Protocol: :class:`ReadsAhead`, :class:`Partitionable`,
    and ``read_progress()`` (``connectors/progress.py``).
    """

    identity: str
    cursor_pushdown: bool

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Yield rows in chunks of exactly ``chunk_size`` rows (fewer only at a partition's end).

        ``after`` is the run's lower bound (the committed cursor minus ``lag``, or
        ``initial_value``; a typed Python value or ISO-8601 text). Database sources
        (``cursor_pushdown`` True) push it down as ``WHERE cursor_column >= after [AND
        cursor_column < end_value] ORDER BY cursor_column``. File and Python sources ignore
        it: the lifecycle filters after enforcement, on the typed column, and de-duplicates
        the boundary rows for every source. Every call starts afresh.
        """
        ...


@runtime_checkable
class ReadsAhead(Protocol):
    """A source whose :meth:`Source.chunks` the lifecycle may read on another thread, one chunk
    ahead, when ``read_ahead`` is True: only a source whose iterator is bound to no thread and
    runs no user code declares it."""

    read_ahead: bool


def reads_ahead(source: Source) -> bool:
    """Whether ``source`` allows its chunks to be read ahead on another thread."""
    return isinstance(source, ReadsAhead) and bool(source.read_ahead)


@runtime_checkable
class StagesBehind(Protocol):
    """A sink whose load the stream may stage on another thread, one chunk at a time, while
    the next chunk is enforced, when ``stages_behind`` is True: only a sink whose load's
    connection may be used from another thread (never at once) declares it."""

    stages_behind: bool


def stages_behind(sink: Sink) -> bool:
    """Whether ``sink``'s load may be staged on another thread."""
    return isinstance(sink, StagesBehind) and bool(sink.stages_behind)


@runtime_checkable
class SystemTablesLoad(Protocol):
    """A load that writes the system tables' rows (``connectors/systables.py``) in its
    commit's transaction."""

    def attach_system_rows(self, rows: SystemRows) -> None:
        """Write ``rows`` with this load's rows and marker when it commits."""
        ...


@runtime_checkable
class RecordsRuns(Protocol):
    """A sink that keeps the system tables: a failed run's row goes in on its own."""

    def record_run(self, row: RunRow) -> None:
        """Insert ``row`` into ``_dpone_runs`` in a transaction of its own (nothing when the
        run is there already). Raises the sink's typed error when it cannot."""
        ...


PartitionKind = Literal["file", "row_groups", "key_range", "whole"]


@frozen
class Partition:
    """One task's share of the source; small and picklable (it travels to a worker)."""

    index: int
    kind: PartitionKind
    #: the file (as the glob spells it) or the table: what its chunks call their partition
    label: str
    #: file partitions: the glob's spelling of the file (resolved by the worker's source)
    file: str | None = None
    #: Parquet: the row groups, and the file row number of the first one's first row
    row_groups: tuple[int, ...] = ()
    first_row: int = 1
    #: key ranges: the SQL predicate on the key (literals only, built by the source)
    where: str | None = None
    order_by: str | None = None
    #: rows of the run before this partition (the row numbers of run-scoped DLQ refs)
    row_offset: int = 0


@frozen
class Partitioning:
    """A source's partitions in the order every attempt sees them."""

    partitions: tuple[Partition, ...]
    #: why the source runs as one partition (None: it was split)
    single_reason: str | None = None

    @classmethod
    def whole(cls, label: str, reason: str) -> Partitioning:
        """The source as one partition named ``label``, and why it was not split."""
        return cls((Partition(0, "whole", label),), reason)


@runtime_checkable
class Partitionable(Protocol):
    """A source that splits itself into deterministic partitions for a scale-out run (SPEC §12).

    The same source and state always give the same partitions in the same order, so a
    partition's index names its DLQ segments and staged files the same way on every attempt.
    """

    def partitions(self, chunk_size: int, after: object | None) -> Partitioning:
        """The partitions of this source; ``after`` is the run's lower bound on the cursor (a
        database source pushes it down, so it decides each partition's row offset)."""
        ...


@frozen
class LoadSpec:
    """What one load is: who, which rows' schema, how to apply them, how far the cursor goes."""

    pipeline: str
    run_id: str
    load_id: str
    schema: pa.Schema
    mode: StrategyMode = "append"
    unique_key: tuple[str, ...] = ()
    cursor_to: str | None = None
    #: Idempotency keys the load carries (a replay batch: one per row), committed in the same
    #: transaction as its rows and marker; :meth:`KeyedSink.committed_keys` finds them again.
    keys: tuple[str, ...] = ()
    #: How a merge applies its rows (SPEC §13); only ``upsert`` outside a merge.
    merge_strategy: MergeStrategy = "upsert"
    #: ``delete-insert``: target rows whose values of these columns the load holds go first.
    merge_key: tuple[str, ...] = ()
    #: A boolean column of the load: true deletes the key's row (closes its scd2 version).
    deleted_column: str | None = None
    #: ``scd2``: when versions open and close (aware); None: the sink's clock at the commit.
    valid_at: datetime | None = None
    #: dpone's columns added to every row (``load_id``: ``_dpone_load_id``).
    load_columns: tuple[LoadColumn, ...] = ()
    #: child tables come with the rows: the target gets ``_dpone_id`` (their parent id)
    child_tables: bool = False

    def __post_init__(self) -> None:
        for name, value in (("load_id", self.load_id), ("run_id", self.run_id)):
            if not ID_PATTERN.fullmatch(value):
                raise SinkConfigError(f"{name} must match [A-Za-z0-9._-]{{1,128}}")
        if len(set(self.keys)) != len(self.keys):
            raise SinkConfigError("a load carries an idempotency key twice")
        if not all(ID_PATTERN.fullmatch(key) for key in self.keys):
            raise SinkConfigError("idempotency keys must match [A-Za-z0-9._-]{1,128}")
        if not self.pipeline or len(self.pipeline) > 128:
            raise SinkConfigError("pipeline name must be 1..128 characters")
        if self.mode not in LOAD_MODES:
            raise SinkConfigError(f"unknown load mode; expected one of {', '.join(LOAD_MODES)}")
        names = list(self.schema.names)
        if len(set(names)) != len(names):
            raise SinkConfigError("the load schema repeats a column name")
        if any(n.startswith("_dpone") for n in names):
            raise SinkConfigError("column names starting with _dpone are reserved")
        if self.mode == "merge" and not self.unique_key and self.merge_strategy != "delete-insert":
            raise SinkConfigError(
                "merge needs a unique_key", code="DPONE_MANIFEST_MERGE_WITHOUT_KEY"
            )
        missing = [k for k in self.unique_key if k not in names]
        if missing:
            raise SinkConfigError(
                f"unique_key column(s) {', '.join(missing)} are not in the load schema"
            )
        self._check_merge(names)

    def _check_merge(self, names: list[str]) -> None:
        """The merge settings fit the mode and the merge strategy (the compiler says it first,
        for a manifest; this is for every other caller)."""
        if self.merge_strategy not in MERGE_STRATEGIES:
            raise SinkConfigError(
                f"unknown merge strategy; expected one of {', '.join(MERGE_STRATEGIES)}"
            )
        if any(c not in LOAD_COLUMNS for c in self.load_columns):
            raise SinkConfigError(f"unknown load column; expected one of {', '.join(LOAD_COLUMNS)}")
        if self.mode != "merge" and (
            self.merge_strategy != "upsert" or self.merge_key or self.deleted_column
        ):
            raise SinkConfigError("merge_strategy, merge_key and deleted_column need mode merge")
        if self.merge_strategy == "delete-insert" and not self.merge_key:
            raise SinkConfigError("delete-insert needs a merge_key")
        missing = [k for k in self.merge_key if k not in names]
        if missing:
            raise SinkConfigError(
                f"merge_key column(s) {', '.join(missing)} are not in the load schema"
            )
        if self.deleted_column is not None:
            i = self.schema.get_field_index(self.deleted_column)
            if i < 0 or not pa.types.is_boolean(self.schema.field(i).type):
                raise SinkConfigError("deleted_column must be a boolean column of the load")
        if self.valid_at is not None and self.valid_at.tzinfo is None:
            raise SinkConfigError("valid_at must be an aware datetime")


@frozen
class LoadMarker:
    """The proof a load committed, written in the same transaction as its rows.

    ``rows`` counts the rows handed to :meth:`SinkLoad.write` (before merge de-duplication).
    ``committed_at`` is ISO-8601 UTC text. ``target`` is ``dataset.table``.
    """

    load_id: str
    pipeline: str
    run_id: str
    rows: int
    cursor_to: str | None
    committed_at: str
    target: str
    mode: StrategyMode

    def to_json(self) -> dict[str, Any]:
        return {
            "load_id": self.load_id,
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "rows": self.rows,
            "cursor_to": self.cursor_to,
            "committed_at": self.committed_at,
            "target": self.target,
            "mode": self.mode,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LoadMarker:
        mode = str(doc["mode"])
        if mode not in LOAD_MODES:
            raise ValueError("unknown load mode in marker")
        cursor = doc.get("cursor_to")
        return cls(
            load_id=str(doc["load_id"]),
            pipeline=str(doc["pipeline"]),
            run_id=str(doc["run_id"]),
            rows=int(doc["rows"]),
            cursor_to=None if cursor is None else str(cursor),
            committed_at=str(doc["committed_at"]),
            target=str(doc["target"]),
            mode=mode,  # type: ignore[arg-type]
        )


@runtime_checkable
class SinkLoad(Protocol):
    """One load in progress: staged rows no reader can see until :meth:`commit`."""

    def write(self, batch: pa.RecordBatch) -> None:
        """Stage rows (to disk or the database, never kept in Python memory)."""
        ...

    def commit(self, *, cursor_to: str | None = None) -> LoadMarker:
        """Apply every staged row per the strategy and record the marker, atomically.

        ``cursor_to`` (known only once every chunk was read) overrides ``LoadSpec.cursor_to``.
        Committing a load id whose marker already exists applies nothing and returns that
        marker; calling it twice returns the same marker. If it raises, the load may or may
        not have committed: :meth:`Sink.committed_load` is the truth.
        """
        ...

    def commit_staged_parquet(
        self, files: Sequence[Path], *, cursor_to: str | None = None
    ) -> LoadMarker:
        """:meth:`commit` with the rows of ``files`` (Parquet staged by other processes, the
        tasks of a scale-out run) added to this load: one load, one commit."""
        ...

    def abort(self) -> None:
        """Drop what was staged; the target stays exactly as it was. A no-op after commit."""
        ...


@runtime_checkable
class NestedLoad(SinkLoad, Protocol):
    """A load that also carries child tables (``source.normalize: {nested: child_tables}``):
    committed in the load's one transaction with its rows and marker."""

    def write_nested(
        self, batch: pa.RecordBatch, ids: pa.StringArray, children: Mapping[str, pa.RecordBatch]
    ) -> None:
        """Stage ``batch`` with each row's ``_dpone_id`` (``ids``) and the child tables' rows
        (table name -> rows with their ``_dpone_*`` links)."""
        ...


@frozen
class ColumnDefinition:
    """One column as the sink's own catalog names it (``type`` in the sink's dialect)."""

    name: str
    type: str
    nullable: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "nullable": self.nullable}


@frozen
class TableDefinition:
    """A target table's definition as the sink reports it: names and types, never values."""

    table: str
    dialect: str
    columns: tuple[ColumnDefinition, ...]
    #: with child tables: each child table the load writes, as its commit leaves it
    child_tables: tuple[TableDefinition, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "table": self.table,
            "dialect": self.dialect,
            "columns": [c.to_json() for c in self.columns],
        }
        if self.child_tables:
            doc["child_tables"] = [c.to_json() for c in self.child_tables]
        return doc


@runtime_checkable
class DescribedLoad(SinkLoad, Protocol):
    """A load that can say what its target table will be once it commits (the evidence's
    ``ddl``, SPEC §7). Optional: a sink whose loads lack it gives no ``ddl``."""

    def target_definition(self) -> TableDefinition:
        """The target's columns as the commit leaves them, read from the sink's catalog
        after every row is staged and before the commit (the commit applies exactly this)."""
        ...


@runtime_checkable
class Sink(Protocol):
    """Where good rows go; ``identity`` holds no secret and no absolute path."""

    identity: str

    def existing_schema(self) -> pa.Schema | None:
        """The target table's Arrow schema, or None when it does not exist yet."""
        ...

    def committed_load(self, load_id: str) -> LoadMarker | None:
        """The marker of ``load_id`` if that load committed."""
        ...

    def begin(self, load: LoadSpec) -> SinkLoad:
        """Start staging ``load`` (discarding anything staged earlier under its load id)."""
        ...

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        """Finish or drop what killed runs of ``pipeline`` left; return the load ids dropped."""
        ...


@runtime_checkable
class KeyedSink(Sink, Protocol):
    """A sink that commits idempotency keys with a load's rows (what replay needs, SPEC §8)."""

    def session(self) -> AbstractContextManager[None]:
        """Pin one connection for every call made inside the block (a replay opens one)."""
        ...

    def committed_keys(self, keys: Collection[str]) -> set[str]:
        """Those of ``keys`` that a committed load carried (see :attr:`LoadSpec.keys`)."""
        ...

    def existing_keys(self, columns: Sequence[str], probe: pa.Table) -> pa.BooleanArray:
        """For each row of ``probe`` (the ``columns``), whether the target table holds a row
        with the same values; all False when the table does not exist yet."""
        ...
