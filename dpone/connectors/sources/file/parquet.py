"""Parquet: one row group's batches at a time, with the file's own types."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from dpone.connectors.errors import SourceDecodeError
from dpone.connectors.fs import SourceFile


def parquet_batches(path: SourceFile, partition: str, chunk_size: int) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq  # only a Parquet source pays for its import

    try:
        # pre_buffer off: on, iter_batches fetches every row group up front (the whole file
        # in memory, one ranged read of an object); off, one row group's pages at a time.
        with path.open_random() as source, pq.ParquetFile(source, pre_buffer=False) as pf:
            yield from pf.iter_batches(batch_size=chunk_size)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SourceDecodeError(
            f"{partition}: not a readable Parquet file",
            path=partition,
            fixes=("replace the file with an intact copy; retrying reads the same bytes",),
        ) from None
