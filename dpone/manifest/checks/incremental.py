"""The incremental cursor: a declared column with an order, and arithmetic when it has a lag."""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext, Document, contract_columns

UNORDERABLE_CURSOR_TYPES = ("boolean", "json", "binary")
#: Cursor types ``lag`` can be subtracted from (seconds, days, units).
LAG_CURSOR_TYPES = ("timestamp", "date", "integer", "bigint", "float", "decimal")


def check_incremental(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    incremental = doc["source"].get("incremental")
    columns = contract_columns(doc)
    if not incremental or not columns:
        return []
    name = incremental["cursor_column"]
    pointer = "/source/incremental/cursor_column"
    if name not in columns:
        return [
            ctx.error(
                "DPONE_MANIFEST_INCREMENTAL_COLUMN",
                f"cursor column '{name}' is not declared in the contract",
                pointer,
                fixes=(f"declare '{name}' under schema_contract.columns with an orderable type",),
            )
        ]
    if columns[name]["type"] in UNORDERABLE_CURSOR_TYPES:
        return [
            ctx.error(
                "DPONE_MANIFEST_INCREMENTAL_COLUMN",
                f"cursor column '{name}' has type {columns[name]['type']}, which has no order",
                pointer,
                fixes=("use a timestamp, date, integer, decimal or string cursor",),
            )
        ]
    if incremental.get("lag") and columns[name]["type"] not in LAG_CURSOR_TYPES:
        return [
            ctx.error(
                "DPONE_MANIFEST_INCREMENTAL_LAG",
                f"lag needs a cursor with arithmetic; '{name}' has type {columns[name]['type']}",
                "/source/incremental/lag",
                fixes=(
                    "remove lag, or use a timestamp (lag in seconds), date (days) or number cursor",
                ),
            )
        ]
    return []
