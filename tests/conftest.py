"""The suite's shared fixtures live in :mod:`tests.support`; this registers them."""

pytest_plugins = ["tests.support.paths", "tests.support.postgres"]
