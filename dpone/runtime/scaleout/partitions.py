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

from dataclasses import dataclass
from typing import Literal

import pyarrow.parquet as pq

from dpone.connectors.base import Source
from dpone.connectors.errors import SourceUnavailable
from dpone.connectors.sources._sql import Relation
from dpone.connectors.sources.file import FileSource
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
    if isinstance(spec, PostgresSourceSpec):
        # Imported here: the PostgreSQL driver is the driver's to load, not every task's.
        from dpone.connectors.sources.postgres import PostgresSource
        from dpone.runtime.scaleout.keyranges import key_ranges

        if not isinstance(source, PostgresSource):
            return single(source, "an injected source cannot be partitioned")
        if spec.partition_column is None or spec.partitions is None:
            return single(source, "the postgres source has no partition_column")
        if source.relation.table is None:
            return single(source, "a query source cannot be split by key (use table:)")
        return key_ranges(source, spec.partition_column, spec.partitions, after)
    return single(source, f"a {plan.source.type} source cannot be partitioned")


def single(source: Source, reason: str) -> Partitioning:
    label = getattr(getattr(source, "relation", None), "partition", None) or source.identity
    return Partitioning((Partition(0, "whole", str(label)),), reason)


def _files(source: FileSource, chunk_size: int) -> Partitioning:
    parts: list[Partition] = []
    for label, path in source.files():
        if source.format != "parquet":
            parts.append(Partition(len(parts), "file", label, file=label))
            continue
        try:
            with path.open_random() as handle, pq.ParquetFile(handle) as pf:
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


__all__ = ["KeyRange", "Partition", "Partitioning", "plan_partitions", "single"]
