"""``source.normalize``: only on a source that produces nested records; child tables where this
version loads them (SPEC §13): from any of those sources into DuckDB or PostgreSQL, by append,
replace or upsert."""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext, Document

#: The sources whose records may nest (a JSON line, a Python mapping, an API's or dlt's item).
NESTED_SOURCES = ("python", "rest_api", "dlt")

_AS_JSON = (
    "remove source.normalize and declare each nested field as a json column "
    "(`orders: {type: json}`): it loads as the sink's JSON type (DuckDB JSON, PostgreSQL "
    "jsonb) and is queried with its JSON operators"
)


def check_normalize(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    source = doc["source"]
    normalize = source.get("normalize")
    if normalize is None:
        return []
    kind = source.get("type")
    nested = kind in NESTED_SOURCES or (kind == "file" and source.get("format") == "jsonl")
    if not nested:
        what = f"a {source.get('format')} file" if kind == "file" else f"a {kind} source"
        return [
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                f"normalize applies to sources that produce nested records; {what} does not",
                "/source/normalize",
                at_key=True,
                fixes=(
                    "remove source.normalize (only file jsonl, python, rest_api and dlt "
                    "sources produce nested records)",
                ),
            )
        ]
    return _child_tables(doc, ctx)


def _child_tables(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """Child tables load into DuckDB or PostgreSQL, by append, replace or upsert, on the local
    engine; anything else is refused before a row is read, saying what is missing."""
    sink = doc["sink"]
    strategy = sink.get("strategy") or {}
    mode, merge = strategy.get("mode", "append"), strategy.get("merge_strategy") or "upsert"
    engine = (doc.get("runtime") or {}).get("engine", "local")
    missing = None
    if sink.get("type") not in ("duckdb", "postgres"):
        missing = f"the {sink.get('type')} sink (child tables load into DuckDB and PostgreSQL)"
    elif mode == "merge" and merge != "upsert":
        missing = f"merge_strategy {merge} (child tables merge by upsert)"
    elif engine != "local":
        missing = f"engine {engine} (child tables are unnested by the local engine)"
    if missing is None:
        return []
    return [
        ctx.error(
            "DPONE_MANIFEST_CHILD_TABLES_UNSUPPORTED",
            f"normalize: {{nested: child_tables}} is not supported with {missing}; no child "
            "table would be loaded",
            "/source/normalize/nested",
            fixes=(_AS_JSON,),
        )
    ]
