"""A file source's partitions for a scale-out run: a file each, or a Parquet file's row groups
grouped until they hold about ``ROW_GROUP_TARGET`` chunks' rows."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow.parquet as pq

from dpone.connectors.base import Partition, Partitioning
from dpone.connectors.errors import SourceUnavailable
from dpone.connectors.inputs import SourceFile

#: Parquet row groups are grouped until they hold about this many chunks' rows.
ROW_GROUP_TARGET = 4


def file_partitions(
    files: Sequence[tuple[str, SourceFile]], parquet: bool, chunk_size: int
) -> Partitioning:
    parts: list[Partition] = []
    for label, path in files:
        if not parquet:
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


__all__ = ["ROW_GROUP_TARGET", "file_partitions"]
