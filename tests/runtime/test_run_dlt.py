"""Every end-to-end scenario through the dlt sink, on four dlt destinations: a DuckDB file,
the PostgreSQL server, Parquet files in a local bucket and SQLite through SQLAlchemy."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests import dltkit
from tests.support.project import Project, good

from .scenarios import SinkScenarios


class DltRuns(SinkScenarios):
    variant_prefix = "dpone__nc__"

    def assert_no_staging(self, project: Project) -> None:
        assert dltkit.staging_left(project.work_dir, project.name) == []
        assert dltkit.pending_packages(project.work_dir, project.name) == []


class TestDltDuckDbRuns(DltRuns):
    kind = "dlt_duckdb"


@pytest.mark.postgres
class TestDltPostgresRuns(DltRuns):
    kind = "dlt_postgres"


class TestDltFilesystemRuns(DltRuns):
    kind = "dlt_filesystem"
    coerce_strategy: ClassVar[dict[str, Any]] = {"mode": "replace"}  # no merge on plain files

    def test_merge_twice_updates_overlapping_keys(self, project: Project) -> None:
        """dlt merges into a filesystem only through delta or iceberg tables; on plain files
        it would append. dpone refuses the manifest instead, before reading a row."""
        project.write_manifest(enforcement="strict", mode="merge", unique_key=["id"])
        project.write_csv("a.csv", [good(1)])

        result = project.cli()

        assert result.exit_code == 2
        assert result.doc["code"] == "DPONE_MANIFEST_SINK_OPTION"
        assert result.doc["pointer"] == "/sink/strategy/mode"
        assert result.doc["line"] > 0
        assert project.rows() is None
        assert project.state_bytes() is None

    def test_a_merge_widened_mid_load_keeps_the_last_row_per_key(self, project: Project) -> None:
        """No merge on plain files (above): the append scenario covers this destination."""
        report = self.variant_run(project, chunk_size=2, mode="append")

        assert report["exit_code"] == 0, report.get("error")


class TestDltSqlalchemyRuns(DltRuns):
    kind = "dlt_sqlalchemy"
