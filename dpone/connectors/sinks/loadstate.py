"""The state machine every :class:`SinkLoad` shares: open -> committed | aborted."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pyarrow as pa

from dpone.connectors.base import LoadMarker, LoadSpec
from dpone.connectors.batches import check_keys_not_null, conform
from dpone.connectors.errors import (
    SinkError,
    SinkSchemaError,
)
from dpone.connectors.sinks.nativejson import native_schema
from dpone.connectors.sql.merge import ROW_ID_COLUMN


class LoadState(ABC):
    """Open until committed or aborted. Subclasses implement ``_stage``, ``_commit``,
    ``_abort`` and ``_close``; usable as a context manager (aborts unless committed)."""

    #: a sink with a JSON column type of its own sets this: the load's ``type: json``
    #: columns are then typed ``arrow.json`` from ``begin`` on (``nativejson.py``)
    native_json = False

    def __init__(self, spec: LoadSpec) -> None:
        if self.native_json:
            spec = dataclasses.replace(spec, schema=native_schema(spec.schema))
        self.spec = spec
        self.rows = 0
        self.state = "open"
        #: what the marker records; ``commit(cursor_to=...)`` overrides ``spec.cursor_to``
        self.cursor_to = spec.cursor_to
        self.marker: LoadMarker | None = None

    def new_marker(self, target: str, committed_at: str) -> LoadMarker:
        """The marker this load commits with (every sink records the same facts)."""
        spec = self.spec
        return LoadMarker(
            load_id=spec.load_id,
            pipeline=spec.pipeline,
            run_id=spec.run_id,
            rows=self.rows,
            cursor_to=self.cursor_to,
            committed_at=committed_at,
            target=target,
            mode=spec.mode,
        )

    def write(self, batch: pa.RecordBatch) -> None:
        """Conform and check the batch (a failure here leaves the load open), then stage it
        (a failure here aborts the load: the staging may be half-written)."""
        self._require_open()
        if batch.num_rows == 0:
            return
        prepared = conform(batch, self.spec.schema)
        if self.spec.mode == "merge":
            check_keys_not_null(prepared, self.spec.unique_key)
        try:
            self._stage(prepared)
        except BaseException:
            self.abort()
            raise
        self.rows += batch.num_rows

    def widen(self, schema: pa.Schema) -> None:
        """Stage the next batches with ``schema``: the load's columns, same names and types,
        plus new nullable ones, in the order the target should have them.

        A variant column (``__dpone__nc__<column>``) exists only once a chunk has a value
        for it, which may be any chunk: the rows staged before it hold NULL there, exactly as
        if the run had read them in one chunk. A failure aborts the load.
        """
        self._require_open()
        if self.native_json:
            schema = native_schema(schema)
        old = self.spec.schema
        for f in old:
            i = schema.get_field_index(f.name)
            if i < 0 or not schema.field(i).type.equals(f.type):
                raise SinkSchemaError(f"widening the load drops or retypes column {f.name!r}")
        added = [f for f in schema if old.get_field_index(f.name) < 0]
        if any(not f.nullable for f in added):
            raise SinkSchemaError("a column added to a load in progress must be nullable")
        if not added and schema.names == old.names:
            return
        spec = dataclasses.replace(self.spec, schema=schema)
        try:
            self._widen(spec, added)
        except BaseException:
            self.abort()
            raise
        self.spec = spec

    def commit(self, *, cursor_to: str | None = None) -> LoadMarker:
        if self.marker is not None:
            return self.marker
        self._require_open()
        if cursor_to is not None:
            self.cursor_to = cursor_to
        try:
            self.marker = self._commit()
        except BaseException:
            self.abort()
            raise
        self.state = "committed"
        self._close()
        return self.marker

    def commit_staged_parquet(
        self, files: Sequence[Path], *, cursor_to: str | None = None
    ) -> LoadMarker:
        """Commit, in this one load, the rows of Parquet files other processes staged (the
        tasks of a scale-out run; checked by the caller). Here the files' batches go through
        :meth:`write` (memory: one batch at a time); a sink that reads Parquet itself loads
        the files inside its commit's transaction instead (DuckDB)."""
        import pyarrow.parquet as pq  # a scale-out run's only: a local run never loads it

        self._require_open()
        for path in files:
            with pq.ParquetFile(path) as pf:
                for batch in pf.iter_batches():
                    self.write(batch)
        return self.commit(cursor_to=cursor_to)

    def abort(self) -> None:
        if self.state != "open":
            return
        self.state = "aborted"
        try:
            self._abort()
        finally:
            self._close()

    def __enter__(self) -> LoadState:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.abort()

    def _require_open(self) -> None:
        if self.state != "open":
            raise SinkError(
                f"load {self.spec.load_id} is already {self.state}",
                code="DPONE_SINK_LOAD_CLOSED",
            )

    # --- for subclasses ---------------------------------------------------------------------------

    @abstractmethod
    def _stage(self, batch: pa.RecordBatch) -> None:
        """Stage a batch already conformed to ``spec.schema``."""

    @abstractmethod
    def _commit(self) -> LoadMarker:
        """Apply the staged rows and write the marker, atomically."""

    @abstractmethod
    def _abort(self) -> None:
        """Drop what was staged."""

    @abstractmethod
    def _close(self) -> None:
        """Release the connection or handles."""

    def _widen(self, spec: LoadSpec, added: list[pa.Field]) -> None:
        """Make the staging hold ``spec.schema`` (``added`` are its new columns); the rows
        staged so far get NULL in them. ``self.spec`` is still the old spec here."""
        raise SinkSchemaError(
            f"this sink cannot add column {added[0].name!r} to a load in progress"
        )


