"""Where things are: the repository root and the example manifests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests_examples"


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


def example_manifests() -> list[Path]:
    return sorted(EXAMPLES.glob("*/manifest.yaml"))


def copy_orders(root: Path) -> Path:
    """``root/manifests_examples/orders_csv`` without any earlier run's ``.dpone``."""
    target = root / "manifests_examples" / "orders_csv"
    shutil.copytree(EXAMPLES / "orders_csv", target, ignore=shutil.ignore_patterns(".dpone*"))
    return target / "manifest.yaml"


__all__ = ["EXAMPLES", "ROOT", "copy_orders", "example_manifests", "examples"]
