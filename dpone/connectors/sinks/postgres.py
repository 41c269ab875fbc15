"""PostgreSQL sink through ADBC: Arrow batches go by ``COPY ... FROM STDIN (FORMAT binary)``
(``adbc_ingest``) into a temporary (so unlogged) staging table.

The whole load is one transaction, from :meth:`PostgresSink.begin` to
:meth:`PostgresLoad.commit`: the staging table is invisible to every other session by
construction, a killed process's transaction is rolled back by the server (nothing to clean
up), and the commit applies the strategy, creates or evolves the target and inserts the
marker into ``<dataset>._dpone_loads`` atomically. A commit whose acknowledgement was lost
(the connection dropped during COMMIT) is settled by reading the marker back.

Every name reaches SQL quoted and schema-qualified (``"<dataset>"."<table>"`` in the
connection's database; staging as ``"pg_temp"."<name>"``), so reserved words, mixed case,
spaces and non-ASCII names are exact. PostgreSQL silently truncates names longer than 63
bytes, so such a name is refused instead.

A load that carries idempotency keys (a replay batch) inserts one row per key into
``<dataset>._dpone_load_keys`` in the same transaction, and so do the system tables' rows
(``pgsystem.py``); :meth:`PostgresSink.record_run` records a failed run's row on its own.
:meth:`PostgresSink.session` pins one connection for many loads and look-ups, each ending its
own transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import ColumnDefinition, LoadMarker, LoadSpec, TableDefinition
from dpone.connectors.errors import SinkConfigError, SinkSchemaError
from dpone.connectors.sinks import pgfiles
from dpone.connectors.sinks._common import (
    KEY_COLUMN,
    KEYS_TABLE,
    MARKER_COLUMNS,
    KeyProbes,
    Step,
    marker_from_row,
    marker_row,
    positioned,
    probe_join_sql,
)
from dpone.connectors.sinks.loadstate import NestingLoad, keys_committed_twice
from dpone.connectors.sinks.pgchildren import PgChildren
from dpone.connectors.sinks.pgsystem import insert_system, record_run
from dpone.connectors.sinks.pgtemp import (
    MAX_IDENTIFIER_BYTES,
    close,
    ingest_temporary,
    release,
    rollback,
    temporary,
    too_long,
)
from dpone.connectors.sql import postgres as pg
from dpone.connectors.sql.identifiers import qualify, quote_ident, short_hash
from dpone.connectors.sql.merge import ROW_ID_COLUMN, MergeSql, extra_columns, is_dpone_column
from dpone.connectors.sql.pgtypes import arrow_type, pg_type, staging_array
from dpone.connectors.systables import RunRow, SystemRows
from dpone.errors import DponeError
from dpone.manifest.specs import PostgresSinkSpec

_LOADS = "_dpone_loads"
_SEQ = "_dpone_seq"
_KEY, _ID = quote_ident(KEY_COLUMN), quote_ident("load_id")
#: PostgreSQL truncates longer identifiers (NAMEDATALEN - 1 bytes) with only a NOTICE.
_LOADS_DDL = (
    'CREATE TABLE IF NOT EXISTS {t} ("load_id" text PRIMARY KEY, "pipeline" text NOT NULL, '
    '"run_id" text NOT NULL, "target" text NOT NULL, "load_mode" text NOT NULL, '
    '"row_count" bigint NOT NULL, "cursor_to" text, "committed_at" text NOT NULL, '
    '"load_seq" bigint NOT NULL)'
)
_KEYS_DDL = f"CREATE TABLE IF NOT EXISTS {{t}} ({_KEY} text PRIMARY KEY, {_ID} text NOT NULL)"
_COLUMNS_SQL = (
    "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
    "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY a.attnum"
)


class PostgresSink(KeyProbes):
    """``dataset.table`` (schema.table) on the server of ``connection`` (already resolved)."""

    # A load's COPY runs on its own connection, which the stream's staging thread may use
    # (one statement at a time) while the main thread enforces the next chunk.
    stages_behind = True

    def __init__(self, spec: PostgresSinkSpec, connection: str, *, clock: Clock = utc_now) -> None:
        """``connection`` is ``spec.connection`` resolved: kept private, never shown."""
        dataset, table = spec.dataset, spec.table
        for what, name in (("dataset", dataset), ("table", table)):
            if too_long(name):
                raise SinkConfigError(
                    f"the PostgreSQL sink's {what} name is longer than {MAX_IDENTIFIER_BYTES} "
                    "bytes in UTF-8; PostgreSQL would truncate it",
                    fixes=(f"shorten sink.{what} to at most {MAX_IDENTIFIER_BYTES} bytes",),
                )
        self._connection = connection
        self.dataset = dataset
        self.table = table
        self.target = f"{dataset}.{table}"
        self.identity = f"postgres:{self.target}"
        self._clock = clock
        self._pinned: Any = None

    def __repr__(self) -> str:  # the connection string must not leak through a repr
        return f"PostgresSink({self.identity!r})"

    def _q(self, name: str) -> str:
        """``"dataset"."name"`` in the connection's database."""
        return qualify(self.dataset, name)

    def connect(self) -> Any:
        try:
            return pg.connect(self._connection)
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(exc, "connecting") from None

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """One connection for every load and look-up inside the block."""
        conn = self.connect()
        self._pinned = conn
        try:
            yield
        finally:
            self._pinned = None
            close(conn)

    @contextlib.contextmanager
    def _borrowed(self, *, fresh: bool = False) -> Iterator[Any]:
        """The pinned connection (its read transaction rolled back after use) or, outside a
        session or when ``fresh``, a connection of its own, closed after use."""
        if self._pinned is not None and not fresh:
            try:
                yield self._pinned
            finally:
                rollback(self._pinned)
            return
        conn = self.connect()
        try:
            yield conn
        finally:
            close(conn)

    def columns(self, cur: Any, name: str) -> list[tuple[str, str, bool]]:
        """(name, formatted type, not null) of ``dataset.name``; empty if it does not exist."""
        cur.execute(_COLUMNS_SQL, parameters=(self.dataset, name))
        return [(str(a), str(b), bool(c)) for a, b, c in cur.fetchall()]

    def _read_markers(
        self, where: str, params: tuple[object, ...], *, fresh: bool = False
    ) -> LoadMarker | None:
        """The marker of ``where`` (placeholders ``$1``...; column names quoted)."""
        try:
            with self._borrowed(fresh=fresh) as conn, conn.cursor() as cur:
                if not self.columns(cur, _LOADS):
                    return None
                cur.execute(
                    f"SELECT {MARKER_COLUMNS} FROM {self._q(_LOADS)} WHERE {where}",
                    parameters=params,
                )
                row = cur.fetchone()
            return None if row is None else marker_from_row(row)
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(exc, f"reading load markers from {self._q(_LOADS)}") from None

    def _matching(self, name: str, probe: pa.Table, columns: Sequence[str]) -> list[int]:
        try:
            with self._borrowed() as conn, conn.cursor() as cur:
                if not self.columns(cur, name):
                    return []
                temp = "_dpone_probe"
                ingest_temporary(cur, temp, positioned(probe))
                cur.execute(probe_join_sql(temporary(temp), self._q(name), columns))
                return [int(row[0]) for row in cur.fetchall()]
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(exc, f"looking up keys in {self._q(name)}") from None

    # --- Sink -------------------------------------------------------------------------------------

    def existing_schema(self) -> pa.Schema | None:
        return self.child_schema(self.table)

    def child_schema(self, name: str) -> pa.Schema | None:
        """The columns of the table ``name`` of the dataset (a child table's, or the
        target's), without dpone's own; None: absent."""
        try:
            with self._borrowed() as conn, conn.cursor() as cur:
                columns = self.columns(cur, name)
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(exc, f"reading the schema of {self._q(name)}") from None
        if not columns:
            return None
        return pa.schema(
            [
                pa.field(name, arrow_type(dtype), not notnull)
                for name, dtype, notnull in columns
                if not is_dpone_column(name)  # the sink's own: never a load's
            ]
        )

    def committed_load(self, load_id: str) -> LoadMarker | None:
        return self._read_markers(f"{_ID} = $1", (load_id,))

    def begin(self, load: LoadSpec) -> PostgresLoad:
        long = [f.name for f in load.schema if too_long(f.name)]
        if long:
            raise SinkSchemaError(
                f"column {quote_ident(long[0])} is longer than {MAX_IDENTIFIER_BYTES} bytes in "
                "UTF-8; PostgreSQL would truncate it",
                fixes=("rename the column in the source (or the query) to a shorter name",),
            )
        stage = "_dpone_stage_" + short_hash(load.pipeline, load.load_id, self.target)
        columns = [f"{quote_ident(f.name)} {pg_type(f.type, staging=True)}" for f in load.schema]
        if load.mode == "merge":
            columns.append(f"{quote_ident(_SEQ)} bigint NOT NULL")
        if load.child_tables:
            columns.append(f"{quote_ident(ROW_ID_COLUMN)} text")
        owned = self._pinned is None
        conn = self.connect() if owned else self._pinned
        try:
            with conn.cursor() as cur:
                cur.execute(
                    f"CREATE TEMPORARY TABLE {quote_ident(stage)} ({', '.join(columns)}) "
                    "ON COMMIT DROP"
                )
        except DponeError:
            release(conn, owned)
            raise
        except pg.DRIVER_ERRORS as exc:
            release(conn, owned)
            raise pg.sink_error(
                exc, f"creating the staging table {temporary(stage)} for {self._q(self.table)}"
            ) from None
        return PostgresLoad(self, conn, load, stage, owned=owned)

    def record_run(self, row: RunRow) -> None:
        """``row`` into ``_dpone_runs`` in a transaction of its own, on a connection of its own."""
        with self._borrowed(fresh=True) as conn:
            record_run(conn, self.dataset, self._q, row)

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        """Nothing to do: staging lives and dies with the load's own transaction."""
        del pipeline, keep_load_id
        return []


