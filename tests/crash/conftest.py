"""The crash tests reuse the end-to-end helpers of ``tests.support`` (``project``,
``replay_pipeline``); the PostgreSQL fixtures come from ``tests/conftest.py``."""

from __future__ import annotations

import pytest

# The harness's checks are plain asserts: show their operands when they fail.
pytest.register_assert_rewrite("tests.crash.harness")
