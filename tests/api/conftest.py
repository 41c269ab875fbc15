"""A copy of the orders_csv example in ``tmp_path`` (4 bad rows of 40), for API runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import copy_orders


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
