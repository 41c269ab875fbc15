"""Every end-to-end scenario against the Parquet filesystem sink (committed files only)."""

from __future__ import annotations

from tests.support.project import Project

from .scenarios import SinkScenarios


class TestFilesystemRuns(SinkScenarios):
    kind = "filesystem"

    def assert_no_staging(self, project: Project) -> None:
        staging = project.lake / "_dpone_staging"
        assert not staging.exists() or list(staging.iterdir()) == []
