"""Step 10 (7): a record forged to name a file outside the manifest's source loads nothing.

The forger can write the DLQ folder: it rewrites a record's ``record_ref`` to a file next to
the source that the manifest's glob does not match (and that holds a row which would pass),
reseals the record's checksum, the segment's SHA-256 in the index, the fingerprint and the
index checksum, so the store verifies. The replay executor still refuses: every ref is
resolved against the manifest's own source, never followed as written.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from dpone.canonical import checksum
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import reseal_index, segment_files
from tests.support.replay_pipeline import FIRST_LOAD, Pipeline


def _reseal_ref(dlq: Path, run_id: str, new_path: str) -> None:
    """Point the first replayable record at ``new_path`` and make the store verify again."""
    segment = segment_files(dlq, run_id)[0]
    lines = segment.read_bytes().splitlines()
    doc = orjson.loads(lines[0])
    old_ref = doc["record_ref"]
    doc["record_ref"] = "dpone://file/" + new_path + old_ref[old_ref.index("?") :]
    del doc["sha256"]
    doc["sha256"] = checksum(doc)
    lines[0] = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    segment.write_bytes(b"".join(line + b"\n" for line in lines))
    reseal_index(dlq, run_id)


def test_a_forged_record_naming_a_file_outside_the_source_loads_nothing(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    # A file the glob `data/*.csv` does not match, with rows that would pass the fixed contract.
    outside = duck.root / "other"
    outside.mkdir()
    (outside / "orders.csv").write_bytes(duck.data.read_bytes())
    _reseal_ref(duck.dlq_dir, run_id, "other/orders.csv")
    assert (
        verify_store(duck.store()) == []
    )  # the forgery is consistent: only the source check is left

    result = duck.execute(run_id)

    assert result.exit_code == 2, result.stdout
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_REF_OUTSIDE_SOURCE"
    assert duck.amounts() == FIRST_LOAD  # nothing loaded, from anywhere
    assert duck.acked_ids(run_id) == []
