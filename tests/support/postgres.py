"""The PostgreSQL server every database test uses for real: its URL, a schema per test, and a
query helper. CI has the server, so a test that cannot reach it fails; it never skips."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def pg_url() -> str:
    """The server URL; fails (never skips) when PostgreSQL is unreachable."""
    try:
        psycopg2.connect(PG_URL, connect_timeout=5).close()
    except psycopg2.OperationalError as exc:
        pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is unreachable: {exc}")
    return PG_URL


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema of this test's own, dropped afterwards (tests run in parallel)."""
    name = f"t_{uuid.uuid4().hex}"
    yield name
    conn = psycopg2.connect(pg_url)
    try:
        conn.autocommit = True
        conn.cursor().execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        conn.close()


def pg_query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` in its own committed transaction; its rows (none for a statement)."""
    conn = psycopg2.connect(url)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows
    finally:
        conn.close()


__all__ = ["PG_URL", "pg_query", "pg_schema", "pg_url"]
