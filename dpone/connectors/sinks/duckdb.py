"""DuckDB sink: a table in a database file, loaded natively from Arrow (a load: ``duckdb_load``).

Every name reaches SQL quoted and qualified with the database's catalog
(``"<catalog>"."<dataset>"."<table>"``, the catalog as DuckDB names the attached file), so a
file named like its dataset (``acc.duckdb`` with ``dataset: acc``), reserved words, mixed
case, spaces and non-ASCII names all work.

Staging is a real table ``<dataset>._dpone_stage_<hash>`` filled batch by batch in whole row
groups (each insert committed on its own, so memory stays bounded by the batch and one row
group) and listed in
``<dataset>._dpone_stages``. Commit is one transaction: create or evolve the target, apply
the strategy, insert the marker into ``<dataset>._dpone_loads``, drop the staging table.
A killed process leaves at most a staging table; :meth:`DuckDbSink.cleanup_abandoned`
drops it. DuckDB's WAL makes the commit all-or-nothing across a crash.

The rows of Parquet files staged by other processes (a scale-out run's tasks,
:meth:`DuckDbLoad.commit_staged_parquet`) are read by DuckDB inside that same commit
transaction, straight into the table that becomes the target or into the target.

A load that carries idempotency keys (a replay batch) inserts one row per key into
``<dataset>._dpone_load_keys`` in the same commit, and a load given the system tables' rows
(``connectors/systables.py``) inserts them there too; :meth:`DuckDbSink.record_run` records a
failed run's row on its own. :meth:`DuckDbSink.session` opens the
database once for many loads and look-ups (each then takes a cursor of that connection).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import LoadMarker, LoadSpec
from dpone.connectors.sinks._common import (
    MARKER_COLUMNS,
    KeyProbes,
    Step,
    marker_from_row,
    positioned,
    probe_join_sql,
)
from dpone.connectors.sinks._duck_errors import duck_error
from dpone.connectors.sinks.duckdb_load import (
    EMPTY,
    ID,
    LOADS,
    PROBE,
    SEQ,
    STAGES,
    STAGES_DDL,
    DuckDbLoad,
    drop_stage,
    insert_system,
    rollback,
)
from dpone.connectors.sinks.nativejson import native_schema
from dpone.connectors.sources.duckdb import interruptible, utc_labels
from dpone.connectors.sql.identifiers import qualify, quote_ident, short_hash
from dpone.connectors.sql.merge import ROW_ID_COLUMN, is_dpone_column
from dpone.manifest.specs import DuckdbSinkSpec

if TYPE_CHECKING:  # imported only by a run that keeps the system tables
    from dpone.connectors.systables import RunRow


class DuckDbSink(KeyProbes):
    """``dataset.table`` in the DuckDB file ``database``.

    ``config`` goes to ``duckdb.connect`` (``memory_limit``, ``threads``, ``access_mode``...);
    leave it empty when other code in the process opens the same file.
    """

    # A load stages through a cursor of its own, which the stream's staging thread may use
    # (one statement at a time) while the main thread enforces the next chunk.
    stages_behind = True

    def __init__(
        self,
        spec: DuckdbSinkSpec,
        *,
        config: Mapping[str, Any] | None = None,
        clock: Clock = utc_now,
    ) -> None:
        """``config`` is DuckDB's own connection configuration (``access_mode`` ...)."""
        self.database = spec.database
        self.dataset = spec.dataset
        self.table = spec.table
        self.target = f"{spec.dataset}.{spec.table}"
        self.identity = f"duckdb:{spec.display}:{self.target}"
        self._config = dict(config or {})
        self.clock = clock
        self._pinned: duckdb.DuckDBPyConnection | None = None
        #: The attached database's name as DuckDB reports it (``current_database()``).
        self._catalog: str | None = None

    # --- helpers ----------------------------------------------------------------------------------

    def q(self, name: str) -> str:
        """``"catalog"."dataset"."name"``: a bare ``dataset.name`` is ambiguous in DuckDB when
        the file is named like the dataset (``acc.duckdb`` holds the catalog ``acc``)."""
        assert self._catalog is not None, "connect() first"
        return qualify(self._catalog, self.dataset, name)

    @property
    def _schema(self) -> str:
        assert self._catalog is not None, "connect() first"
        return qualify(self._catalog, self.dataset)

    def connect(self, *, create: bool) -> duckdb.DuckDBPyConnection | None:
        """A connection, or None when the file does not exist and ``create`` is False."""
        if self._pinned is not None:
            try:
                return self._pinned.cursor()
            except duckdb.Error as exc:
                raise duck_error(exc, "opening the database") from None
        if not create and not self.database.is_file():
            return None
        try:
            self.database.parent.mkdir(parents=True, exist_ok=True)
            con = duckdb.connect(str(self.database), config=self._config)
        except (duckdb.Error, OSError) as exc:
            raise duck_error(exc, "opening the database") from None
        if self._catalog is None:
            try:
                self._catalog = str(con.execute("SELECT current_database()").fetchall()[0][0])
            except duckdb.Error as exc:
                con.close()
                raise duck_error(exc, "reading the database's name") from None
        return con

    def table_exists(self, con: duckdb.DuckDBPyConnection, name: str) -> bool:
        rows = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_catalog = ? "
            "AND table_schema = ? AND table_name = ?",
            [self._catalog, self.dataset, name],
        ).fetchall()
        return bool(rows[0][0])

    def table_columns(
        self, con: duckdb.DuckDBPyConnection, name: str
    ) -> list[tuple[str, str, bool]]:
        return [
            (str(r[0]), str(r[1]), bool(r[2]))
            for r in con.execute(
                "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                "WHERE database_name = ? AND schema_name = ? AND table_name = ? "
                "ORDER BY column_index",
                [self._catalog, self.dataset, name],
            ).fetchall()
        ]

    def _read(
        self,
        sql: Callable[[], str],
        params: list[object],
        *,
        table: str = LOADS,
        probe: pa.Table | None = None,
        doing: str = "reading load markers from",
    ) -> list[tuple[Any, ...]]:
        """Rows of ``sql()`` (none while ``table`` does not exist); ``probe`` is registered
        as ``_dpone_probe`` for the query. ``sql`` is built once connected (the catalog's
        name comes from the connection)."""
        con = self.connect(create=False)
        if con is None:
            return []
        what = f"{doing} {self.q(table)}"
        try:
            with interruptible(f"DuckDB sink: {what}"):
                if not self.table_exists(con, table):
                    return []
                if probe is not None:
                    con.register(PROBE, probe)
                return con.execute(sql(), params).fetchall()
        except duckdb.Error as exc:
            raise duck_error(exc, what) from None
        finally:
            con.close()

    def _matching(self, name: str, probe: pa.Table, columns: Sequence[str]) -> list[int]:
        def sql() -> str:
            return probe_join_sql(quote_ident(PROBE), self.q(name), columns)

        rows = self._read(sql, [], table=name, probe=positioned(probe), doing="looking up keys in")
        return [int(r[0]) for r in rows]

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Open the database once for everything done inside the block."""
        con = self.connect(create=True)
        assert con is not None
        self._pinned = con
        try:
            yield
        finally:
            self._pinned = None
            con.close()

    # --- Sink -------------------------------------------------------------------------------------

    def existing_schema(self) -> pa.Schema | None:
        return self.child_schema(self.table)

    def child_schema(self, name: str) -> pa.Schema | None:
        """The columns of the table ``name`` of the dataset (a child table's, or the
        target's), without dpone's own; None: absent."""
        con = self.connect(create=False)
        if con is None:
            return None
        what = f"reading the schema of {self.q(name)}"
        try:
            with interruptible(f"DuckDB sink: {what}"):
                if not self.table_exists(con, name):
                    return None
                table = con.sql(f"SELECT * FROM {self.q(name)} LIMIT 0").to_arrow_table()
                nullable = {column: flag for column, _, flag in self.table_columns(con, name)}
            schema = pa.schema(
                [
                    f.with_nullable(nullable.get(f.name, True))
                    for f in table.schema
                    if not is_dpone_column(f.name)  # the sink's own: never a load's
                ]
            )
            return utc_labels(schema)
        except duckdb.Error as exc:
            raise duck_error(exc, what) from None
        finally:
            con.close()

    def committed_load(self, load_id: str) -> LoadMarker | None:
        rows = self._read(
            lambda: f"SELECT {MARKER_COLUMNS} FROM {self.q(LOADS)} WHERE {ID} = ?", [load_id]
        )
        return marker_from_row(rows[0]) if rows else None

    def begin(self, load: LoadSpec) -> DuckDbLoad:
        con = self.connect(create=True)
        assert con is not None
        stage = "_dpone_stage_" + short_hash(load.pipeline, load.load_id, self.target)
        empty = native_schema(load.schema).empty_table()  # JSON columns as DuckDB's JSON
        if load.mode == "merge":
            empty = empty.append_column(SEQ, pa.array([], pa.int64()))
        if load.child_tables:
            empty = empty.append_column(ROW_ID_COLUMN, pa.array([], pa.string()))
        step = Step(f"creating the schema {self._schema}")
        try:
            with interruptible("DuckDB sink: creating the staging table"):
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {self._schema}")
                step.doing = f"creating the staging list {self.q(STAGES)}"
                con.execute(STAGES_DDL.format(t=self.q(STAGES)))
                step.doing = f"creating the staging table {self.q(stage)}"
                con.execute("BEGIN TRANSACTION")
                con.execute(f"DROP TABLE IF EXISTS {self.q(stage)}")
                con.execute(f'DELETE FROM {self.q(STAGES)} WHERE "stage_table" = ?', [stage])
                con.register(EMPTY, empty)
                con.execute(f"CREATE TABLE {self.q(stage)} AS SELECT * FROM {quote_ident(EMPTY)}")
                con.unregister(EMPTY)
                con.execute(
                    f"INSERT INTO {self.q(STAGES)} VALUES (?, ?, ?, ?, ?)",
                    [stage, load.load_id, load.pipeline, self.target, iso_utc(self.clock())],
                )
                con.execute("COMMIT")
        except BaseException as exc:  # an interrupt too: nothing half-begun stays open
            rollback(con)
            con.close()
            if isinstance(exc, duckdb.Error):
                raise duck_error(exc, step.doing) from None
            raise
        return DuckDbLoad(self, con, load, stage)

    def record_run(self, row: RunRow) -> None:
        """``row`` into ``_dpone_runs`` in a transaction of its own."""
        from dpone.connectors.systables import RUNS_TABLE

        con = self.connect(create=True)
        assert con is not None
        step = Step(f"creating the schema {self._schema}")
        try:
            with interruptible(f"DuckDB sink: recording the run in {self.q(RUNS_TABLE.name)}"):
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {self._schema}")
                con.execute("BEGIN TRANSACTION")
                insert_system(con, self, ((RUNS_TABLE, row.to_table()),), step)
                con.execute("COMMIT")
        except BaseException as exc:  # an interrupt too: the transaction never half-stays
            rollback(con)
            if isinstance(exc, duckdb.Error):
                raise duck_error(exc, step.doing) from None
            raise
        finally:
            con.close()

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        con = self.connect(create=False)
        if con is None:
            return []
        removed: list[str] = []
        what = f"dropping abandoned staging listed in {self.q(STAGES)}"
        try:
            with interruptible(f"DuckDB sink: {what}"):
                if not self.table_exists(con, STAGES):
                    return []
                rows = con.execute(
                    f'SELECT "stage_table", {ID} FROM {self.q(STAGES)} WHERE "pipeline" = ? '
                    'ORDER BY "created_at"',
                    [pipeline],
                ).fetchall()
                for stage, load_id in rows:
                    if load_id == keep_load_id:
                        continue
                    drop_stage(con, self, str(stage))
                    removed.append(str(load_id))
            return removed
        except duckdb.Error as exc:
            raise duck_error(exc, what) from None
        finally:
            con.close()
