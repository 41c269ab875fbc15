"""Fixtures for connector tests: real files, a real DuckDB file, the real PostgreSQL server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg2
import pytest

from .sinkkit import Target

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


class StepClock:
    """A deterministic clock: each call is one second after the previous one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def pg_url() -> str:
    """The server URL; fails (never skips) when PostgreSQL is unreachable."""
    try:
        psycopg2.connect(PG_URL, connect_timeout=5).close()
    except psycopg2.OperationalError as exc:  # pragma: no cover - environment failure
        pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is unreachable: {exc}")
    return PG_URL


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A unique schema name, dropped after the test (tests run in parallel)."""
    name = f"t_{uuid.uuid4().hex}"
    yield name
    conn = psycopg2.connect(pg_url)
    try:
        conn.autocommit = True
        conn.cursor().execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        conn.close()


def pg_query(url: str, sql: str) -> list[tuple[object, ...]]:
    conn = psycopg2.connect(url)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows
    finally:
        conn.close()


@pytest.fixture(
    params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), "filesystem"]
)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """Each real sink, with an independent reader of its target table."""
    kind = request.param
    if kind == "duckdb":
        config = {"type": "duckdb", "database": "warehouse.duckdb", "dataset": "analytics"}
        return Target(kind, tmp_path, {**config, "table": "orders"})
    if kind == "postgres":
        schema = request.getfixturevalue("pg_schema")
        url = request.getfixturevalue("pg_url")
        config = {"type": "postgres", "dataset": schema, "table": "orders"}
        return Target(kind, tmp_path, config, url)
    config = {"type": "filesystem", "path": "lake", "dataset": "analytics", "table": "orders"}
    return Target(kind, tmp_path, config)
