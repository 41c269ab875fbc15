"""Exactly-once replay under SIGKILL (SPEC §8): kill point x sink.

Each cell quarantines 12 fixable rows (and 11 that load), fixes the contract, then runs
``dpone ops quarantine-replay --execute`` as a real process that SIGKILLs itself at a replay
fault point (``dpone/faults.py``) in one of its three batch loads (``chunk_size: 5``), and
executes again to the end. Every row must then be in the target exactly once, every replayed
record acknowledged once, and every acknowledged key committed by the sink once.

``make test`` runs :data:`REPRESENTATIVE`; ``make test-crash`` runs every cell.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from dpone.ops.verification import verify_store
from tests.support.replay_pipeline import Pipeline, make_pipeline

SINKS = ("duckdb", "postgres", "filesystem")
#: The second of three batches: one batch before it committed and was acknowledged.
POINTS = (
    "replay_before_batch_commit:1",
    "replay_before_batch_commit:2",
    "replay_after_batch_commit:1",
    "replay_after_batch_commit:3",
    "replay_during_acks:1",
    "replay_during_acks:2",
)
REPRESENTATIVE = {
    ("replay_after_batch_commit:3", "duckdb"),
    ("replay_during_acks:1", "postgres"),
    ("replay_before_batch_commit:2", "filesystem"),
}
ROWS = tuple((str(i), f"n{i}", "1.005" if i % 2 else "2.00") for i in range(1, 24))
EXPECTED = {int(i): Decimal(amount) for i, _, amount in ROWS}
FIXABLE = 12


def _cells() -> list[pytest.ParameterSet]:
    cells = []
    for point in POINTS:
        for sink in SINKS:
            marks = [] if (point, sink) in REPRESENTATIVE else [pytest.mark.crash]
            if sink == "postgres":
                marks.append(pytest.mark.postgres)
            cells.append(pytest.param(point, sink, id=f"{point}-{sink}", marks=marks))
    return cells


def _quarantined(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> tuple[Pipeline, str]:
    pipeline = make_pipeline(request, tmp_path, kind)
    pipeline.write_csv(ROWS)
    pipeline.write_manifest(chunk_size=5)
    run_id = pipeline.run()
    pipeline.write_manifest(scale=3, chunk_size=5)
    pipeline.migrate_amount()
    return pipeline, run_id


def _assert_exactly_once(pipeline: Pipeline, run_id: str) -> None:
    assert pipeline.amounts() == EXPECTED  # amounts() fails on a duplicated id
    acks = pipeline.store().read_acks(run_id)
    assert len(acks) == FIXABLE
    keys = pipeline.committed_keys()
    assert sorted(ack.idempotency_key for ack in acks.values()) == sorted(keys)
    assert verify_store(pipeline.store()) == []


@pytest.mark.parametrize(("point", "sink"), _cells())
def test_a_killed_replay_then_reexecution_applies_each_row_once(
    point: str, sink: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    pipeline, run_id = _quarantined(request, tmp_path, sink)

    pipeline.execute_killed(run_id, point)
    result = pipeline.execute(run_id)

    assert result.exit_code == 0, result.stdout + result.stderr
    counts = result.doc["counts"]
    assert counts["applied"] + counts["already_acknowledged"] == FIXABLE
    _assert_exactly_once(pipeline, run_id)
    again = pipeline.execute(run_id).doc["counts"]
    assert again["applied"] == 0
    assert again["already_acknowledged"] == FIXABLE
    _assert_exactly_once(pipeline, run_id)


@pytest.mark.crash
@pytest.mark.parametrize(
    "sink", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), "filesystem"]
)
def test_a_reexecution_killed_too_is_finished_by_the_next(
    sink: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Killed after a commit, then killed again while acknowledging what it found committed."""
    pipeline, run_id = _quarantined(request, tmp_path, sink)

    pipeline.execute_killed(run_id, "replay_after_batch_commit:2")
    pipeline.execute_killed(run_id, "replay_during_acks:1")
    result = pipeline.execute(run_id)

    assert result.exit_code == 0, result.stdout
    _assert_exactly_once(pipeline, run_id)
