"""The PostgreSQL side of the system tables (``connectors/systables.py`` describes them): their
rows go through a temporary table into ``<dataset>._dpone_runs`` / ``_dpone_rejected``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from dpone.connectors.sinks._common import Step
from dpone.connectors.sinks.pgtemp import ingest_temporary, temporary
from dpone.connectors.sql import postgres as pg
from dpone.connectors.sql.identifiers import quote_ident
from dpone.connectors.systables import RUNS_TABLE, RunRow, SystemTable


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


def record_run(conn: Any, dataset: str, q: Callable[[str], str], row: RunRow) -> None:
    """``row`` into ``_dpone_runs`` in a transaction of its own on ``conn`` (committed here;
    the caller closes the connection)."""
    step = Step(f"creating the schema {quote_ident(dataset)}")
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(dataset)}")
            insert_system(cur, q, ((RUNS_TABLE, row.to_table()),), step)
        conn.commit()
    except pg.DRIVER_ERRORS as exc:
        raise pg.sink_error(exc, step.doing) from None


__all__ = ["insert_system", "record_run"]
