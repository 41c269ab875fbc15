"""The suite's shared fixtures live in :mod:`tests.support`; this registers them."""

from __future__ import annotations

import pytest

# The helpers in tests.support check with plain asserts: show their operands when they fail.
pytest.register_assert_rewrite("tests.support")

pytest_plugins = [
    "tests.support.paths",
    "tests.support.postgres",
    "tests.support.s3server",
    "tests.support.scaleout",
    "tests.support.crosscheck",
]

#: A fault-injection test runs dpone several times, each a process of its own with a 300 s
#: limit (tests.support.processes); the default test timeout (pyproject.toml) is for one.
CRASH_TIMEOUT = 1800


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("crash") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CRASH_TIMEOUT))
