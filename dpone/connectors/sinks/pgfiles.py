"""Parquet files into a PostgreSQL load's staging table: each file one binary COPY.

The files' batches are streamed (one row group's worth at a time, never the whole file) as
one Arrow stream per file to ADBC's ``adbc_ingest``, which sends them by
``COPY ... FROM STDIN (FORMAT binary)``: no row passes through Python.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.connectors.batches import same_columns
from dpone.connectors.sql import postgres as pg
from dpone.connectors.sql.identifiers import qualify
from dpone.connectors.sql.pgtypes import staging_array

#: rows per Arrow batch of the stream (a row group is usually larger: read in slices)
BATCH_ROWS = 131_072


def ingest_files(conn: Any, stage: str, files: Sequence[Path]) -> int:
    """Every file's rows into the temporary table ``stage`` of ``conn``'s open transaction;
    how many. A driver error is the sink's error (the caller aborts the load)."""
    try:
        with conn.cursor() as cur:
            return sum(ingest_parquet(cur, stage, path) for path in files)
    except pg.DRIVER_ERRORS as exc:
        raise pg.sink_error(
            exc, f"copying Parquet files into the staging table {qualify('pg_temp', stage)}"
        ) from None


def ingest_parquet(cur: Any, stage: str, path: Path) -> int:
    """The rows of ``path`` appended to the temporary table ``stage``; how many."""
    import pyarrow.parquet as pq  # scale-out and prevalidated runs only

    with pq.ParquetFile(path) as pf:
        rows = int(pf.metadata.num_rows)
        if not rows:
            return 0
        schema = pa.schema([_staging_field(f) for f in pf.schema_arrow]).remove_metadata()

        def batches() -> Iterator[pa.RecordBatch]:
            for batch in pf.iter_batches(batch_size=BATCH_ROWS):
                arrays = [staging_array(column) for column in batch.columns]
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)

        reader = pa.RecordBatchReader.from_batches(schema, batches())
        cur.adbc_ingest(stage, reader, mode="append", temporary=True)
    return rows


def _staging_field(field: pa.Field) -> pa.Field:
    """The field as :func:`staging_array` makes its column (JSON as text, NULL as text)."""
    if isinstance(field.type, pa.JsonType):
        return pa.field(field.name, field.type.storage_type)
    if pa.types.is_null(field.type):
        return pa.field(field.name, pa.string())
    return pa.field(field.name, field.type)


def all_match(files: Sequence[Path], schema: pa.Schema) -> bool:
    """Whether every file has exactly the columns and types of ``schema``."""
    import pyarrow.parquet as pq

    return all(same_columns(pq.read_schema(f), schema) for f in files)


__all__ = ["BATCH_ROWS", "all_match", "ingest_files", "ingest_parquet"]
