"""Static check of ``sink.options.system_tables``: only a SQL sink can hold the system tables.

``_dpone_runs`` and ``_dpone_rejected`` are written in the same transaction as the load and
its marker, so they need a sink that commits SQL tables atomically: DuckDB and PostgreSQL. A
filesystem or dlt sink would have to drop them silently, which the manifest must not allow.
"""

from __future__ import annotations

from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext

#: The sink types that keep the system tables (the SQL sinks dpone writes itself).
SYSTEM_TABLE_SINKS = ("duckdb", "postgres")
POINTER = "/sink/options/system_tables"


def check_system_tables(doc: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    sink = doc["sink"]
    if not sink.get("options", {}).get("system_tables"):
        return []
    kind = sink.get("type")
    if kind in SYSTEM_TABLE_SINKS:
        return []
    return [
        ctx.error(
            "DPONE_MANIFEST_SINK_OPTION",
            f"system_tables needs a DuckDB or PostgreSQL sink; a {kind} sink cannot hold "
            "_dpone_runs and _dpone_rejected in its load's transaction",
            POINTER,
            fixes=(
                "remove system_tables (the run report, the evidence and the DLQ hold the same "
                "facts)",
                "or load into a duckdb or postgres sink",
            ),
        )
    ]


__all__ = ["SYSTEM_TABLE_SINKS", "check_system_tables"]
