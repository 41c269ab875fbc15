"""dpone's strategy in dlt's words (SPEC §13: the dlt sink applies dlt's own merge):
``write_disposition``, ``primary_key``, ``merge_key`` and the ``hard_delete`` column hint of
a resource, and the columns dpone adds to its rows.

- ``upsert``: dlt's ``delete-insert`` on ``primary_key`` = ``unique_key`` (dpone de-duplicates
  first, last row wins, so it replaces each key's row: an upsert on every destination).
- ``delete-insert``: dlt's ``delete-insert`` with ``merge_key`` (and ``primary_key`` when
  ``unique_key`` is set).
- ``scd2``: dlt's ``scd2`` with dpone's column names (``_dpone_valid_from``,
  ``_dpone_valid_to``, ``_dpone_row_hash`` as dlt's row version, computed here), the boundary
  timestamp of the load, and ``merge_key`` = ``unique_key``: dlt then retires only the keys
  the load holds, so a key absent from the load stays open, as on dpone's own sinks.
- ``deleted_column``: dlt's ``hard_delete`` hint on that column, under ``upsert`` and
  ``delete-insert``. dlt's ``scd2`` opens a version for a row marked deleted instead of only
  closing the current one, so ``scd2`` with ``deleted_column`` is refused (the compiler says
  so first).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pyarrow as pa

from dpone.connectors.base import LOAD_ID_COLUMN, ROW_HASH, VALID_FROM, VALID_TO, LoadSpec
from dpone.connectors.errors import SinkConfigError


def resource_hints(spec: LoadSpec) -> dict[str, Any]:
    """The keyword arguments of ``dlt.resource`` that carry the load's strategy."""
    hints: dict[str, Any] = {
        "write_disposition": spec.mode,
        "primary_key": list(spec.unique_key) or None,
    }
    if spec.mode != "merge":
        return hints
    if spec.merge_strategy == "scd2":
        if spec.deleted_column is not None:
            raise SinkConfigError(
                "the dlt sink cannot apply deleted_column under scd2: dlt would open a "
                "version for the deleted row",
                fixes=("use sink type duckdb or postgres, or remove deleted_column",),
            )
        disposition: dict[str, Any] = {
            "disposition": "merge",
            "strategy": "scd2",
            "validity_column_names": [VALID_FROM, VALID_TO],
            "row_version_column_name": ROW_HASH,
        }
        if spec.valid_at is not None:
            disposition["boundary_timestamp"] = spec.valid_at.isoformat()
        hints.update(
            write_disposition=disposition,
            primary_key=None,
            merge_key=list(spec.unique_key),
        )
    else:
        hints["write_disposition"] = {"disposition": "merge", "strategy": "delete-insert"}
        if spec.merge_strategy == "delete-insert":
            hints["merge_key"] = list(spec.merge_key)
    if spec.deleted_column is not None:
        hints["columns"] = {spec.deleted_column: {"hard_delete": True}}
    return hints


def with_added(spec: LoadSpec, table: pa.Table) -> pa.Table:
    """``table`` with the columns dpone adds: scd2's row hash, the load id."""
    if spec.mode == "merge" and spec.merge_strategy == "scd2":
        table = table.append_column(pa.field(ROW_HASH, pa.string()), row_hashes(table))
    if "load_id" in spec.load_columns:
        ids = pa.array([spec.load_id] * table.num_rows, pa.string())
        table = table.append_column(pa.field(LOAD_ID_COLUMN, pa.string()), ids)
    return table


def row_hashes(table: pa.Table) -> pa.Array:
    """An MD5 of each row's values (its canonical JSON), dlt's row version under scd2."""
    names = table.schema.names
    out = []
    for row in table.to_pylist():
        text = orjson.dumps([row[n] for n in names], default=str)
        out.append(hashlib.md5(text, usedforsecurity=False).hexdigest())
    return pa.array(out, pa.string())
