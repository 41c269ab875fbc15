"""The run-level fixtures of tests/runtime serve the assertion tests too."""

from tests.runtime.conftest import project  # noqa: F401
