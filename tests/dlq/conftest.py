"""Fixtures for the dead-letter store tests: a frozen clock, stores on real disk
(row builders and writer processes: :mod:`tests.support.dlqrows`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dpone.contracts.dlq import DlqPolicy
from dpone.dlq.store import DlqStore
from dpone.testing import FrozenClock
from tests.support.dlqrows import StoreFactory


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock("2026-03-01T12:00:00Z")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "dlq"


@pytest.fixture
def make_store(root: Path, clock: FrozenClock) -> StoreFactory:
    """``make_store(**policy_fields, environment=...)`` on the same root."""

    def make(environment: str = "dev", **fields: Any) -> DlqStore:
        policy = DlqPolicy(directory=str(root), **fields)
        return DlqStore(root, policy, clock=clock, environment=environment)

    return make


@pytest.fixture
def store(make_store: StoreFactory) -> DlqStore:
    return make_store()
