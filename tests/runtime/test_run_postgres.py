"""Every end-to-end scenario against the PostgreSQL server (one schema per test)."""

from __future__ import annotations

import pytest

from tests.support.postgres import PG_URL, pg_query
from tests.support.project import TABLE, Project

from .scenarios import SinkScenarios

pytestmark = pytest.mark.postgres


class TestPostgresRuns(SinkScenarios):
    kind = "postgres"

    def assert_no_staging(self, project: Project) -> None:
        # Staging is a temporary table of the load's own session; the schema holds only the
        # target and the load markers.
        tables = pg_query(
            PG_URL,
            "SELECT table_name FROM information_schema.tables "
            f"WHERE table_schema = '{project.dataset}' ORDER BY table_name",
        )
        assert tables == [("_dpone_loads",), (TABLE,)]
