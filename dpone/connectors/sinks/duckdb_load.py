"""One load of the DuckDB sink (``duckdb.py`` describes the protocol): staged into a table in
whole row groups, committed in one transaction with its marker and idempotency keys; the
tables and names both sides share."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import duckdb
import pyarrow as pa

from dpone.clock import Clock, iso_utc
from dpone.connectors.base import ColumnDefinition, LoadMarker, LoadSpec, TableDefinition
from dpone.connectors.batches import same_columns
from dpone.connectors.sinks._common import (
    KEY_COLUMN,
    KEYS_TABLE,
    MARKER_COLUMNS,
    Step,
    marker_from_row,
    marker_row,
)
from dpone.connectors.sinks._duck_errors import duck_error
from dpone.connectors.sinks.duckdb_children import DuckChildren
from dpone.connectors.sinks.loadstate import NestingLoad, keys_committed_twice
from dpone.connectors.sinks.nativejson import native_schema
from dpone.connectors.sources.duckdb import interruptible
from dpone.connectors.sql.identifiers import quote_ident
from dpone.connectors.sql.merge import MergeSql, extra_columns

if TYPE_CHECKING:  # imported only by a run that keeps the system tables
    from dpone.connectors.systables import SystemRows, SystemTable

#: DuckDB's row group size (rows): staging inserts whole row groups (see DuckDbLoad._stage).
ROW_GROUP_ROWS = 122_880
LOADS = "_dpone_loads"
STAGES = "_dpone_stages"
SEQ = "_dpone_seq"
KEY, ID = quote_ident(KEY_COLUMN), quote_ident("load_id")
# Arrow objects registered on a connection for one statement.
PROBE, EMPTY, BATCH, NEW_KEYS = "_dpone_probe", "_dpone_empty", "_dpone_batch", "_dpone_keys"
SYSTEM_ROWS = "_dpone_system_rows"

LOADS_DDL = (
    'CREATE TABLE IF NOT EXISTS {t} ("load_id" VARCHAR PRIMARY KEY, "pipeline" VARCHAR NOT NULL, '
    '"run_id" VARCHAR NOT NULL, "target" VARCHAR NOT NULL, "load_mode" VARCHAR NOT NULL, '
    '"row_count" BIGINT NOT NULL, "cursor_to" VARCHAR, "committed_at" VARCHAR NOT NULL, '
    '"load_seq" BIGINT NOT NULL)'
)
KEYS_DDL = f"CREATE TABLE IF NOT EXISTS {{t}} ({KEY} VARCHAR PRIMARY KEY, {ID} VARCHAR NOT NULL)"
STAGES_DDL = (
    'CREATE TABLE IF NOT EXISTS {t} ("stage_table" VARCHAR PRIMARY KEY, "load_id" VARCHAR '
    'NOT NULL, "pipeline" VARCHAR NOT NULL, "target" VARCHAR NOT NULL, "created_at" VARCHAR '
    "NOT NULL)"
)


class DuckDbTarget(Protocol):
    """What a load needs of its sink (``duckdb.DuckDbSink``), so the two modules import one way."""

    table: str
    dataset: str
    target: str
    clock: Clock

    def q(self, name: str) -> str: ...

    def table_exists(self, con: duckdb.DuckDBPyConnection, name: str) -> bool: ...

    def table_columns(
        self, con: duckdb.DuckDBPyConnection, name: str
    ) -> list[tuple[str, str, bool]]: ...


def insert_system(
    con: duckdb.DuckDBPyConnection,
    sink: DuckDbTarget,
    tables: tuple[tuple[SystemTable, pa.Table], ...],
    step: Step,
) -> None:
    """Create the system tables that do not exist yet and add ``tables``' rows, in the
    caller's transaction (a row whose key is there already is left as it is)."""
    for table, rows in tables:
        name = sink.q(table.name)
        step.doing = f"recording the run in {name}"
        con.execute(table.ddl(name, "duckdb"))
        if rows.num_rows:
            con.register(SYSTEM_ROWS, rows)
            con.execute(table.insert(name, quote_ident(SYSTEM_ROWS)))
            con.unregister(SYSTEM_ROWS)


