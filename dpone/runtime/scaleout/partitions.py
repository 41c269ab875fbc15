"""Deterministic partitions of a source, decided by the driver (SPEC §12).

- a file glob: one partition per file (sorted, as the local run reads them); a Parquet file
  is cut further at row-group boundaries, row groups taken together until about
  ``ROW_GROUP_TARGET`` chunks' rows (``connectors/sources/file/partitions.py``);
- a source that splits itself (:class:`~dpone.connectors.base.Partitionable`: a PostgreSQL
  table with ``partition_column`` gives key ranges, ``connectors/sources/pgkeyranges.py``);
- anything else (a query, DuckDB, SQLite, Python): one partition, and the run says so.

The same source and state always give the same partitions in the same order, so a partition's
index names its DLQ segments and staged files the same way on every attempt.
"""

from __future__ import annotations

from dpone.connectors.base import Partition, Partitionable, Partitioning, Source
from dpone.manifest.plan import Plan
from dpone.manifest.specs import PostgresSourceSpec


def plan_partitions(plan: Plan, source: Source, after: object | None) -> Partitioning:
    """The partitions of ``source``; ``after`` is the committed cursor a database source
    pushes down (it decides the row offsets of the key ranges)."""
    if isinstance(source, Partitionable):
        return source.partitions(plan.runtime.chunk_size, after)
    if isinstance(plan.source.spec, PostgresSourceSpec):
        return single(source, "an injected source cannot be partitioned")
    return single(source, f"a {plan.source.type} source cannot be partitioned")


def single(source: Source, reason: str) -> Partitioning:
    label = getattr(getattr(source, "relation", None), "partition", None) or source.identity
    return Partitioning.whole(str(label), reason)


__all__ = ["Partition", "Partitioning", "plan_partitions", "single"]
