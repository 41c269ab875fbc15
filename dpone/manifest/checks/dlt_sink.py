"""Static checks of a ``sink: {type: dlt}`` section beyond its JSON Schema.

The schema already names dlt's destinations (an enum, so an unknown one is reported with its
line without importing dlt) and the keys of the section. What it cannot say: ``merge`` into
dlt's ``filesystem`` destination needs a table format (``delta`` or ``iceberg``): on plain
Parquet or JSONL files dlt falls back to ``append`` with a warning, which would break the
merge promise silently. Refused here instead; so is ``deleted_column`` under ``scd2``
(``connectors/sinks/dlt/hints.py`` says why).
"""

from __future__ import annotations

from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest.context import SINK, CompileContext

TABLE_FORMATS = ("delta", "iceberg")


def check_dlt_sink(doc: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    sink = doc["sink"]
    if sink.get("type") != "dlt":
        return []
    errors: list[ErrorDetail] = []
    mode = sink["strategy"]["mode"]
    options = sink.get("destination_options", {})
    if (
        mode == "merge"
        and sink["destination"] == "filesystem"
        and options.get("table_format") not in TABLE_FORMATS
    ):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SINK_OPTION",
                "dlt's filesystem destination merges only into a table format (delta or "
                "iceberg); on plain files it would append instead",
                f"{SINK}/strategy/mode",
                fixes=(
                    "set destination_options: {table_format: delta} (needs the deltalake "
                    "package) or {table_format: iceberg} (needs pyiceberg)",
                    "or use strategy mode append or replace",
                ),
            )
        )
    strategy = sink["strategy"]
    if strategy.get("merge_strategy") == "scd2" and "deleted_column" in strategy:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SINK_OPTION",
                "the dlt sink cannot apply deleted_column under scd2: dlt's scd2 opens a "
                "version for a row marked deleted instead of only closing the current one",
                f"{SINK}/strategy/deleted_column",
                at_key=True,
                fixes=("use sink type duckdb or postgres, or remove deleted_column",),
            )
        )
    return errors
