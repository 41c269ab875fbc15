"""Static checks of a ``sink: {type: dlt}`` section beyond its JSON Schema.

The schema already names dlt's destinations (an enum, so an unknown one is reported with its
line without importing dlt) and the keys of the section. What it cannot say:

- ``merge`` into dlt's ``filesystem`` destination needs a table format (``delta`` or
  ``iceberg``): on plain Parquet or JSONL files dlt falls back to ``append`` with a warning,
  which would break the merge promise silently. Refused here instead.
- ``merge_key`` means something only under ``merge``, and names contract columns.
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
    merge_key = sink.get("merge_key")
    if merge_key is not None and mode != "merge":
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SINK_OPTION",
                "merge_key applies only to strategy mode merge",
                f"{SINK}/merge_key",
                at_key=True,
                fixes=("remove merge_key, or set strategy mode: merge",),
            )
        )
    columns = sink["options"]["schema_contract"]["columns"]
    for i, column in enumerate(merge_key or ()):
        if columns and column not in columns:
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_UNIQUE_KEY_COLUMN",
                    f"merge_key column '{column}' is not declared in the contract",
                    f"{SINK}/merge_key/{i}",
                    fixes=(f"declare '{column}' under schema_contract.columns",),
                )
            )
    return errors
