"""Deterministic partitions of a source, decided by the driver (SPEC §12).

- a file glob: one partition per file (sorted, as the local run reads them); a Parquet file
  is cut further at row-group boundaries, row groups taken together until about
  ``ROW_GROUP_TARGET`` chunks' rows;
- a PostgreSQL table with ``partition_column``: ``partitions`` key ranges between the
  column's minimum and maximum (integer, date or timestamp), rows with a NULL key a partition
  of their own, each range read in key order;
- anything else (a query, DuckDB, SQLite, Python): one partition, and the run says so.

The same source and state always give the same partitions in the same order, so a partition's
index names its DLQ segments and staged files the same way on every attempt.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow.parquet as pq

from dpone.connectors import _pg
from dpone.connectors._util import quote_ident
from dpone.connectors.base import Source
from dpone.connectors.errors import SourceConfigError, SourceError, SourceUnavailable
from dpone.connectors.sources._sql import Relation, select_sql
from dpone.connectors.sources.file import FileSource
from dpone.connectors.sources.postgres import PostgresSource, sql_literal
from dpone.manifest.plan import Plan
from dpone.manifest.specs import PostgresSourceSpec

PartitionKind = Literal["file", "row_groups", "key_range", "whole"]
#: Parquet row groups are grouped until they hold about this many chunks' rows.
ROW_GROUP_TARGET = 4


@dataclass(frozen=True, slots=True)
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
    #: key ranges: the SQL predicate on the key (literals only, built here)
    where: str | None = None
    order_by: str | None = None
    #: rows of the run before this partition (the row numbers of run-scoped DLQ refs)
    row_offset: int = 0


@dataclass(frozen=True, slots=True)
class KeyRange(Relation):
    """A table's rows whose key is in one range, in key order."""

    where: str = "TRUE"
    order_by: str = ""

    def base_sql(self, catalog: str | None = None) -> str:
        sql = f"{Relation.base_sql(self, catalog)} WHERE {self.where}"
        return f"{sql} ORDER BY {self.order_by}" if self.order_by else sql


@dataclass(frozen=True, slots=True)
class Partitioning:
    partitions: tuple[Partition, ...]
    #: why the source runs as one partition (None: it was split)
    single_reason: str | None = None


def plan_partitions(plan: Plan, source: Source, after: object | None) -> Partitioning:
    """The partitions of ``source``; ``after`` is the committed cursor a database source
    pushes down (it decides the row offsets of the key ranges)."""
    if isinstance(source, FileSource):
        return _files(source, plan.runtime.chunk_size)
    spec = plan.source.spec
    if isinstance(source, PostgresSource) and isinstance(spec, PostgresSourceSpec):
        if spec.partition_column is None or spec.partitions is None:
            return _single(source, "the postgres source has no partition_column")
        if source.relation.table is None:
            return _single(source, "a query source cannot be split by key (use table:)")
        return _key_ranges(source, spec.partition_column, spec.partitions, after)
    return _single(source, f"a {plan.source.type} source cannot be partitioned")


def _single(source: Source, reason: str) -> Partitioning:
    label = getattr(getattr(source, "relation", None), "partition", None) or source.identity
    return Partitioning((Partition(0, "whole", str(label)),), reason)


def _files(source: FileSource, chunk_size: int) -> Partitioning:
    parts: list[Partition] = []
    for label, path in source.files():
        if source.format != "parquet":
            parts.append(Partition(len(parts), "file", label, file=label))
            continue
        try:
            with pq.ParquetFile(str(path)) as pf:
                sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
        except OSError:
            raise SourceUnavailable(f"{label}: cannot read the file") from None
        except Exception:  # pyarrow's ArrowInvalid and kin: the worker reports it as local does
            parts.append(Partition(len(parts), "file", label, file=label))
            continue
        target = chunk_size * ROW_GROUP_TARGET
        group: list[int] = []
        rows = first = 0
        for i, size in enumerate(sizes):
            group.append(i)
            rows += size
            if rows >= target or i == len(sizes) - 1:
                parts.append(
                    Partition(
                        len(parts), "row_groups", label, file=label,
                        row_groups=tuple(group), first_row=first + 1,
                    )
                )  # fmt: skip
                first += rows
                group, rows = [], 0
        if not sizes:
            parts.append(Partition(len(parts), "file", label, file=label))
    return Partitioning(tuple(parts))


