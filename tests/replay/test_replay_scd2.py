"""Replaying quarantined rows into an scd2 table (SPEC §8, §13): each replayed row opens a
version of its key, the versions the run opened stay open, and executing the replay again
opens nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.replay_pipeline import CANARY, ROWS, make_pipeline
from tests.support.scd2 import history, write_scd2_manifest


@pytest.mark.parametrize("sink", ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_replay_into_scd2_opens_the_replayed_versions(
    sink: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    pipeline = make_pipeline(request, tmp_path, sink)
    pipeline.write_csv(ROWS)
    write_scd2_manifest(pipeline)
    run_id = pipeline.run()
    loaded = [(1, "a", "10.50", 0, None), (3, "c", "7.25", 0, None), (6, "f", "3.00", 0, None)]
    assert history(pipeline) == loaded
    write_scd2_manifest(pipeline, manifest={"scale": 3})
    pipeline.migrate_amount()

    result = pipeline.execute(run_id)

    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.doc["counts"]["applied"] == 2
    # the replayed keys open at the replay's time; the run's versions stay as they were
    assert history(pipeline) == [
        (1, "a", "10.500", 0, None),
        (2, CANARY, "12.345", 1, None),
        (3, "c", "7.250", 0, None),
        (4, "d", "1.999", 1, None),
        (6, "f", "3.000", 0, None),
    ]
    again = pipeline.execute(run_id)
    assert again.doc["counts"]["applied"] == 0
    assert len(history(pipeline)) == 5
