"""The system tables (``sink.options.system_tables``) read back with a connection of the
test's own: a fresh DuckDB connection on the file, or psycopg2 on the PostgreSQL server."""

from __future__ import annotations

from typing import Any

import duckdb

from tests.support.postgres import PG_URL, pg_query
from tests.support.project import Project

#: The sink option that turns them on.
SYSTEM = {"system_tables": True}


def query(project: Project, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` with ``{ds}`` the quoted dataset, on a fresh connection of the test's own."""
    text = sql.format(ds=f'"{project.dataset}"')
    if project.kind == "duckdb":
        with duckdb.connect(str(project.root / project.sink["database"]), read_only=True) as con:
            return con.execute(text).fetchall()
    return pg_query(PG_URL, text)


def execute(project: Project, sql: str) -> None:
    """One statement (``{ds}`` the quoted dataset), committed."""
    text = sql.format(ds=f'"{project.dataset}"')
    if project.kind == "duckdb":
        with duckdb.connect(str(project.root / project.sink["database"])) as con:
            con.execute(text)
    else:
        pg_query(PG_URL, text)