def _key_ranges(
    source: PostgresSource, column: str, count: int, after: object | None
) -> Partitioning:
    table = source.relation.table
    assert table is not None
    key = quote_ident(column)
    base = source.relation.base_sql()
    rows = _query(source, f"SELECT min({key}), max({key}) FROM ({base}) AS _dpone_k")
    low, high = rows[0]
    preds: list[str] = []
    if low is not None:
        numeric = isinstance(low, int) and not isinstance(low, bool)
        if not numeric and not hasattr(low, "isoformat"):
            raise SourceConfigError(
                f"partition_column {column!r} must be an integer, date or timestamp column",
                pointer="/source/partition_column",
            )
        expr = key if numeric else f"EXTRACT(EPOCH FROM {key})"
        lo, hi = (low, high) if numeric else _epochs(source, key, base)
        span = hi - lo
        count = max(1, min(count, int(span) + 1)) if numeric else max(1, count)
        bounds = [lo + span * i / count for i in range(count)] + [hi]
        for i in range(count):
            left, right = _literal(bounds[i], numeric), _literal(bounds[i + 1], numeric)
            upper = "<=" if i == count - 1 else "<"
            preds.append(f"{expr} >= {left} AND {expr} {upper} {right}")
    preds.append(f"{key} IS NULL")
    parts: list[Partition] = []
    offset = 0
    for pred in preds:
        relation = KeyRange(table, None, where=pred, order_by=key)
        counted = select_sql(relation, source.incremental, after, sql_literal)
        (rows_in,) = _query(source, f"SELECT count(*) FROM ({counted}) AS _dpone_c")[0]
        if not rows_in:
            continue
        parts.append(
            Partition(len(parts), "key_range", table, where=pred, order_by=key, row_offset=offset)
        )
        offset += int(rows_in)
    if not parts:  # an empty table still runs (and commits an empty load)
        return _single(source, "the table is empty")
    return Partitioning(tuple(parts))


def _literal(value: float, numeric: bool) -> str:
    if numeric:
        # Integer keys: ranges start at whole numbers (ceil keeps them disjoint and complete).
        return str(-int(-value // 1))
    return repr(float(value))


def _epochs(source: PostgresSource, key: str, base: str) -> tuple[float, float]:
    sql = (
        f"SELECT EXTRACT(EPOCH FROM min({key}))::float8, EXTRACT(EPOCH FROM max({key}))::float8 "
        f"FROM ({base}) AS _dpone_k"
    )
    low, high = _query(source, sql)[0]
    return float(low), float(high)


def _query(source: PostgresSource, sql: str) -> list[tuple[Any, ...]]:
    """A small query of the source database (its SQLSTATE only in an error)."""
    try:
        # The source's resolved connection string: never logged, never in an error.
        conn = _pg.connect(source._connection, autocommit=True)
    except _pg.DRIVER_ERRORS:
        raise SourceUnavailable("cannot connect to the PostgreSQL source") from None
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(row) for row in cur.fetchall()]
    except _pg.DRIVER_ERRORS as exc:
        _, detail = _pg.classify(exc)
        raise SourceError(f"cannot partition the PostgreSQL source ({detail})") from None
    finally:
        with contextlib.suppress(*_pg.DRIVER_ERRORS, RuntimeError):
            conn.close()


__all__ = ["KeyRange", "Partition", "Partitioning", "plan_partitions"]
