"""What the sinks share beyond the load's state machine: marker rows, the idempotency keys
table, key probes, statement steps, OS errors, widening a staged Parquet file."""

from __future__ import annotations

import errno
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.connectors.base import LOAD_MODES, LoadMarker
from dpone.connectors.batches import conform, position_mask
from dpone.connectors.errors import (
    SinkDiskFull,
    SinkError,
    SinkMarkerInvalid,
    SinkReadOnly,
    SinkUnavailable,
)
from dpone.connectors.sql.identifiers import quote_ident
from dpone.dlq.index import PIPELINE_PATTERN
from dpone.errors import DponeError
from dpone.ids import is_identifier


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
