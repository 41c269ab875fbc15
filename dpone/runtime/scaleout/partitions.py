"""Deterministic partitions of a source, decided by the driver (SPEC §12).

- a file glob: one partition per file (sorted, as the local run reads them); a Parquet file
  is cut further at row-group boundaries, row groups taken together until about
  ``ROW_GROUP_TARGET`` chunks' rows;
- a source that splits itself (:class:`~dpone.connectors.base.Partitionable`: a PostgreSQL
  table with ``partition_column`` gives key ranges, ``connectors/sources/pgkeyranges.py``);
- anything else (a query, DuckDB, SQLite, Python): one partition, and the run says so.

The same source and state always give the same partitions in the same order, so a partition's
index names its DLQ segments and staged files the same way on every attempt.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from dpone.connectors.base import Partition, Partitionable, Partitioning, Source
from dpone.connectors.errors import SourceUnavailable
from dpone.connectors.sources.file import FileSource
from dpone.manifest.plan import Plan
from dpone.manifest.specs import PostgresSourceSpec

#: Parquet row groups are grouped until they hold about this many chunks' rows.
ROW_GROUP_TARGET = 4


def plan_partitions(plan: Plan, source: Source, after: object | None) -> Partitioning:
    """The partitions of ``source``; ``after`` is the committed cursor a database source
    pushes down (it decides the row offsets of the key ranges)."""
    if isinstance(source, FileSource):
        return _files(source, plan.runtime.chunk_size)
    if isinstance(source, Partitionable):
        return source.partitions(plan.runtime.chunk_size, after)
    if isinstance(plan.source.spec, PostgresSourceSpec):
        return single(source, "an injected source cannot be partitioned")
    return single(source, f"a {plan.source.type} source cannot be partitioned")


def single(source: Source, reason: str) -> Partitioning:
    label = getattr(getattr(source, "relation", None), "partition", None) or source.identity
    return Partitioning.whole(str(label), reason)


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


__all__ = ["Partition", "Partitioning", "plan_partitions", "single"]
