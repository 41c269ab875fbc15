"""Replay of rows quarantined from an S3 object (SPEC §8): ``quarantine-replay --execute``
re-reads the object its ``record_ref`` names, refuses an object whose SHA-256 changed, and
never follows a ref outside the manifest's own bucket and key glob."""

from __future__ import annotations

import pytest

from tests.support.dlqfiles import reseal_ref
from tests.support.replay_pipeline import FIRST_LOAD, REPLAYED
from tests.support.s3pipeline import S3Pipeline, csv_bytes

KEY = "landing/orders.csv"


def _quarantine_run(s3p: S3Pipeline) -> str:
    """The first run (three rows quarantined), then the contract fix and its migration."""
    s3p.put(KEY, csv_bytes())
    s3p.write_manifest()
    result = s3p.run()
    assert result.exit_code == 0, result.stdout + result.stderr
    assert s3p.amounts() == FIRST_LOAD
    s3p.write_manifest(scale=3)
    s3p.migrate_amount()
    return str(result.doc["dlq"]["run_id"])


def test_replay_re_reads_the_unchanged_object_and_loads_the_fixed_rows_once(
    s3p: S3Pipeline,
) -> None:
    run_id = _quarantine_run(s3p)

    first = s3p.execute(run_id)

    assert first.exit_code == 0, first.stdout + first.stderr
    assert first.doc["counts"] == {
        "applied": 2,
        "already_acknowledged": 0,
        "still_rejected": 1,
        "not_replayable": 0,
    }
    assert s3p.amounts() == FIRST_LOAD | REPLAYED
    second = s3p.execute(run_id)
    assert second.exit_code == 0, second.stdout
    assert second.doc["counts"]["applied"] == 0
    assert second.doc["counts"]["already_acknowledged"] == 2
    assert s3p.amounts() == FIRST_LOAD | REPLAYED
    assert s3p.server.secret not in first.stdout + first.stderr + second.stdout + second.stderr


@pytest.mark.parametrize("change", ["overwritten", "deleted"])
def test_replay_refuses_an_object_that_changed_and_applies_nothing(
    s3p: S3Pipeline, change: str
) -> None:
    run_id = _quarantine_run(s3p)
    if change == "overwritten":
        # Same size, same rows but one digit: only the hash tells the difference.
        s3p.put(KEY, csv_bytes().replace(b"12.345", b"12.346"))
    else:
        s3p.server.client().delete_object(Bucket=s3p.bucket, Key=KEY)

    result = s3p.execute(run_id)

    assert result.exit_code == 1, result.stdout + result.stderr
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_SOURCE_CHANGED"
    assert result.doc["path"] == s3p.uri(KEY)
    assert s3p.amounts() == FIRST_LOAD
    assert s3p.acked_ids(run_id) == []


def test_a_forged_ref_outside_the_manifests_bucket_and_prefix_loads_nothing(
    s3p: S3Pipeline,
) -> None:
    run_id = _quarantine_run(s3p)
    # Identical bytes (so the same SHA-256) where the manifest's glob does not reach.
    other = s3p.server.new_bucket()
    s3p.server.put(other, KEY, csv_bytes())
    s3p.put("private/orders.csv", csv_bytes())
    (s3p.root / "landing").mkdir()
    (s3p.root / "landing" / "orders.csv").write_bytes(csv_bytes())
    forged = [
        f"s3://{other}/{KEY}",  # another bucket
        f"s3://{s3p.bucket}/private/orders.csv",  # another prefix of the same bucket
        f"gs://{s3p.bucket}/{KEY}",  # another store
        "landing/orders.csv",  # a local file beside the manifest
    ]
    for path in forged:
        reseal_ref(s3p.dlq_dir, run_id, path)

        result = s3p.execute(run_id)

        assert result.exit_code == 2, (path, result.stdout + result.stderr)
        assert result.doc["code"] == "DPONE_DLQ_REPLAY_REF_OUTSIDE_SOURCE", path
        assert s3p.amounts() == FIRST_LOAD
        assert s3p.acked_ids(run_id) == []


def test_replay_reads_the_rows_named_by_the_refs_not_the_newest_objects(s3p: S3Pipeline) -> None:
    """A second object arriving under the glob after the run changes nothing for the replay."""
    run_id = _quarantine_run(s3p)
    s3p.put("landing/zzz-later.csv", csv_bytes((("2", "late", "99.999"),)))
    result = s3p.execute(run_id)
    assert result.exit_code == 0, result.stdout
    assert s3p.amounts() == FIRST_LOAD | REPLAYED