class NestingLoad(LoadState):
    """A load that carries child tables too (``connectors.base.NestedLoad``): each staged row
    gets its ``_dpone_id`` (``with_ids`` in ``_stage``) and the child rows wait in memory for
    the commit, which writes them in its one transaction."""

    def __init__(self, spec: LoadSpec) -> None:
        super().__init__(spec)
        self._child_rows: dict[str, list[pa.RecordBatch]] = {}
        self._ids: pa.StringArray | None = None

    def write_nested(
        self, batch: pa.RecordBatch, ids: pa.StringArray, children: Mapping[str, pa.RecordBatch]
    ) -> None:
        """Stage ``batch`` with its rows' ids; keep the child rows for the commit."""
        if not self.spec.child_tables:
            raise SinkSchemaError("this load was not begun for child tables")
        self._ids = ids
        try:
            self.write(batch)
        finally:
            self._ids = None
        for name, rows in children.items():
            if rows.num_rows:
                self._child_rows.setdefault(name, []).append(rows)

    def with_ids(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with its rows' ``_dpone_id`` when the load has child tables."""
        if not self.spec.child_tables:
            return batch
        if self._ids is None or len(self._ids) != batch.num_rows:
            raise SinkSchemaError("rows of a load with child tables come with their ids")
        return batch.append_column(ROW_ID_COLUMN, self._ids)

    def child_tables(self) -> dict[str, pa.Table]:
        """Each child table's rows of the load, its JSON columns typed ``arrow.json``."""
        out = {}
        for name, batches in self._child_rows.items():
            table = pa.concat_tables(
                [pa.Table.from_batches([b]) for b in batches], promote_options="default"
            )
            out[name] = table.cast(native_schema(table.schema))
        return out

    def child_schemas(self) -> dict[str, pa.Schema]:
        """Each child table's columns as :meth:`child_tables` types them (no row copied)."""
        return {
            name: native_schema(
                pa.unify_schemas([b.schema for b in batches], promote_options="default")
            )
            for name, batches in self._child_rows.items()
        }

    def drop_children(self) -> None:
        self._child_rows.clear()


def keys_committed_twice(load_id: str) -> SinkError:
    return SinkError(
        f"load {load_id} carries idempotency keys that another load already committed",
        code="DPONE_SINK_KEY_ALREADY_COMMITTED",
        fixes=("ask committed_keys() first and load only the keys it does not return",),
    )
