"""``source.prevalidated: true``: what a prevalidated load can honour, refused here otherwise.

A prevalidated run checks every file's mark, schema and NOT NULL statistics and then lets the
sink read the files itself (docs/sources.md, "Prevalidated Parquet"). That skips the row-by-row
stream, so whatever needs to see rows (assertions, the incremental window) or a reader dpone
does not have natively (object stores, the dlt and filesystem sinks, Dask) cannot be combined
with it: each is one error naming why.
"""

from __future__ import annotations

from dpone import sourcepaths
from dpone.errors import ErrorDetail
from dpone.manifest.context import CONTRACT, CompileContext, Document
from dpone.manifest.pointers import join_pointer

CODE = "DPONE_MANIFEST_PREVALIDATED_UNSUPPORTED"
#: The sinks that load a prevalidated file natively inside their commit's transaction.
NATIVE_SINKS = ("duckdb", "postgres")


def check_prevalidated(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """Each reason a ``prevalidated: true`` source cannot be loaded natively."""
    source = doc["source"]
    if source.get("type") != "file" or source.get("prevalidated") is not True:
        return []
    reasons: list[tuple[str, str, str]] = []  # (why, where, fix)
    if source.get("format") != "parquet":
        reasons.append(
            (
                "only Parquet files carry a prevalidation mark",
                "/source/format",
                "use format: parquet, or drop prevalidated",
            )
        )
    path = source.get("path")
    if isinstance(path, str) and sourcepaths.is_object_uri(path):
        reasons.append(
            (
                "prevalidated files must be local files (the sink reads them by path)",
                "/source/path",
                "copy the files to a local folder first, or drop prevalidated",
            )
        )
    sink = doc["sink"].get("type")
    if sink not in NATIVE_SINKS:
        reasons.append(
            (
                f"the {sink} sink has no native Parquet load; only duckdb and postgres do",
                "/sink/type",
                "load into duckdb or postgres, or drop prevalidated",
            )
        )
    if doc["runtime"].get("engine") == "dask":
        reasons.append(
            (
                "a prevalidated load runs in one process (engine: local)",
                "/runtime/engine",
                "set engine: local",
            )
        )
    assertions = doc.get("quality", {}).get("assertions", {})
    if any(key != "on_failure" and value not in ([], {}) for key, value in assertions.items()):
        reasons.append(
            (
                "assertions need to see the rows, which a prevalidated load never reads",
                "/quality/assertions",
                "remove quality.assertions (check them in the producer), or drop prevalidated",
            )
        )
    if "incremental" in source:
        reasons.append(
            (
                "the incremental window filters rows, which a prevalidated load never reads",
                "/source/incremental",
                "export only the new rows in the producer, or drop prevalidated",
            )
        )
    columns = doc["sink"].get("options", {}).get("schema_contract", {}).get("columns", {})
    if not columns:
        reasons.append(
            (
                "the contract declares no column, so there is nothing to hold the files to",
                CONTRACT,
                "declare every column of the files under schema_contract.columns",
            )
        )
    renamed = [name for name, col in columns.items() if isinstance(col, dict) and "source" in col]
    if renamed:
        reasons.append(
            (
                f"column {renamed[0]!r} renames a source column; prevalidated files hold the "
                "contract's own names",
                join_pointer(join_pointer(f"{CONTRACT}/columns", renamed[0]), "source"),
                "write the column under its contract name in the producer",
            )
        )
    return [
        ctx.error(
            CODE,
            f"source.prevalidated is not supported here: {why}",
            where,
            at_key=True,
            fixes=(fix,),
        )
        for why, where, fix in reasons
    ]


__all__ = ["NATIVE_SINKS", "check_prevalidated"]
