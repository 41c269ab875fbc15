"""The filesystem sink's files: the columns dpone adds, merge by rewriting the files that hold a
key (last wins), and the durable reads and writes of table files and JSON documents."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpone import durable
from dpone.connectors.base import LOAD_ID_COLUMN, LoadSpec
from dpone.connectors.errors import SinkError, SinkFileCorrupt, SinkSchemaError
from dpone.connectors.sinks._common import os_error
from dpone.connectors.sinks.fsmarkers import is_identifier

_READ_BATCH = 65_536


# --- dpone's columns -----------------------------------------------------------------------


def file_schema(spec: LoadSpec) -> pa.Schema:
    """A load's files' schema: the load's, and ``_dpone_load_id`` when it asks for it."""
    if "load_id" in spec.load_columns:
        return spec.schema.append(pa.field(LOAD_ID_COLUMN, pa.string()))
    return spec.schema


def with_load_columns(spec: LoadSpec, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with the load columns ``spec`` asks for (its load id on every row)."""
    if "load_id" not in spec.load_columns:
        return batch
    ids = pa.array([spec.load_id] * batch.num_rows, pa.string())
    return batch.append_column(pa.field(LOAD_ID_COLUMN, pa.string()), ids)


# --- merge helpers ---------------------------------------------------------------------------


def dedup(
    staged: list[Path], keys: tuple[str, ...], folder: Path, schema: pa.Schema
) -> tuple[list[Path], pa.Table]:
    """Keep the last staged row per key; returns the staged files to add and the key table.

    Memory: the staged rows' key columns (not the rows) plus one read batch.
    """
    parts = []
    offset = 0
    for path in staged:
        table = pq.read_table(path, columns=list(keys))
        idx = pa.array(range(offset, offset + table.num_rows), pa.int64())
        parts.append(table.append_column("_dpone_idx", idx))
        offset += table.num_rows
    all_keys = pa.concat_tables(parts)
    winners = all_keys.group_by(list(keys), use_threads=False).aggregate([("_dpone_idx", "max")])
    key_table = winners.select(list(keys))
    if winners.num_rows == all_keys.num_rows:
        return staged, key_table
    keep = winners.column("_dpone_idx_max").combine_chunks()
    out = folder / "merged-00000.parquet"
    offset = 0
    with parquet_writer(out, schema) as writer:
        for batch in iter_file(staged):
            idx = pa.array(range(offset, offset + batch.num_rows), pa.int64())
            offset += batch.num_rows
            writer.write_batch(batch.filter(pc.is_in(idx, value_set=keep)))
    return [out], key_table


def iter_file(paths: list[Path]) -> Iterator[pa.RecordBatch]:
    for path in paths:
        with pq.ParquetFile(str(path)) as pf:
            yield from pf.iter_batches(batch_size=_READ_BATCH)


def rewrite_without(
    path: Path, key_table: pa.Table, keys: tuple[str, ...], out: Path
) -> int | None:
    """Rewrite ``path`` without the rows whose key is in ``key_table``.

    Returns None when no row matches (the file stays), else the number of rows kept in ``out``.
    """
    file_schema = read_schema(path)
    try:
        probe = key_table.cast(pa.schema([file_schema.field(k) for k in keys]))
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SinkSchemaError(
            "a merge key column is missing from, or does not cast to, an existing file"
        ) from None
    existing = read_table(path, list(keys))
    if existing.join(probe, keys=list(keys), join_type="left semi").num_rows == 0:
        return None
    kept = 0
    with parquet_writer(out, file_schema) as writer:
        for batch in iter_file([path]):
            rest = pa.Table.from_batches([batch]).join(
                probe, keys=list(keys), join_type="left anti"
            )
            rest = rest.select(file_schema.names).cast(file_schema)
            if rest.num_rows:
                writer.write_table(rest)
                kept += rest.num_rows
    if not kept:
        out.unlink()
    return kept


# --- durable file helpers --------------------------------------------------------------------


def corrupt(path: Path) -> SinkFileCorrupt:
    name = path.name if is_identifier(path.name) else "a file"
    return SinkFileCorrupt(
        f"filesystem sink: the committed table file {name} is not readable Parquet",
        fixes=(
            "restore the file from a backup (the load marker in _dpone_loads/ lists it), "
            "or reload the table with strategy mode replace",
        ),
    )


def read_schema(path: Path) -> pa.Schema:
    """A committed file's schema; a damaged file is a typed error, not a library one."""
    schema: pa.Schema = read_committed(path, lambda: pq.read_schema(path))
    return schema


def read_table(path: Path, columns: list[str]) -> pa.Table:
    table: pa.Table = read_committed(path, lambda: pq.read_table(path, columns=columns))
    return table


def read_committed(path: Path, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except FileNotFoundError:
        raise SinkError(
            "a committed file of the table is missing", code="DPONE_SINK_RECOVERY_FAILED"
        ) from None
    except OSError as exc:
        if exc.errno is None and isinstance(exc, pa.ArrowException):
            raise corrupt(path) from None  # Arrow's IOError for bytes it cannot decode
        raise os_error(exc, "filesystem sink: reading a table file") from None
    except pa.ArrowException:
        raise corrupt(path) from None


def json_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, indent=1).encode()


def write_json(path: Path, doc: dict[str, Any], *, anchor: Path) -> None:
    durable.replace_atomic(path, json_bytes(doc), anchor=anchor)


def create_json(path: Path, doc: dict[str, Any], *, anchor: Path) -> bool:
    """Create ``path`` atomically and only if absent; False when it already existed."""
    try:
        durable.create_only(path, json_bytes(doc), anchor=anchor)
    except FileExistsError:
        return False
    return True


def parquet_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of a new staging file, created first with dpone's file mode (0640) and never
    through a link (Arrow's own open would give 0644 and follow one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, durable.FILE_MODE)
    os.close(fd)
    return pq.ParquetWriter(str(path), schema)


def rmtree(path: Path) -> None:
    """Remove a staging folder of the sink (``<root>/_dpone_staging/<load_id>``) through the
    descriptor of ``_dpone_staging`` opened without following links: a link in its place is
    refused, a link at the load folder's name is dropped itself, never followed."""
    durable.remove_tree_below(path.parent.parent, path)
