"""The PostgreSQL side of the system tables (``connectors/systables.py`` describes them): their
rows go through a temporary table into ``<dataset>._dpone_runs`` / ``_dpone_rejected``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from dpone.connectors.sinks._common import Step
from dpone.connectors.sql.identifiers import quote_ident
from dpone.connectors.sql.postgres import ingest_temporary, temporary
from dpone.connectors.systables import SystemTable


def insert_system(
    cur: Any,
    q: Callable[[str], str],
    tables: tuple[tuple[SystemTable, pa.Table], ...],
    step: Step,
) -> None:
    """Create the system tables that do not exist yet and add ``tables``' rows, in the
    caller's transaction (a row whose key is there already is left as it is)."""
    for table, rows in tables:
        name = q(table.name)
        step.doing = f"recording the run in {name}"
        cur.execute(table.ddl(name, "postgres"))
        if not rows.num_rows:
            continue
        temp = "_dpone_sys" + table.name
        ingest_temporary(cur, temp, rows)
        cur.execute(table.insert(name, temporary(temp)))


def ensure_schema(cur: Any, dataset: str, step: Step) -> None:
    step.doing = f"creating the schema {quote_ident(dataset)}"
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(dataset)}")


__all__ = ["ensure_schema", "insert_system"]
