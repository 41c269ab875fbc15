"""The ``project`` fixture of the run-level assertion tests (:mod:`tests.support.project`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.project import Project, make_project


@pytest.fixture
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    """A project against the sink named by the test class's ``kind`` (DuckDB by default)."""
    return make_project(request, tmp_path)
