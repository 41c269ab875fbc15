"""What the dlt sink asks the destination itself: the ``_dlt_loads`` row of a package (the load
marker) and deleting the rows of one dlt load id (recovery and abandon). SQL destinations are
queried through dlt's SQL client, the filesystem destination through its files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import orjson

#: The column dlt fills with a row's load package id (dlt's own name for it).
LOAD_ID_COLUMN = "_dlt_load_id"


def loads_row(
    client: Any, dlt_load_id: str, pipeline: Any, clock: Callable[[], Any]
) -> tuple[int, Any] | None:
    """The ``(status, inserted_at)`` of ``dlt_load_id`` in the destination's ``_dlt_loads``,
    or None. ``pipeline`` is the dlt pipeline (its local record stands in where the destination
    has no queryable ``_dlt_loads``); ``clock`` dates such a package."""
    schema = client.schema
    if is_filesystem(client):
        # dlt writes one JSON file per completed package: <schema>__<load id>.jsonl.
        path = client.pathlib.join(
            client.dataset_path, schema.loads_table_name, f"{schema.name}__{dlt_load_id}.jsonl"
        )
        if not client.fs_client.exists(path):
            return None
        doc = orjson.loads(client.fs_client.read_bytes(path).splitlines()[0])
        return int(doc["status"]), doc["inserted_at"]
    sql = getattr(client, "sql_client", None)
    if sql is None:
        # No queryable _dlt_loads (vector stores, custom destinations): dlt's own local
        # record that the package completed is the best evidence there is.
        done = dlt_load_id in pipeline.list_completed_load_packages()
        state = pipeline.get_load_package_info(dlt_load_id).state if done else None
        return (0, clock()) if state == "loaded" else None
    from dlt.destinations.exceptions import DatabaseUndefinedRelation

    table = sql.make_qualified_table_name(schema.loads_table_name)
    load_id_col, name_col = (
        sql.escape_column_name("load_id"),
        sql.escape_column_name("schema_name"),
    )
    status_col, at_col = sql.escape_column_name("status"), sql.escape_column_name("inserted_at")
    query = (
        f"SELECT {status_col}, {at_col} FROM {table} WHERE {load_id_col} = "
        f"'{dlt_load_id}' AND {name_col} = {literal(schema.name)}"
    )
    try:
        rows = sql.execute_sql(query)
    except DatabaseUndefinedRelation:
        return None
    if not rows:
        return None
    best = min(rows, key=lambda r: int(r[0]))
    return int(best[0]), best[1]


def delete_load_rows(client: Any, table: str, dlt_load_id: str, staging: bool) -> int:
    """Delete the rows of ``dlt_load_id`` from ``table`` (in dlt's staging dataset when
    ``staging``); on a filesystem destination, the table files of that load id. Returns
    how many rows or files went; -1 when the destination offers no way to delete."""
    if is_filesystem(client):
        if staging:
            return 0
        gone = 0
        for path in client.list_table_files(table):
            if os.path.basename(path).startswith(f"{dlt_load_id}."):
                client.fs_client.rm(path)
                gone += 1
        return gone
    sql = getattr(client, "sql_client", None)
    if sql is None:
        return -1
    from dlt.destinations.exceptions import DatabaseUndefinedRelation

    scope = sql.with_staging_dataset() if staging else contextlib.nullcontext()
    with scope:
        name = sql.make_qualified_table_name(table)
        column = sql.escape_column_name(LOAD_ID_COLUMN)
        try:
            counted = sql.execute_sql(
                f"SELECT count(*) FROM {name} WHERE {column} = '{dlt_load_id}'"
            )
        except DatabaseUndefinedRelation:
            return 0
        found = int(counted[0][0]) if counted else 0
        if found:
            sql.execute_sql(f"DELETE FROM {name} WHERE {column} = '{dlt_load_id}'")
        return found


def is_filesystem(client: Any) -> bool:
    """Whether ``client`` is dlt's filesystem destination (importable only with fsspec)."""
    try:
        from dlt.destinations.impl.filesystem.filesystem import FilesystemClient
    except ImportError:
        return False
    return isinstance(client, FilesystemClient)


def iso(value: Any) -> str:
    if isinstance(value, str):
        return value
    to_iso = getattr(value, "isoformat", None)
    return str(to_iso()) if callable(to_iso) else str(value)


def literal(text: str) -> str:
    """A SQL string literal of dlt's schema name (a normalized identifier)."""
    return "'" + text.replace("'", "''") + "'"
