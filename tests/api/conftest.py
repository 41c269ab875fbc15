"""A copy of the orders_csv example in ``tmp_path`` (4 bad rows of 40), for API runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.paths import EXAMPLES


def copy_orders(root: Path) -> Path:
    """``root/manifests_examples/orders_csv`` without any earlier run's ``.dpone``."""
    target = root / "manifests_examples" / "orders_csv"
    shutil.copytree(EXAMPLES / "orders_csv", target, ignore=shutil.ignore_patterns(".dpone*"))
    return target / "manifest.yaml"


@pytest.fixture
def orders(tmp_path: Path) -> Path:
    return copy_orders(tmp_path)


@pytest.fixture
def strict_orders(orders: Path) -> Path:
    """The example under strict enforcement: its first bad row fails the run."""
    text = orders.read_text()
    assert "enforcement: quarantine" in text
    orders.write_text(text.replace("enforcement: quarantine", "enforcement: strict"))
    return orders
