"""Shared fixtures: the repository root, the example manifests, the PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.postgres import pg_schema, pg_url

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "manifests_examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


def example_manifests() -> list[Path]:
    return sorted(EXAMPLES.glob("*/manifest.yaml"))


__all__ = ["example_manifests", "examples", "pg_schema", "pg_url"]
