"""The dlt sink's four test destinations, and readers of what landed in them that do not use
dlt: DuckDB's own driver, psycopg2, SQLAlchemy over the SQLite file, pyarrow over the bucket.

A project kind ``dlt_<destination>`` (``tests.support.project.Project``) loads through
``sink: {type: dlt, destination: <destination>}`` into ``analytics.orders`` (PostgreSQL: a
schema of the test's own); :func:`read_table`, :func:`nullable` and :func:`load_markers`
read the outcome back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import duckdb
import psycopg2
import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq

from tests.support.postgres import PG_URL, pg_query

KINDS = ("dlt_duckdb", "dlt_postgres", "dlt_filesystem", "dlt_sqlalchemy")
#: The environment variable a dlt_postgres project's credentials reference.
PG_ENV = "DPONE_TEST_DLT_PG_URL"
#: The password in that URL (trust auth ignores it): no output or file may ever contain it.
PG_SECRET = f"pw{uuid.uuid4().hex}"
PG_DLT_URL = PG_URL.replace("postgres@", f"postgres:{PG_SECRET}@")


def sink_config(
    kind: str, dataset: str, table: str, *, file_format: str = "parquet"
) -> tuple[dict[str, Any], dict[str, str]]:
    """The manifest's ``sink`` section (without strategy and options) and the environment."""
    destination = kind.removeprefix("dlt_")
    sink: dict[str, Any] = {
        "type": "dlt",
        "destination": destination,
        "dataset": dataset,
        "table": table,
    }
    env: dict[str, str] = {}
    if destination == "duckdb":
        sink["credentials"] = "warehouse.duckdb"
    elif destination == "postgres":
        sink["credentials"] = "${" + PG_ENV + "}"
        env[PG_ENV] = PG_DLT_URL
    elif destination == "sqlalchemy":
        sink["credentials"] = "sqlite:///warehouse.db"
    elif destination == "filesystem":
        sink["destination_options"] = {"bucket_url": "lake"}
        sink["loader_file_format"] = file_format
    else:
        raise ValueError(kind)
    return sink, env


def drop_pg_schemas(schema: str) -> None:
    """dlt's staging dataset of a PostgreSQL schema (merge and replace load through it)."""
    pg_query(PG_URL, f'DROP SCHEMA IF EXISTS "{schema}_staging" CASCADE')


def _sqlite_file(root: Path, dataset: str) -> Path:
    # dlt's SQLAlchemy destination attaches one SQLite file per dataset, next to the main one.
    return root / f"warehouse__{dataset}.db"


def _without_dlt_columns(table: pa.Table) -> pa.Table:
    return table.select([n for n in table.column_names if not n.startswith("_dlt_")])


def read_table(kind: str, root: Path, sink: dict[str, Any]) -> pa.Table | None:
    """The target table (dlt's ``_dlt_*`` columns left out), or None while it does not exist."""
    dataset, table = sink["dataset"], sink["table"]
    readers: dict[str, Callable[[], pa.Table | None]] = {
        "dlt_duckdb": lambda: _duckdb(root / sink["credentials"], dataset, table),
        "dlt_postgres": lambda: _postgres(dataset, table),
        "dlt_sqlalchemy": lambda: _sqlite(_sqlite_file(root, dataset), table),
        "dlt_filesystem": lambda: _files(root / "lake" / dataset / table),
    }
    found = readers[kind]()
    return None if found is None else _without_dlt_columns(found)


def _duckdb(path: Path, dataset: str, table: str) -> pa.Table | None:
    if not path.exists():
        return None
    with duckdb.connect(str(path), read_only=True) as con:
        exists = con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = ? AND table_name = ?",
            [dataset, table],
        ).fetchall()
        if not exists[0][0]:
            return None
        found: pa.Table = con.sql(f'SELECT * FROM "{dataset}"."{table}"').to_arrow_table()
        return found


def _postgres(dataset: str, table: str) -> pa.Table | None:
    conn = psycopg2.connect(PG_URL)
    try:
        cur = conn.cursor()
        cur.execute("SELECT to_regclass(%s)", (f'"{dataset}"."{table}"',))
        exists = cur.fetchone()
        if exists is None or exists[0] is None:
            return None
        cur.execute(f'SELECT * FROM "{dataset}"."{table}"')
        names = [d[0] for d in cur.description]
        return pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in cur.fetchall()])
    finally:
        conn.close()


def _sqlite(path: Path, table: str) -> pa.Table | None:
    """Through SQLAlchemy's reflection, so DECIMAL, DATETIME and BOOLEAN columns come back as
    Python values of those types; SQLite keeps no time zone, dlt stores UTC."""
    import sqlalchemy as sa

    if not path.exists():
        return None
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        if table not in sa.inspect(engine).get_table_names():
            return None
        reflected = sa.Table(table, sa.MetaData(), autoload_with=engine)
        with engine.connect() as con:
            rows = [dict(r._mapping) for r in con.execute(sa.select(reflected))]
    finally:
        engine.dispose()
    for row in rows:
        for key, value in row.items():
            if hasattr(value, "tzinfo") and hasattr(value, "hour") and value.tzinfo is None:
                row[key] = value.replace(tzinfo=UTC)
    return pa.Table.from_pylist(rows)


