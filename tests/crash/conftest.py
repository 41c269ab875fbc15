"""The crash tests reuse the end-to-end fixtures of ``tests/runtime`` (a project folder per test,
a PostgreSQL schema of its own)."""

from __future__ import annotations

import pytest

# The harness's checks are plain asserts: show their operands when they fail.
pytest.register_assert_rewrite("tests.crash.harness")

from tests.runtime.conftest import pg_schema, pg_url  # noqa: E402

__all__ = ["pg_schema", "pg_url"]
