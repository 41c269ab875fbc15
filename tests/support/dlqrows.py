"""Rejected rows and writer processes for the dead-letter store tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dpone.contracts.reasons import ReasonCode
from dpone.dlq.refs import file_refs
from dpone.dlq.rejects import RejectedRow, rejected_rows
from dpone.dlq.store import DlqStore

#: The writer process :func:`start_writer` runs.
WRITER_PROC = Path(__file__).resolve().parents[1] / "dlq" / "writer_proc.py"
FILE_SHA = "ab" * 32

StoreFactory = Callable[..., DlqStore]


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
        source_offsets=list(range(start, start + count)),  # as a run writes: the ref's row
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
        [sys.executable, str(WRITER_PROC), json.dumps(spec)],
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
