"""DuckDB sink: a table in a database file, loaded natively from Arrow.

Staging is a real table ``<dataset>._dpone_stage_<hash>`` filled batch by batch (each batch
committed on its own, so memory stays bounded by the batch) and listed in
``<dataset>._dpone_stages``. Commit is one transaction: create or evolve the target, apply
the strategy, insert the marker into ``<dataset>._dpone_loads``, drop the staging table.
A killed process leaves at most a staging table; :meth:`DuckDbSink.cleanup_abandoned`
drops it. DuckDB's WAL makes the commit all-or-nothing across a crash.

A load that carries idempotency keys (a replay batch) inserts one row per key into
``<dataset>._dpone_load_keys`` in the same commit. :meth:`DuckDbSink.session` opens the
database once for many loads and look-ups (each then takes a cursor of that connection).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dpone.connectors._util import (
    Clock,
    iso_utc,
    quote_ident,
    short_hash,
    utc_now,
)
from dpone.connectors.base import LoadMarker, LoadSpec
from dpone.connectors.errors import (
    SinkDiskFull,
    SinkError,
    SinkLocked,
    SinkReadOnly,
    SinkSchemaError,
    SinkUnavailable,
)
from dpone.connectors.sinks._common import (
    KEY_COLUMN,
    KEYS_TABLE,
    MARKER_COLUMNS,
    KeyProbes,
    LoadState,
    keys_committed_twice,
    marker_from_row,
    marker_row,
    os_error,
    positioned,
    probe_join_sql,
)
from dpone.connectors.sources.duckdb import interruptible, utc_labels
from dpone.errors import DponeError

_LOADS = "_dpone_loads"
_STAGES = "_dpone_stages"
_SEQ = "_dpone_seq"

_LOADS_DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (load_id VARCHAR PRIMARY KEY, pipeline VARCHAR NOT NULL, "
    "run_id VARCHAR NOT NULL, target VARCHAR NOT NULL, load_mode VARCHAR NOT NULL, "
    "row_count BIGINT NOT NULL, cursor_to VARCHAR, committed_at VARCHAR NOT NULL, "
    "load_seq BIGINT NOT NULL)"
)
_KEYS_DDL = (
    f"CREATE TABLE IF NOT EXISTS {{t}} ({KEY_COLUMN} VARCHAR PRIMARY KEY, load_id VARCHAR NOT NULL)"
)
_STAGES_DDL = (
    "CREATE TABLE IF NOT EXISTS {t} (stage_table VARCHAR PRIMARY KEY, load_id VARCHAR NOT NULL, "
    "pipeline VARCHAR NOT NULL, target VARCHAR NOT NULL, created_at VARCHAR NOT NULL)"
)


class DuckDbSink(KeyProbes):
    """``dataset.table`` in the DuckDB file ``database``.

    ``config`` goes to ``duckdb.connect`` (``memory_limit``, ``threads``, ``access_mode``...);
    leave it empty when other code in the process opens the same file.
    """

    def __init__(
        self,
        database: Path,
        display_path: str,
        dataset: str,
        table: str,
        *,
        config: Mapping[str, Any] | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.database = Path(database)
        self.dataset = dataset
        self.table = table
        self.target = f"{dataset}.{table}"
        self.identity = f"duckdb:{display_path}:{self.target}"
        self._config = dict(config or {})
        self._clock = clock
        self._pinned: duckdb.DuckDBPyConnection | None = None

    # --- helpers ----------------------------------------------------------------------------------

    def _q(self, name: str) -> str:
        return f"{quote_ident(self.dataset)}.{quote_ident(name)}"

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
            return duckdb.connect(str(self.database), config=self._config)
        except (duckdb.Error, OSError) as exc:
            raise duck_error(exc, "opening the database") from None

    def _exists(self, con: duckdb.DuckDBPyConnection, name: str) -> bool:
        rows = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? "
            "AND table_name = ?",
            [self.dataset, name],
        ).fetchall()
        return bool(rows[0][0])

    def _columns(self, con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[str, str, bool]]:
        return [
            (str(r[0]), str(r[1]), bool(r[2]))
            for r in con.execute(
                "SELECT column_name, data_type, is_nullable FROM duckdb_columns() "
                "WHERE schema_name = ? AND table_name = ? ORDER BY column_index",
                [self.dataset, name],
            ).fetchall()
        ]

    def _read(
        self,
        sql: str,
        params: list[object],
        *,
        table: str = _LOADS,
        probe: pa.Table | None = None,
    ) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (none while ``table`` does not exist); ``probe`` is registered
        as ``_dpone_probe`` for the query."""
        con = self.connect(create=False)
        if con is None:
            return []
        try:
            with interruptible("DuckDB sink: reading load markers"):
                if not self._exists(con, table):
                    return []
                if probe is not None:
                    con.register("_dpone_probe", probe)
                return con.execute(sql, params).fetchall()
        except duckdb.Error as exc:
            raise duck_error(exc, "reading load markers") from None
        finally:
            con.close()

    def _matching(self, name: str, probe: pa.Table, columns: Sequence[str]) -> list[int]:
        sql = probe_join_sql("_dpone_probe", self._q(name), columns)
        rows = self._read(sql, [], table=name, probe=positioned(probe))
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
        con = self.connect(create=False)
        if con is None:
            return None
        try:
            with interruptible("DuckDB sink: reading the target schema"):
                if not self._exists(con, self.table):
                    return None
                table = con.sql(f"SELECT * FROM {self._q(self.table)} LIMIT 0").to_arrow_table()
                nullable = {name: flag for name, _, flag in self._columns(con, self.table)}
            schema = pa.schema([f.with_nullable(nullable.get(f.name, True)) for f in table.schema])
            return utc_labels(schema)
        except duckdb.Error as exc:
            raise duck_error(exc, "reading the target schema") from None
        finally:
            con.close()

    def committed_load(self, load_id: str) -> LoadMarker | None:
        rows = self._read(
            f"SELECT {MARKER_COLUMNS} FROM {self._q(_LOADS)} WHERE load_id = ?", [load_id]
        )
        return marker_from_row(rows[0]) if rows else None

    def last_load(self, pipeline: str) -> LoadMarker | None:
        rows = self._read(
            f"SELECT {MARKER_COLUMNS} FROM {self._q(_LOADS)} WHERE pipeline = ? AND target = ? "
            "ORDER BY load_seq DESC LIMIT 1",
            [pipeline, self.target],
        )
        return marker_from_row(rows[0]) if rows else None

    def begin(self, load: LoadSpec) -> DuckDbLoad:
        con = self.connect(create=True)
        assert con is not None
        stage = "_dpone_stage_" + short_hash(load.pipeline, load.load_id, self.target)
        empty = load.schema.empty_table()
        if load.mode == "merge":
            empty = empty.append_column(_SEQ, pa.array([], pa.int64()))
        try:
            with interruptible("DuckDB sink: creating the staging table"):
                con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.dataset)}")
                con.execute(_STAGES_DDL.format(t=self._q(_STAGES)))
                con.execute("BEGIN TRANSACTION")
                con.execute(f"DROP TABLE IF EXISTS {self._q(stage)}")
                con.execute(f"DELETE FROM {self._q(_STAGES)} WHERE stage_table = ?", [stage])
                con.register("_dpone_empty", empty)
                con.execute(f"CREATE TABLE {self._q(stage)} AS SELECT * FROM _dpone_empty")
                con.unregister("_dpone_empty")
                con.execute(
                    f"INSERT INTO {self._q(_STAGES)} VALUES (?, ?, ?, ?, ?)",
                    [stage, load.load_id, load.pipeline, self.target, iso_utc(self._clock())],
                )
                con.execute("COMMIT")
        except BaseException as exc:  # an interrupt too: nothing half-begun stays open
            _rollback(con)
            con.close()
            if isinstance(exc, duckdb.Error):
                raise duck_error(exc, "creating the staging table") from None
            raise
        return DuckDbLoad(self, con, load, stage)

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        con = self.connect(create=False)
        if con is None:
            return []
        removed: list[str] = []
        try:
            with interruptible("DuckDB sink: dropping abandoned staging"):
                if not self._exists(con, _STAGES):
                    return []
                rows = con.execute(
                    f"SELECT stage_table, load_id FROM {self._q(_STAGES)} WHERE pipeline = ? "
                    "ORDER BY created_at",
                    [pipeline],
                ).fetchall()
                for stage, load_id in rows:
                    if load_id == keep_load_id:
                        continue
                    drop_stage(con, self, str(stage))
                    removed.append(str(load_id))
            return removed
        except duckdb.Error as exc:
            raise duck_error(exc, "dropping abandoned staging") from None
        finally:
            con.close()


