"""Arrow batch helpers the sources, the sinks and the in-package fakes share: re-chunking,
conforming to a load schema, position masks, non-null merge keys."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.errors import SinkError, SinkSchemaError


def rechunk(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Re-slice batches to exactly ``size`` rows; a shorter batch only at the end or before a
    schema change. Holds at most ``size`` rows plus one input batch."""
    if size < 1:
        raise ValueError("chunk size must be positive")
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    schema: pa.Schema | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if schema is not None and not batch.schema.equals(schema):
            if pending:
                yield _concat(pending)
            pending, pending_rows = [], 0
        schema = batch.schema
        offset = 0
        while offset < batch.num_rows:
            take = min(size - pending_rows, batch.num_rows - offset)
            pending.append(batch.slice(offset, take))
            pending_rows += take
            offset += take
            if pending_rows == size:
                yield _concat(pending)
                pending, pending_rows = [], 0
    if pending:
        yield _concat(pending)


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.concat_batches(batches)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Reorder, cast and fill ``batch`` to exactly ``schema``.

    A column absent from the batch becomes NULL; a column absent from the schema, a cast that
    would lose data, or a NULL in a non-nullable field is a :class:`SinkSchemaError` naming the
    column, never a value.
    """
    extra = [name for name in batch.schema.names if schema.get_field_index(name) < 0]
    if extra:
        raise SinkSchemaError(f"column {extra[0]!r} is not in the load schema")
    arrays: list[pa.Array] = []
    for field in schema:
        idx = batch.schema.get_field_index(field.name)
        if idx < 0:
            column: pa.Array = pa.nulls(batch.num_rows, type=field.type)
        else:
            column = batch.column(idx)
            if not column.type.equals(field.type):
                try:
                    column = pc.cast(column, field.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    raise SinkSchemaError(
                        f"column {field.name!r} of type {column.type} does not cast to {field.type}"
                    ) from exc
        if not field.nullable and column.null_count:
            raise SinkSchemaError(f"column {field.name!r} is not nullable but holds NULL")
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def same_columns(found: pa.Schema, expected: pa.Schema) -> bool:
    """The same column names in the same order, of the same Arrow types (nullability and
    metadata aside)."""
    return found.names == expected.names and all(
        f.type.equals(e.type) for f, e in zip(found, expected, strict=True)
    )


def position_mask(positions: Sequence[int], size: int) -> pa.BooleanArray:
    """A mask of ``size`` rows, True at ``positions``."""
    everything = pa.array(range(size), pa.int64())
    return pc.is_in(everything, value_set=pa.array(positions, pa.int64()))


def check_keys_not_null(batch: pa.RecordBatch, keys: tuple[str, ...]) -> None:
    for key in keys:
        if batch.column(key).null_count:
            raise SinkError(
                f"merge key column {key!r} holds NULL; unique_key columns must be non-null",
                code="DPONE_SINK_MERGE_NULL_KEY",
            )
