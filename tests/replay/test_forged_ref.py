"""A record forged to name a file outside the manifest's source loads nothing.

The forger can write the DLQ folder: it rewrites a record's ``record_ref`` to a file next to
the source that the manifest's glob does not match (and that holds a row which would pass),
reseals the record's checksum, the segment's SHA-256 in the index, the fingerprint and the
index checksum, so the store verifies. The replay executor still refuses: every ref is
resolved against the manifest's own source, never followed as written.
"""

from __future__ import annotations

from dpone.ops.verification import verify_store
from tests.support.dlqfiles import reseal_ref
from tests.support.replay_pipeline import FIRST_LOAD, Pipeline


def test_a_forged_record_naming_a_file_outside_the_source_loads_nothing(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    # A file the glob `data/*.csv` does not match, with rows that would pass the fixed contract.
    outside = duck.root / "other"
    outside.mkdir()
    (outside / "orders.csv").write_bytes(duck.data.read_bytes())
    reseal_ref(duck.dlq_dir, run_id, "other/orders.csv")
    # The forgery is consistent: only the source check is left.
    assert verify_store(duck.store()) == []

    result = duck.execute(run_id)

    assert result.exit_code == 2, result.stdout
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_REF_OUTSIDE_SOURCE"
    assert duck.amounts() == FIRST_LOAD  # nothing loaded, from anywhere
    assert duck.acked_ids(run_id) == []