def _files(folder: Path) -> pa.Table | None:
    files = sorted(folder.glob("*.parquet")) + sorted(folder.glob("*.jsonl*"))
    if not files:
        return None
    tables = [pq.read_table(p) if p.suffix == ".parquet" else pj.read_json(p) for p in files]
    return pa.concat_tables(tables, promote_options="permissive")


def nullable(kind: str, root: Path, sink: dict[str, Any]) -> dict[str, bool]:
    """Whether each column of the target accepts NULL, as the destination itself says."""
    dataset, table = sink["dataset"], sink["table"]
    if kind == "dlt_duckdb":
        with duckdb.connect(str(root / sink["credentials"]), read_only=True) as con:
            found = con.execute(
                "SELECT column_name, is_nullable FROM duckdb_columns() "
                "WHERE schema_name = ? AND table_name = ?",
                [dataset, table],
            ).fetchall()
        return {str(n): bool(f) for n, f in found}
    if kind == "dlt_postgres":
        found = pg_query(
            PG_URL,
            "SELECT column_name, is_nullable FROM information_schema.columns "
            f"WHERE table_schema = '{dataset}' AND table_name = '{table}'",
        )
        return {str(n): f == "YES" for n, f in found}
    if kind == "dlt_sqlalchemy":
        import sqlite3

        with sqlite3.connect(_sqlite_file(root, dataset)) as con:
            info = con.execute(f'PRAGMA table_info("{table}")').fetchall()
        return {str(r[1]): not r[3] for r in info}
    files = sorted((root / "lake" / dataset / table).glob("*.parquet"))
    schema = pa.unify_schemas([pq.read_schema(p) for p in files])
    return {f.name: f.nullable for f in schema}


def dlt_loads(kind: str, root: Path, sink: dict[str, Any]) -> dict[str, int]:
    """``_dlt_loads`` of the destination's dataset: load id -> status."""
    dataset = sink["dataset"]
    rows: list[tuple[Any, ...]] = []
    if kind == "dlt_duckdb":
        path = root / sink["credentials"]
        if path.exists():
            with duckdb.connect(str(path), read_only=True) as con:
                names = {
                    r[0]
                    for r in con.execute(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                        [dataset],
                    ).fetchall()
                }
                if "_dlt_loads" in names:
                    rows = con.execute(
                        f'SELECT load_id, status FROM "{dataset}"._dlt_loads'
                    ).fetchall()
    elif kind == "dlt_postgres":
        if pg_query(PG_URL, f"SELECT to_regclass('\"{dataset}\"._dlt_loads')")[0][0]:
            rows = pg_query(PG_URL, f'SELECT load_id, status FROM "{dataset}"._dlt_loads')
    elif kind == "dlt_sqlalchemy":
        import sqlite3

        path = _sqlite_file(root, dataset)
        if path.exists():
            with sqlite3.connect(path) as con:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
                if "_dlt_loads" in tables:
                    rows = con.execute("SELECT load_id, status FROM _dlt_loads").fetchall()
    else:
        for path in sorted((root / "lake" / dataset / "_dlt_loads").glob("*.jsonl")):
            doc = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
            rows.append((doc["load_id"], doc["status"]))
    return {str(load_id): int(status) for load_id, status in rows}


def sink_root(work_dir: Path, pipeline: str) -> Path:
    return work_dir / "dlt" / pipeline


def load_markers(
    kind: str, root: Path, sink: dict[str, Any], work_dir: Path, pipeline: str
) -> list[dict[str, Any]]:
    """The committed loads of ``pipeline`` in commit order: a package record of the sink
    whose dlt load id the destination's ``_dlt_loads`` holds with status 0."""
    loads = dlt_loads(kind, root, sink)
    folder = sink_root(work_dir, pipeline) / "packages"
    records = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")]
    target = f"{sink['dataset']}.{sink['table']}"
    committed = [
        r
        for r in records
        if loads.get(r["dlt_load_id"]) == 0 and r["pipeline"] == pipeline and r["target"] == target
    ]
    committed.sort(key=lambda r: float(r["dlt_load_id"]))
    return [
        {
            "run_id": r["run_id"],
            "load_id": r["load_id"],
            "rows": r["rows"],
            "cursor_to": r["cursor_to"],
        }
        for r in committed
    ]


def pending_packages(work_dir: Path, pipeline: str) -> list[str]:
    """Load packages dlt still holds (extracted or normalized, not loaded)."""
    base = sink_root(work_dir, pipeline) / "pipelines" / f"dpone_{pipeline}"
    folders = (
        base / "normalize" / "extracted",
        base / "load" / "normalized",
        base / "load" / "new",
    )
    return sorted(p.name for folder in folders if folder.is_dir() for p in folder.iterdir())


def staging_left(work_dir: Path, pipeline: str) -> list[str]:
    folder = sink_root(work_dir, pipeline) / "staging"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


__all__ = [
    "KINDS",
    "PG_DLT_URL",
    "PG_ENV",
    "PG_SECRET",
    "dlt_loads",
    "drop_pg_schemas",
    "load_markers",
    "nullable",
    "pending_packages",
    "read_table",
    "sink_config",
    "staging_left",
]
