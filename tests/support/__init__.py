"""Helpers the tests share: paths, dpone processes, the PostgreSQL and S3 servers, the DLQ's
files.

Fixtures defined here are registered for the whole suite by ``pytest_plugins`` in
``tests/conftest.py``; plain helpers are imported from their module.
"""