class PostgresLoad(NestingLoad):
    """One load: an open transaction holding a temporary staging table."""

    native_json = True  # ``type: json`` columns are jsonb (staged as text, cast at commit)

    def __init__(
        self, sink: PostgresSink, conn: Any, spec: LoadSpec, stage: str, *, owned: bool = True
    ) -> None:
        super().__init__(spec)
        self._sink = sink
        self._conn = conn
        self._stage_table = stage
        self._owned = owned
        self._step = Step(f"committing the load into {sink._q(sink.table)}")
        #: the staging table's columns in its order (a widened load appends to it)
        self._stage_names = [*spec.schema.names, *([_SEQ] if spec.mode == "merge" else [])]
        if spec.child_tables:
            self._stage_names.append(ROW_ID_COLUMN)
        self._children = PgChildren(sink.dataset, sink.table, sink._q, sink.columns)
        self._system: SystemRows | None = None

    def attach_system_rows(self, rows: SystemRows) -> None:
        """Insert ``rows`` into the system tables in this load's transaction."""
        self._require_open()
        self._system = rows

    def _stage(self, batch: pa.RecordBatch) -> None:
        batch = self.with_ids(batch)
        arrays = [staging_array(column) for column in batch.columns]
        names = list(batch.schema.names)
        if self.spec.mode == "merge":
            arrays.append(pa.array(range(self.rows, self.rows + batch.num_rows), pa.int64()))
            names.append(_SEQ)
        if names != self._stage_names:  # widened: the ingest goes in the table's order
            where = {name: i for i, name in enumerate(names)}
            arrays = [arrays[where[name]] for name in self._stage_names]
            names = list(self._stage_names)
        staged = pa.RecordBatch.from_arrays(arrays, names=names)
        try:
            with self._conn.cursor() as cur:
                cur.adbc_ingest(self._stage_table, staged, mode="append", temporary=True)
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(
                exc, f"inserting rows into the staging table {temporary(self._stage_table)}"
            ) from None

    def commit_staged_parquet(
        self, files: Sequence[Path], *, cursor_to: str | None = None
    ) -> LoadMarker:
        """Commit with the rows of ``files`` sent into the staging table by one binary COPY per
        file (``pgfiles.py``), inside this load's transaction. A merge (its rows numbered) or
        files whose columns are not this load's go through :meth:`write` (the base's way)."""
        self._require_open()
        if self.spec.mode == "merge" or not pgfiles.all_match(files, self.spec.schema):
            return super().commit_staged_parquet(files, cursor_to=cursor_to)
        try:
            self.rows += pgfiles.ingest_files(self._conn, self._stage_table, files)
        except BaseException:
            self.abort()
            raise
        return self.commit(cursor_to=cursor_to)

    def _widen(self, spec: LoadSpec, added: list[pa.Field]) -> None:
        """The new columns appended to the staging table (the commit creates or extends the
        target in ``spec.schema``'s order)."""
        long = [f.name for f in added if too_long(f.name)]
        if long:
            raise SinkSchemaError(
                f"column {quote_ident(long[0])} is longer than {MAX_IDENTIFIER_BYTES} bytes in "
                "UTF-8; PostgreSQL would truncate it",
                fixes=("rename the column in the source (or the query) to a shorter name",),
            )
        stage = temporary(self._stage_table)
        try:
            with self._conn.cursor() as cur:
                for field in added:
                    column = f"{quote_ident(field.name)} {pg_type(field.type, staging=True)}"
                    cur.execute(f"ALTER TABLE {stage} ADD COLUMN {column}")
                    self._stage_names.append(field.name)
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(exc, f"adding columns to the staging table {stage}") from None

    def _commit(self) -> LoadMarker:
        try:
            return self._apply()
        except pg.DRIVER_ERRORS as exc:
            error = pg.sink_error(exc, self._step.doing)
            rollback(self._conn)
        # The COMMIT may have landed before the connection dropped: the marker settles it.
        try:
            marker = self._sink._read_markers(f"{_ID} = $1", (self.spec.load_id,), fresh=True)
        except DponeError:
            marker = None
        if marker is not None:
            return marker
        raise error

    def _apply(self) -> LoadMarker:
        with self._conn.cursor() as cur:
            return self._apply_with(cur)

    def _apply_with(self, cur: Any) -> LoadMarker:
        sink, spec, step = self._sink, self.spec, self._step
        q = sink._q
        step.doing = f"creating the schema {quote_ident(sink.dataset)}"
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(sink.dataset)}")
        step.doing = f"creating the marker table {q(_LOADS)}"
        cur.execute(_LOADS_DDL.format(t=q(_LOADS)))
        step.doing = f"reading the load marker from {q(_LOADS)}"
        cur.execute(
            f"SELECT {MARKER_COLUMNS} FROM {q(_LOADS)} WHERE {_ID} = $1",
            parameters=(spec.load_id,),
        )
        row = cur.fetchone()
        if row is not None:
            self._conn.rollback()  # also drops the staging table
            return marker_from_row(row)
        self._prepare_target(cur)
        stage = temporary(self._stage_table)
        if spec.child_tables:
            self._children.before_apply(
                cur, mode=spec.mode, keys=spec.unique_key, stage=stage, step=step
            )
        merge = MergeSql(
            spec=spec,
            dialect="postgres",
            target=q(sink.table),
            stage=stage,
            scratch=quote_ident(self._stage_table + "_v"),
            seq=_SEQ,
            at=spec.valid_at or sink._clock(),
        )
        for statement in merge.statements():
            step.doing = statement.doing
            cur.execute(statement.sql)
        if spec.child_tables:
            rows, merging = self.child_tables(), spec.mode == "merge"
            self._children.insert(cur, rows, merge=merging, scratch=self._stage_table, step=step)
        marker = self.new_marker(sink.target, iso_utc(sink._clock()))
        step.doing = f"inserting the load marker into {q(_LOADS)}"
        cur.execute(
            f'INSERT INTO {q(_LOADS)} ({MARKER_COLUMNS}, "load_seq") SELECT $1, $2, $3, $4, $5, '
            f'$6, $7, $8, coalesce(max("load_seq"), 0) + 1 FROM {q(_LOADS)}',
            parameters=marker_row(marker),
        )
        if spec.keys:
            step.doing = f"inserting idempotency keys into {q(KEYS_TABLE)}"
            self._insert_keys(cur)
        if self._system is not None:
            insert_system(cur, q, self._system.tables(), step)
        step.doing = f"committing the load into {merge.target}"
        self._conn.commit()  # ON COMMIT DROP removes the staging table
        return marker

    def _insert_keys(self, cur: Any) -> None:
        """One row per idempotency key of the load, inside the load's transaction."""
        keys, temp = self._sink._q(KEYS_TABLE), self._stage_table + "_keys"
        cur.execute(_KEYS_DDL.format(t=keys))
        ingest_temporary(cur, temp, pa.table({KEY_COLUMN: pa.array(self.spec.keys, pa.string())}))
        cur.execute(f"SELECT count(*) FROM {temporary(temp)} JOIN {keys} USING ({_KEY})")
        row = cur.fetchone()
        if row is not None and row[0]:
            raise keys_committed_twice(self.spec.load_id)
        cur.execute(
            f"INSERT INTO {keys} SELECT {_KEY}, $1 FROM {temporary(temp)}",
            parameters=(self.spec.load_id,),
        )

    def _prepare_target(self, cur: Any) -> None:
        """Create the target (with the columns dpone adds), or add the columns it lacks."""
        sink, spec, step = self._sink, self.spec, self._step
        target = sink._q(sink.table)
        step.doing = f"reading the columns of {target}"
        present = {name for name, _, _ in sink.columns(cur, sink.table)}
        wanted = [(f.name, pg_type(f.type), "" if f.nullable else " NOT NULL") for f in spec.schema]
        wanted += [(name, dtype, "") for name, dtype in extra_columns(spec, "postgres")]
        if not present:
            columns = ", ".join(f"{quote_ident(n)} {dtype}{null}" for n, dtype, null in wanted)
            step.doing = f"creating the table {target}"
            cur.execute(f"CREATE TABLE {target} ({columns})")
            return
        for name, dtype, _ in wanted:
            if name not in present:
                column = quote_ident(name)
                step.doing = f"adding column {column} to {target}"
                cur.execute(f"ALTER TABLE {target} ADD COLUMN {column} {dtype}")

    def target_definition(self) -> TableDefinition:
        """The target as this load's commit leaves it, read from PostgreSQL's catalog inside
        the load's own transaction: the commit's DDL (create the table, or add the columns it
        lacks) runs under a savepoint that is rolled back, so the transaction goes on exactly
        as it was and the commit applies the same DDL again."""
        self._require_open()
        sink = self._sink
        self._step = Step(f"describing {sink._q(sink.table)}")
        try:
            with self._conn.cursor() as cur:
                cur.execute("SAVEPOINT _dpone_describe")
                # Named as the commit names its steps: a refused DDL fails here first.
                self._step.doing = f"creating the schema {quote_ident(sink.dataset)}"
                cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(sink.dataset)}")
                self._prepare_target(cur)
                self._step.doing = f"reading the columns of {sink._q(sink.table)}"
                columns = sink.columns(cur, sink.table)
                children: tuple[TableDefinition, ...] = ()
                if self.spec.child_tables:
                    schemas = self.child_schemas()
                    children = self._children.describe(cur, schemas, self._step)
                cur.execute("ROLLBACK TO SAVEPOINT _dpone_describe")
        except pg.DRIVER_ERRORS as exc:
            raise pg.sink_error(exc, self._step.doing) from None
        return TableDefinition(
            sink.target,
            "postgres",
            tuple(ColumnDefinition(name, dtype, not notnull) for name, dtype, notnull in columns),
            children,
        )

    def _abort(self) -> None:
        self.drop_children()
        rollback(self._conn)

    def _close(self) -> None:
        release(self._conn, self._owned)
