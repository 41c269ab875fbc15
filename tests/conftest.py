"""Shared fixtures: the repository root, the example manifests, the PostgreSQL server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.postgres import pg_schema, pg_url

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "manifests_examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


def example_manifests() -> list[Path]:
    return sorted(EXAMPLES.glob("*/manifest.yaml"))


@dataclass
class CliRun:
    """What one CLI invocation printed, and its exit code."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed


__all__ = ["CliRun", "example_manifests", "examples", "pg_schema", "pg_url"]
