"""The state machine every :class:`SinkLoad` shares: open -> committed | aborted."""

from __future__ import annotations

import dataclasses
import errno
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa

from dpone.connectors._util import check_keys_not_null, conform, position_mask, quote_ident
from dpone.connectors.base import LOAD_MODES, LoadMarker, LoadSpec
from dpone.connectors.errors import (
    SinkDiskFull,
    SinkError,
    SinkMarkerInvalid,
    SinkReadOnly,
    SinkSchemaError,
    SinkUnavailable,
)
from dpone.dlq.index import PIPELINE_PATTERN
from dpone.errors import DponeError
from dpone.ids import is_identifier


class LoadState(ABC):
    """Open until committed or aborted. Subclasses implement ``_stage``, ``_commit``,
    ``_abort`` and ``_close``; usable as a context manager (aborts unless committed)."""

    def __init__(self, spec: LoadSpec) -> None:
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


def widen_parquet(path: Path, schema: pa.Schema) -> None:
    """Rewrite a staged Parquet file to ``schema`` (a superset of its own), new columns NULL.

    Runs once per column a load gains mid-way (a variant column's first value): rare, and
    bounded by the rows staged so far; the file is replaced atomically.
    """
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + ".widen")
    with pq.ParquetFile(path) as source, pq.ParquetWriter(str(tmp), schema) as writer:
        for batch in source.iter_batches():
            writer.write_batch(conform(batch, schema))
    os.replace(tmp, path)


#: The columns of the SQL sinks' marker tables, in the order of :func:`marker_row`, quoted.
MARKER_COLUMNS = ", ".join(
    quote_ident(c)
    for c in (
        "load_id",
        "pipeline",
        "run_id",
        "row_count",
        "cursor_to",
        "committed_at",
        "target",
        "load_mode",
    )
)


def marker_row(marker: LoadMarker) -> tuple[Any, ...]:
    """The marker as the values of :data:`MARKER_COLUMNS`."""
    return (
        marker.load_id,
        marker.pipeline,
        marker.run_id,
        marker.rows,
        marker.cursor_to,
        marker.committed_at,
        marker.target,
        marker.mode,
    )


def marker_from_row(row: Sequence[Any]) -> LoadMarker:
    """A marker from the values of :data:`MARKER_COLUMNS` (the reverse of :func:`marker_row`)."""
    load_id, pipeline, run_id, rows, cursor_to, committed_at, target, mode = row
    if mode not in LOAD_MODES:
        raise SinkError("a load marker holds an unknown mode", code="DPONE_SINK_RECOVERY_FAILED")
    # A marker row is read back to decide what committed: anything but what dpone writes is
    # refused as such (an edited table), never turned into an internal error.
    if (
        not all(is_identifier(v) for v in (load_id, run_id))
        or not (isinstance(pipeline, str) and PIPELINE_RE.fullmatch(pipeline))
        or type(rows) is not int
        or rows < 0
        or not isinstance(committed_at, str)
        or not isinstance(target, str)
        or not (cursor_to is None or isinstance(cursor_to, str))
    ):
        raise SinkMarkerInvalid(
            "a load marker row of the sink's marker table is not one dpone wrote",
            fixes=(
                "restore the marker table from a backup, or remove the edited row after "
                "checking which load it describes",
            ),
        )
    return LoadMarker(
        load_id=str(load_id),
        pipeline=str(pipeline),
        run_id=str(run_id),
        rows=int(rows),
        cursor_to=None if cursor_to is None else str(cursor_to),
        committed_at=str(committed_at),
        target=str(target),
        mode=mode,
    )


PIPELINE_RE = re.compile(PIPELINE_PATTERN)
#: The SQL sinks' table of committed idempotency keys: one row per key, inserted in the
#: transaction of the load that carried it (``LoadSpec.keys``).
KEYS_TABLE = "_dpone_load_keys"
KEY_COLUMN = "idempotency_key"
#: The row position column of a probe table (see :class:`KeyProbes`).
PROBE_POSITION = "_dpone_pos"


def keys_committed_twice(load_id: str) -> SinkError:
    return SinkError(
        f"load {load_id} carries idempotency keys that another load already committed",
        code="DPONE_SINK_KEY_ALREADY_COMMITTED",
        fixes=("ask committed_keys() first and load only the keys it does not return",),
    )


def positioned(probe: pa.Table) -> pa.Table:
    """``probe`` with the position of each row, which the join of :class:`KeyProbes` returns."""
    return probe.append_column(PROBE_POSITION, pa.array(range(probe.num_rows), pa.int64()))


def probe_join_sql(probe: str, target: str, columns: Sequence[str]) -> str:
    """The positions of the ``probe`` rows whose ``columns`` match a row of ``target``
    (both already quoted)."""
    on = " AND ".join(f"t.{quote_ident(c)} = p.{quote_ident(c)}" for c in columns)
    return (
        f"SELECT DISTINCT p.{quote_ident(PROBE_POSITION)} FROM {probe} AS p "
        f"JOIN {target} AS t ON {on}"
    )


class Step:
    """What a sequence of SQL statements is doing now (an operation and the quoted names
    it touches), so the error of a failed statement can say which one failed."""

    __slots__ = ("doing",)

    def __init__(self, doing: str) -> None:
        self.doing = doing


class KeyProbes(ABC):
    """``committed_keys`` and ``existing_keys`` of the SQL sinks, over one ``_matching`` join."""

    table: str

    @abstractmethod
    def _matching(self, name: str, probe: pa.Table, columns: Sequence[str]) -> list[int]:
        """Positions of the ``probe`` rows matching a row of ``dataset.name`` on ``columns``
        (none when that table does not exist)."""

    def committed_keys(self, keys: Collection[str]) -> set[str]:
        wanted = list(keys)
        if not wanted:
            return set()
        probe = pa.table({KEY_COLUMN: pa.array(wanted, pa.string())})
        return {wanted[i] for i in self._matching(KEYS_TABLE, probe, (KEY_COLUMN,))}

    def existing_keys(self, columns: Sequence[str], probe: pa.Table) -> pa.BooleanArray:
        if not probe.num_rows:
            return position_mask([], 0)
        hits = self._matching(self.table, probe.select(list(columns)), columns)
        return position_mask(hits, probe.num_rows)


def os_error(exc: OSError, what: str) -> DponeError:
    """A typed, transient error for a failed file-system call (no path in the message)."""
    message = f"{what} failed ({errno.errorcode.get(exc.errno or 0, type(exc).__name__)})"
    if exc.errno == errno.ENOSPC:
        return SinkDiskFull(message)
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return SinkReadOnly(message)
    return SinkUnavailable(message)
