"""Key presence: which rows of a chunk lack a key that other rows have.

Sources whose rows are mappings (JSONL, Python, REST, dlt) fill a key absent from a row with
NULL, like a key carrying null; ``required_columns`` must tell them apart (SPEC §4: key
presence, not non-null). Such a source adds one boolean column per key that some rows lack,
named ``__dpone__present__<key>`` (true: the row has the key), to the batch it builds: it
then follows the batch through re-chunking and slicing for free. :func:`split_presence` takes
those columns back out when the batch becomes a :class:`~dpone.connectors.base.SourceChunk`
(its ``present``). A batch whose rows all have the same keys (every CSV, Parquet or database
batch, most JSON ones) gets no column and costs one key comparison per row, in C.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

PRESENT_PREFIX = "__dpone__present__"


def absent_keys(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], dict[str, list[bool]]]:
    """Every key of ``rows`` in order of first appearance, and for each key some rows lack,
    whether each row has it (empty when every row has every key)."""
    if not rows:
        return [], {}
    first = rows[0].keys()
    if all(row.keys() == first for row in rows):
        return [str(k) for k in first], {}
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    masks: dict[str, list[bool]] = {}
    for name in names:
        flags = [name in row for row in rows]
        if not all(flags):
            masks[str(name)] = flags
    return [str(n) for n in names], masks


def with_presence(batch: pa.RecordBatch, masks: Mapping[str, list[bool]]) -> pa.RecordBatch:
    """``batch`` with a presence column per key of ``masks``."""
    for name, flags in masks.items():
        batch = batch.append_column(PRESENT_PREFIX + name, pa.array(flags, pa.bool_()))
    return batch


def rows_batch(rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    """Mappings as a batch typed by Arrow, every key of every row a column (Arrow's own
    ``from_pylist`` keeps only the first row's keys), with presence columns where rows differ.
    Arrow's errors (values it cannot type together) propagate."""
    names, masks = absent_keys(rows)
    if not masks:
        batch = pa.RecordBatch.from_pylist(list(rows))
        # Rows without any key (JSON `{}`): Arrow makes no row of them, which loses them.
        return batch if batch.num_rows == len(rows) else keyless(len(rows))
    columns = {name: [row.get(name) for row in rows] for name in names}
    return with_presence(pa.RecordBatch.from_pydict(columns), masks)


def keyless(count: int) -> pa.RecordBatch:
    """``count`` rows with no column: mappings without a key (JSON ``{}``), each still a row
    (the contract finds its declared columns absent) where Arrow's builders would make none."""
    return pa.RecordBatch.from_struct_array(pa.array([{}] * count, type=pa.struct([])))


def split_presence(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict[str, pa.BooleanArray]]:
    """``batch`` without its presence columns, and those columns by key."""
    names = batch.schema.names
    if not any(name.startswith(PRESENT_PREFIX) for name in names):
        return batch, {}
    present: dict[str, pa.BooleanArray] = {}
    keep: list[int] = []
    for i, name in enumerate(names):
        if name.startswith(PRESENT_PREFIX):
            present[name[len(PRESENT_PREFIX) :]] = batch.column(i)
        else:
            keep.append(i)
    return batch.select(keep), present


__all__ = [
    "PRESENT_PREFIX",
    "absent_keys",
    "keyless",
    "rows_batch",
    "split_presence",
    "with_presence",
]
