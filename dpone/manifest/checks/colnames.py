"""The compiler's half of the column naming rule (``dpone/contracts/names.py``).

The declared names and their ``source:`` keys must leave every source column one name a sink
can hold: no two declared names that differ only in the letter case of A-Z, no source column
taken by two declared columns. The runtime applies the same rule to the names the source
brings (``dpone/runtime/names.py``).
"""

from __future__ import annotations

from typing import Any

from dpone.contracts.names import fold
from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext
from dpone.manifest.pointers import join_pointer

CODE = "DPONE_MANIFEST_COLUMN_NAME"
COLUMNS = "/sink/options/schema_contract/columns"
#: Sources whose incremental cursor reaches the source itself by name (a SQL WHERE, an API
#: parameter): there the cursor column must be the source's own name.
_PUSHDOWN_SOURCES = ("duckdb", "sqlite", "postgres", "dlt", "rest_api")


def check_column_names(doc: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    columns: dict[str, Any] = doc["sink"]["options"]["schema_contract"]["columns"]
    errors: list[ErrorDetail] = []
    folded: dict[str, str] = {}
    for name in columns:
        other = folded.setdefault(fold(name), name)
        if other != name:
            errors.append(
                ctx.error(
                    CODE,
                    f"columns {other!r} and {name!r} differ only in the letter case of A-Z, "
                    "which DuckDB and dlt's destinations take for one name",
                    join_pointer(COLUMNS, name),
                    at_key=True,
                    fixes=(f"give {name!r} another name (its source column stays: `source:`)",),
                )
            )
    # A source column goes to one declared column: its own name's unless another claims it.
    claimed: dict[str, str] = {}
    for name, spec in columns.items():
        source = spec.get("source")
        if source is None or source == name:
            continue
        pointer = join_pointer(COLUMNS, name) + "/source"
        if source in claimed:
            errors.append(
                ctx.error(
                    CODE,
                    f"columns {claimed[source]!r} and {name!r} both take the source column "
                    f"{source!r}",
                    pointer,
                    fixes=("give each source column to one declared column",),
                )
            )
            continue
        claimed[source] = name
        if source in columns and columns[source].get("source") in (None, source):
            errors.append(
                ctx.error(
                    CODE,
                    f"column {name!r} takes the source column {source!r}, which the declared "
                    f"column {source!r} takes too",
                    pointer,
                    fixes=(f"rename the declared column {source!r}, or give it another source",),
                )
            )
    incremental = doc["source"].get("incremental")
    if incremental and doc["source"]["type"] in _PUSHDOWN_SOURCES:
        cursor = incremental["cursor_column"]
        spec = columns.get(cursor)
        if spec is not None and spec.get("source") not in (None, cursor):
            errors.append(
                ctx.error(
                    CODE,
                    f"the cursor column {cursor!r} takes another source column, but a "
                    f"{doc['source']['type']} source filters on the cursor by its own name",
                    join_pointer(COLUMNS, cursor) + "/source",
                    fixes=("name the column in the source itself (a query's AS), not by source:",),
                )
            )
    return errors
