"""Fixtures of the replay and retention tests (helpers: :mod:`tests.support.replay_pipeline`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.replay_pipeline import Pipeline, make_pipeline


@pytest.fixture(
    params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), "filesystem"]
)
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Pipeline:
    """The same pipeline against DuckDB, PostgreSQL and a Parquet folder."""
    return make_pipeline(request, tmp_path, str(request.param))


@pytest.fixture
def duck(request: pytest.FixtureRequest, tmp_path: Path) -> Pipeline:
    """The pipeline against DuckDB only (for behaviour that does not depend on the sink)."""
    return make_pipeline(request, tmp_path, "duckdb")
