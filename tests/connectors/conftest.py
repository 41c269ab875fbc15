"""Fixtures for connector tests: real files, a real DuckDB file, the real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

from .sinkkit import StepClock, Target


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


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