def drop_stage(con: duckdb.DuckDBPyConnection, sink: DuckDbSink, stage: str) -> None:
    con.execute("BEGIN TRANSACTION")
    con.execute(f"DROP TABLE IF EXISTS {sink._q(stage)}")
    con.execute(f"DELETE FROM {sink._q(_STAGES)} WHERE stage_table = ?", [stage])
    con.execute("COMMIT")


class DuckDbLoad(LoadState):
    """One load staged into a DuckDB table."""

    def __init__(
        self, sink: DuckDbSink, con: duckdb.DuckDBPyConnection, spec: LoadSpec, stage: str
    ) -> None:
        super().__init__(spec)
        self._sink = sink
        self._con = con
        self._stage_table = stage

    def _stage(self, batch: pa.RecordBatch) -> None:
        if self.spec.mode == "merge":
            seq = pa.array(range(self.rows, self.rows + batch.num_rows), pa.int64())
            batch = batch.append_column(_SEQ, seq)
        try:
            with interruptible("DuckDB sink: staging rows"):
                self._con.register("_dpone_batch", pa.Table.from_batches([batch]))
                self._con.execute(
                    f"INSERT INTO {self._sink._q(self._stage_table)} SELECT * FROM _dpone_batch"
                )
                self._con.unregister("_dpone_batch")
        except duckdb.Error as exc:
            raise duck_error(exc, "staging rows") from None

    def _commit(self) -> LoadMarker:
        con, sink, spec = self._con, self._sink, self.spec
        q = sink._q
        try:
            with interruptible("DuckDB sink: committing the load"):
                con.execute("BEGIN TRANSACTION")
                con.execute(_LOADS_DDL.format(t=q(_LOADS)))
                found = con.execute(
                    f"SELECT {MARKER_COLUMNS} FROM {q(_LOADS)} WHERE load_id = ?", [spec.load_id]
                ).fetchall()
                if found:
                    con.execute("ROLLBACK")
                    drop_stage(con, sink, self._stage_table)
                    return marker_from_row(found[0])
                target, stage = q(sink.table), q(self._stage_table)
                adopted = spec.mode != "merge" and not sink._exists(con, sink.table)
                if adopted:
                    # A first load into a table that does not exist yet: the staging table becomes
                    # the target, inside this transaction, instead of copying every row again.
                    self._adopt_stage(con)
                else:
                    self._prepare_target(con)
                    self._apply(con, target, stage)
                marker = self.new_marker(sink.target, iso_utc(sink._clock()))
                con.execute(
                    f"INSERT INTO {q(_LOADS)} ({MARKER_COLUMNS}, load_seq) SELECT ?, ?, ?, ?, "
                    f"?, ?, ?, ?, coalesce(max(load_seq), 0) + 1 FROM {q(_LOADS)}",
                    list(marker_row(marker)),
                )
                if spec.keys:
                    self._insert_keys(con)
                if not adopted:
                    con.execute(f"DROP TABLE {stage}")
                con.execute(f"DELETE FROM {q(_STAGES)} WHERE stage_table = ?", [self._stage_table])
                con.execute("COMMIT")
                return marker
        except BaseException as exc:  # an interrupt too: the transaction never half-stays
            _rollback(con)
            if isinstance(exc, duckdb.Error):
                raise duck_error(exc, "committing the load") from None
            raise

    def _insert_keys(self, con: duckdb.DuckDBPyConnection) -> None:
        """One row per idempotency key of the load, inside the commit's transaction."""
        keys = self._sink._q(KEYS_TABLE)
        con.execute(_KEYS_DDL.format(t=keys))
        con.register("_dpone_keys", pa.table({KEY_COLUMN: pa.array(self.spec.keys, pa.string())}))
        clash = con.execute(
            f"SELECT count(*) FROM _dpone_keys AS k JOIN {keys} AS c USING ({KEY_COLUMN})"
        ).fetchall()
        if clash[0][0]:
            raise keys_committed_twice(self.spec.load_id)
        con.execute(
            f"INSERT INTO {keys} SELECT {KEY_COLUMN}, ? FROM _dpone_keys", [self.spec.load_id]
        )
        con.unregister("_dpone_keys")

    def _apply(self, con: duckdb.DuckDBPyConnection, target: str, stage: str) -> None:
        """Move the staged rows into an existing target per the strategy."""
        spec = self.spec
        cols = ", ".join(quote_ident(n) for n in spec.schema.names)
        if spec.mode == "replace":
            con.execute(f"DELETE FROM {target}")
        if spec.mode == "merge":
            keys = [quote_ident(k) for k in spec.unique_key]
            on = " AND ".join(f"{target}.{k} = s.{k}" for k in keys)
            con.execute(
                f"DELETE FROM {target} USING (SELECT DISTINCT {', '.join(keys)} "
                f"FROM {stage}) AS s WHERE {on}"
            )
            source = (
                f"(SELECT *, row_number() OVER (PARTITION BY {', '.join(keys)} "
                f"ORDER BY {_SEQ} DESC) AS _dpone_rn FROM {stage}) WHERE _dpone_rn = 1"
            )
        else:
            source = stage
        con.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {source}")

    def _adopt_stage(self, con: duckdb.DuckDBPyConnection) -> None:
        sink = self._sink
        con.execute(f"ALTER TABLE {sink._q(self._stage_table)} RENAME TO {quote_ident(sink.table)}")
        for field in self.spec.schema:
            if not field.nullable:
                con.execute(
                    f"ALTER TABLE {sink._q(sink.table)} ALTER COLUMN {quote_ident(field.name)} "
                    "SET NOT NULL"
                )

    def _prepare_target(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create the target from the staged column types, or add the columns it lacks."""
        sink = self._sink
        staged = [c for c in sink._columns(con, self._stage_table) if c[0] != _SEQ]
        nullable = {f.name: f.nullable for f in self.spec.schema}
        if not sink._exists(con, sink.table):
            columns = ", ".join(
                f"{quote_ident(name)} {dtype}{'' if nullable[name] else ' NOT NULL'}"
                for name, dtype, _ in staged
            )
            con.execute(f"CREATE TABLE {sink._q(sink.table)} ({columns})")
            return
        present = {name.lower() for name, _, _ in sink._columns(con, sink.table)}
        for name, dtype, _ in staged:
            if name.lower() not in present:
                con.execute(
                    f"ALTER TABLE {sink._q(sink.table)} ADD COLUMN {quote_ident(name)} {dtype}"
                )

    def _abort(self) -> None:
        try:
            drop_stage(self._con, self._sink, self._stage_table)
        except duckdb.Error:
            _rollback(self._con)  # cleanup_abandoned drops it on the next run

    def _close(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self._con.close()


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")


def duck_error(exc: BaseException, doing: str) -> DponeError:
    """A typed error from a DuckDB or OS exception; the message never quotes the driver."""
    text = str(exc).lower()
    kind = type(exc).__name__
    message = f"DuckDB sink: {doing} failed ({kind})"
    if isinstance(exc, OSError):
        return os_error(exc, f"DuckDB sink: {doing}")
    if "read-only" in text or "read only" in text or "permission denied" in text:
        return SinkReadOnly(message + ": the database is read-only")
    if "no space left" in text:
        return SinkDiskFull(message)
    if "lock" in text and isinstance(exc, duckdb.IOException):
        return SinkLocked(message + ": another process holds the database file")
    if isinstance(exc, (duckdb.IOException, duckdb.OutOfMemoryException)):
        return SinkUnavailable(message)
    if isinstance(exc, duckdb.TransactionException):
        return SinkLocked(message + ": a concurrent transaction conflicts")
    if isinstance(
        exc,
        (
            duckdb.ConversionException,
            duckdb.ConstraintException,
            duckdb.BinderException,
            duckdb.CatalogException,
            duckdb.TypeMismatchException,
        ),
    ):
        return SinkSchemaError(message)
    return SinkError(message)
