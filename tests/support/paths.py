"""Where things are: the repository root and the example manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests_examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


def example_manifests() -> list[Path]:
    return sorted(EXAMPLES.glob("*/manifest.yaml"))


__all__ = ["EXAMPLES", "ROOT", "example_manifests", "examples"]