def drop_stage(con: duckdb.DuckDBPyConnection, sink: DuckDbTarget, stage: str) -> None:
    con.execute("BEGIN TRANSACTION")
    con.execute(f"DROP TABLE IF EXISTS {sink.q(stage)}")
    con.execute(f'DELETE FROM {sink.q(STAGES)} WHERE "stage_table" = ?', [stage])
    con.execute("COMMIT")


class DuckDbLoad(NestingLoad):
    """One load staged into a DuckDB table."""

    native_json = True  # ``type: json`` columns are DuckDB JSON

    def __init__(
        self, sink: DuckDbTarget, con: duckdb.DuckDBPyConnection, spec: LoadSpec, stage: str
    ) -> None:
        super().__init__(spec)
        self._sink = sink
        self._con = con
        self._stage_table = stage
        self._step = Step(f"committing the load into {sink.q(sink.table)}")
        # Staged rows short of a whole row group, not inserted yet (see _stage).
        self._waiting: list[pa.RecordBatch] = []
        self._waiting_rows = 0
        #: Parquet files the commit reads itself (:meth:`commit_staged_parquet`)
        self._parquet: tuple[Path, ...] = ()
        #: the staging table's columns in its order (a widened load appends to it)
        self._stage_names: list[str] = list(spec.schema.names)
        #: the commit's statements on the child tables (``write_nested``)
        self._children = DuckChildren(sink.table, sink.dataset)
        self._system: SystemRows | None = None

    def attach_system_rows(self, rows: SystemRows) -> None:
        """Insert ``rows`` into the system tables in this load's commit transaction."""
        self._require_open()
        self._system = rows

    def _stage(self, batch: pa.RecordBatch) -> None:
        """Stage ``batch`` in whole row groups: each INSERT holds a multiple of DuckDB's row
        group size, from one contiguous Arrow batch, and only the rows short of a whole row
        group wait (at most one row group) for the next batch or the commit.

        DuckDB writes such inserts to disk compressed as they come; inserts that end inside a
        row group (a chunk's valid rows are any number) leave row groups that the checkpoint
        at the end reads back and compresses again (for 1,000,000 rows in chunks of 250,000:
        a third more CPU and half again the file). Nothing of a load is visible before its
        commit, so rows waiting here change nothing else.
        """
        if self.spec.mode == "merge":
            seq = pa.array(range(self.rows, self.rows + batch.num_rows), pa.int64())
            batch = batch.append_column(SEQ, seq)
        batch = self.with_ids(batch)
        if self._waiting:
            need = ROW_GROUP_ROWS - self._waiting_rows
            if batch.num_rows < need:
                self._wait(batch)
                return
            # One row group: the rows that waited and the head of this batch, put together.
            self._insert(pa.concat_batches([*self._waiting, batch.slice(0, need)]))
            self._waiting, self._waiting_rows = [], 0
            batch = batch.slice(need)
        whole = batch.num_rows - batch.num_rows % ROW_GROUP_ROWS
        if whole:
            self._insert(batch.slice(0, whole))
        if whole < batch.num_rows:
            self._wait(batch.slice(whole))

    def _wait(self, batch: pa.RecordBatch) -> None:
        self._waiting.append(batch)
        self._waiting_rows += batch.num_rows

    def _flush(self) -> None:
        """Stage the rows still waiting for a whole row group (before the commit)."""
        if self._waiting:
            waiting, self._waiting, self._waiting_rows = self._waiting, [], 0
            self._insert(waiting[0] if len(waiting) == 1 else pa.concat_batches(waiting))

    def _insert(self, batch: pa.RecordBatch) -> None:
        stage = self._sink.q(self._stage_table)
        try:
            with interruptible("DuckDB sink: staging rows"):
                self._con.register(BATCH, pa.Table.from_batches([batch]))
                # By name: a widened staging table's column order is not the batch's.
                cols = ", ".join(quote_ident(n) for n in batch.schema.names)
                self._con.execute(
                    f"INSERT INTO {stage} ({cols}) SELECT {cols} FROM {quote_ident(BATCH)}"
                )
                self._con.unregister(BATCH)
        except duckdb.Error as exc:
            raise duck_error(exc, f"inserting rows into the staging table {stage}") from None

    def _widen(self, spec: LoadSpec, added: list[pa.Field]) -> None:
        """The new columns appended to the staging table (the commit orders the target's
        columns as ``spec.schema`` does)."""
        self._flush()  # the rows waiting were conformed to the old schema
        stage = self._sink.q(self._stage_table)
        try:
            with interruptible("DuckDB sink: adding columns to the staging table"):
                self._con.register(EMPTY, pa.schema(added).empty_table())
                types = self._con.execute(f"DESCRIBE SELECT * FROM {quote_ident(EMPTY)}")
                described = [(str(r[0]), str(r[1])) for r in types.fetchall()]
                self._con.unregister(EMPTY)
                for name, dtype in described:
                    self._con.execute(f"ALTER TABLE {stage} ADD COLUMN {quote_ident(name)} {dtype}")
                    self._stage_names.append(name)
        except duckdb.Error as exc:
            raise duck_error(exc, f"adding columns to the staging table {stage}") from None

    def _commit(self) -> LoadMarker:
        self._flush()
        con, sink, spec = self._con, self._sink, self.spec
        q = sink.q
        step = self._step = Step(f"creating the marker table {q(LOADS)}")
        try:
            with interruptible("DuckDB sink: committing the load"):
                con.execute("BEGIN TRANSACTION")
                con.execute(LOADS_DDL.format(t=q(LOADS)))
                step.doing = f"reading the load marker from {q(LOADS)}"
                found = con.execute(
                    f"SELECT {MARKER_COLUMNS} FROM {q(LOADS)} WHERE {ID} = ?", [spec.load_id]
                ).fetchall()
                if found:
                    con.execute("ROLLBACK")
                    step.doing = f"dropping the staging table {q(self._stage_table)}"
                    drop_stage(con, sink, self._stage_table)
                    return marker_from_row(found[0])
                target, stage = q(sink.table), q(self._stage_table)
                adopted = (
                    spec.mode != "merge"
                    and not spec.load_columns
                    and not spec.child_tables
                    and self._stage_names == spec.schema.names
                    and not sink.table_exists(con, sink.table)
                )
                if adopted:
                    # A first load into a table that does not exist yet: the staging table becomes
                    # the target, inside this transaction, instead of copying every row again.
                    self._insert_parquet(con, stage)
                    self._adopt_stage(con)
                else:
                    self._prepare_target(con)
                    self._prepare_children(con, target, stage)
                    self._apply(con, target, stage)
                    self._insert_parquet(con, target)
                if spec.child_tables:
                    self._insert_children(con, target)
                marker = self.new_marker(sink.target, iso_utc(sink.clock()))
                step.doing = f"inserting the load marker into {q(LOADS)}"
                con.execute(
                    f'INSERT INTO {q(LOADS)} ({MARKER_COLUMNS}, "load_seq") SELECT ?, ?, ?, ?, '
                    f'?, ?, ?, ?, coalesce(max("load_seq"), 0) + 1 FROM {q(LOADS)}',
                    list(marker_row(marker)),
                )
                if spec.keys:
                    step.doing = f"inserting idempotency keys into {q(KEYS_TABLE)}"
                    self._insert_keys(con)
                if self._system is not None:
                    insert_system(con, sink, self._system.tables(), step)
                step.doing = f"dropping the staging table {stage}"
                if not adopted:
                    con.execute(f"DROP TABLE {stage}")
                con.execute(f'DELETE FROM {q(STAGES)} WHERE "stage_table" = ?', [self._stage_table])
                step.doing = f"committing the load into {target}"
                con.execute("COMMIT")
                return marker
        except BaseException as exc:  # an interrupt too: the transaction never half-stays
            rollback(con)
            if isinstance(exc, duckdb.Error):
                raise duck_error(exc, step.doing) from None
            raise

    # --- Parquet staged by other processes (a scale-out run's tasks) ----------------------------

    def commit_staged_parquet(
        self, files: Sequence[Path], *, cursor_to: str | None = None
    ) -> LoadMarker:
        """Commit with the rows of ``files`` read by DuckDB itself inside the commit's
        transaction (``INSERT INTO ... SELECT ... FROM read_parquet([...])``): no row passes
        through Python and none is staged twice. A merge (its rows numbered for "last wins"),
        a load that adds dpone's columns, or files whose columns or types are not this load's,
        go through :meth:`write` instead (the base's way, which conforms every batch).
        Nullability is not compared: a file may write a NOT NULL column as optional, and the
        target's NOT NULL (set by the commit) refuses a NULL inside the same transaction."""
        import pyarrow.parquet as pq  # scale-out and prevalidated runs only

        self._require_open()
        # A JSON column is a string in the files and arrow.json in the load: DuckDB reads it
        # into the JSON column itself.
        if (
            self.spec.mode == "merge"
            or self.spec.load_columns
            or any(
                not same_columns(native_schema(pq.read_schema(f)), self.spec.schema) for f in files
            )
        ):
            return super().commit_staged_parquet(files, cursor_to=cursor_to)
        self._parquet = tuple(files)
        return self.commit(cursor_to=cursor_to)

    def _insert_parquet(self, con: duckdb.DuckDBPyConnection, into: str) -> None:
        """The rows of the Parquet files given to :meth:`commit_staged_parquet` into ``into``
        (the staging table about to become the target, or the target), counted."""
        if not self._parquet:
            return
        cols = ", ".join(quote_ident(n) for n in self.spec.schema.names)
        # The run's own files under its work dir; quoted as SQL string literals.
        files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in self._parquet)
        self._step.doing = f"loading the staged Parquet files into {into}"
        inserted = con.execute(
            f"INSERT INTO {into} ({cols}) SELECT {cols} FROM read_parquet([{files}])"
        ).fetchall()
        self.rows += int(inserted[0][0])

    def _prepare_children(self, con: duckdb.DuckDBPyConnection, target: str, stage: str) -> None:
        """Empty or prune the target's child tables before its rows change (a load without
        child tables leaves them alone)."""
        if not self.spec.child_tables:
            return
        self._step.doing = f"listing the child tables of {target}"
        existing = [self._sink.q(name) for name in self._children.existing(con)]
        self._children.before_apply(
            con,
            existing,
            target=target,
            stage=stage,
            mode=self.spec.mode,
            keys=self.spec.unique_key,
            step=self._step,
        )

    def _insert_children(self, con: duckdb.DuckDBPyConnection, target: str) -> None:
        sink = self._sink
        present = {
            name: [c[0].lower() for c in sink.table_columns(con, name)]
            for name in self._children.existing(con)
        }
        self._children.insert(
            con,
            sink.q,
            present,
            self.child_tables(),
            target=target,
            merge=self.spec.mode == "merge",
            step=self._step,
        )

    def _insert_keys(self, con: duckdb.DuckDBPyConnection) -> None:
        """One row per idempotency key of the load, inside the commit's transaction."""
        keys, new = self._sink.q(KEYS_TABLE), quote_ident(NEW_KEYS)
        con.execute(KEYS_DDL.format(t=keys))
        con.register(NEW_KEYS, pa.table({KEY_COLUMN: pa.array(self.spec.keys, pa.string())}))
        clash = con.execute(
            f"SELECT count(*) FROM {new} AS k JOIN {keys} AS c USING ({KEY})"
        ).fetchall()
        if clash[0][0]:
            raise keys_committed_twice(self.spec.load_id)
        con.execute(f"INSERT INTO {keys} SELECT {KEY}, ? FROM {new}", [self.spec.load_id])
        con.unregister(NEW_KEYS)

    def _apply(self, con: duckdb.DuckDBPyConnection, target: str, stage: str) -> None:
        """Move the staged rows into an existing target per the strategy (``sql/merge.py``)."""
        spec = self.spec
        merge = MergeSql(
            spec=spec,
            dialect="duckdb",
            target=target,
            stage=stage,
            scratch=quote_ident(self._stage_table + "_v"),
            seq=SEQ,
            at=spec.valid_at or self._sink.clock(),
        )
        for statement in merge.statements():
            self._step.doing = statement.doing
            con.execute(statement.sql)

    def _adopt_stage(self, con: duckdb.DuckDBPyConnection) -> None:
        sink, step = self._sink, self._step
        target = sink.q(sink.table)
        step.doing = f"creating {target} from the staging table {sink.q(self._stage_table)}"
        con.execute(f"ALTER TABLE {sink.q(self._stage_table)} RENAME TO {quote_ident(sink.table)}")
        for field in self.spec.schema:
            if not field.nullable:
                column = quote_ident(field.name)
                step.doing = f"setting NOT NULL on column {column} of {target}"
                con.execute(f"ALTER TABLE {target} ALTER COLUMN {column} SET NOT NULL")

    def _prepare_target(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create the target from the staged column types (and the columns dpone adds), or
        add the columns it lacks."""
        sink, step = self._sink, self._step
        target = sink.q(sink.table)
        by_name = {c[0]: c for c in sink.table_columns(con, self._stage_table)}
        staged = [by_name[name][:2] for name in self.spec.schema.names]  # the load's order
        staged += extra_columns(self.spec, "duckdb")
        nullable = {f.name: f.nullable for f in self.spec.schema}
        if not sink.table_exists(con, sink.table):
            columns = ", ".join(
                f"{quote_ident(name)} {dtype}{'' if nullable.get(name, True) else ' NOT NULL'}"
                for name, dtype in staged
            )
            step.doing = f"creating the table {target}"
            con.execute(f"CREATE TABLE {target} ({columns})")
            return
        # DuckDB matches quoted names case-insensitively: "Amount" and "amount" are one column.
        present = {name.lower() for name, _, _ in sink.table_columns(con, sink.table)}
        for name, dtype in staged:
            if name.lower() not in present:
                step.doing = f"adding column {quote_ident(name)} to {target}"
                con.execute(f"ALTER TABLE {target} ADD COLUMN {quote_ident(name)} {dtype}")

    def target_definition(self) -> TableDefinition:
        """The target as this load's commit leaves it: the commit's own DDL (create the table
        from the staged types, or add the columns it lacks) run in a transaction that is
        rolled back, and the columns read from DuckDB's catalog inside it. A first load that
        adopts the staging table gets the same columns, types and NOT NULLs this way."""
        self._require_open()
        con, sink = self._con, self._sink
        self._step = Step(f"describing {sink.q(sink.table)}")
        try:
            with interruptible("DuckDB sink: describing the target"):
                con.execute("BEGIN TRANSACTION")
                try:
                    self._prepare_target(con)
                    columns = sink.table_columns(con, sink.table)
                    children: tuple[TableDefinition, ...] = ()
                    if self.spec.child_tables:
                        schemas = self.child_schemas()
                        args = (con, sink.q, sink.table_columns, schemas, self._step)
                        children = self._children.describe(*args)
                finally:
                    con.execute("ROLLBACK")
        except duckdb.Error as exc:
            raise duck_error(exc, self._step.doing) from None
        return TableDefinition(
            sink.target,
            "duckdb",
            tuple(ColumnDefinition(name, dtype, nullable) for name, dtype, nullable in columns),
            children,
        )

    def _abort(self) -> None:
        self._waiting, self._waiting_rows = [], 0
        self.drop_children()
        try:
            drop_stage(self._con, self._sink, self._stage_table)
        except duckdb.Error:
            rollback(self._con)  # cleanup_abandoned drops it on the next run

    def _close(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self._con.close()


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")
