"""Fixtures for the dead-letter store tests: a frozen clock, stores on real disk, row builders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dpone.contracts.reasons import ReasonCode
from dpone.dlq.model import RejectedRow, rejected_rows
from dpone.dlq.policy import DlqPolicy
from dpone.dlq.refs import file_refs
from dpone.dlq.store import DlqStore
from dpone.testing import FrozenClock

HERE = Path(__file__).parent
FILE_SHA = "ab" * 32

StoreFactory = Callable[..., DlqStore]


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


def rows(
    count: int,
    *,
    start: int = 1,
    reason: ReasonCode = ReasonCode.TYPE_MISMATCH,
    column: str | None = "amount",
    path: str = "data/orders.csv",
    values: list[dict[str, Any]] | None = None,
) -> list[RejectedRow]:
    """``count`` rejects of consecutive rows of one file."""
    return rejected_rows(
        file_refs(path, FILE_SHA, range(start, start + count)),
        reason,
        columns=column,
        actual_types="string",
        expected_types="decimal(18,2)",
        source_offsets=list(range(start - 1, start - 1 + count)),
        source_partitions=path,
        rows=values,
    )


def files_under(root: Path) -> Iterator[Path]:
    for folder, _, names in os.walk(root):
        for name in names:
            yield Path(folder) / name


def start_writer(root: Path, **spec: Any) -> subprocess.Popen[str]:
    """Run ``writer_proc.py`` (a writer in another process) with ``spec`` as its JSON argument."""
    spec = {"root": str(root), **spec}
    return subprocess.Popen(
        [sys.executable, str(HERE / "writer_proc.py"), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_writer(root: Path, **spec: Any) -> list[list[str]]:
    """Run a writer process to its end; the ids it reported, one list per chunk."""
    proc = start_writer(root, **spec)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.startswith("[")]
