"""A writer killed with SIGKILL in the middle of a chunk, then verify and --repair.

The second chunk is cut into segments of at most 1 MiB (``max_segment_bytes``); the writer
dies inside the publish of one of them, after its temporary file is durable and before the
link that would give it its final name.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import orjson
from click.testing import CliRunner

from dpone.cli.ops_dlq import dlq_group
from dpone.dlq.store import DlqStore
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import record_ids_on_disk, segment_files, temp_files
from tests.support.dlqrows import start_writer

RUN = "run-killed"
# About 800 bytes a record: the second chunk makes three segments of at most 1 MiB.
CHUNKS = [25, 3000]
POLICY = {"max_segment_bytes": 1_048_576}


def _kill_mid_chunk(root: Path, complete: int) -> list[str]:
    """Write one durable chunk, then die inside the next after ``complete`` of its segments."""
    proc = start_writer(
        root, run_id=RUN, chunks=CHUNKS, mode="hang", hang_after=complete, policy=POLICY
    )
    assert proc.stdout is not None
    reported = json.loads(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "MID"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    return list(reported)


def test_sigkill_mid_chunk_then_verify_and_repair(root: Path, store: DlqStore) -> None:
    reported = _kill_mid_chunk(root, complete=1)
    published = segment_files(root, RUN)
    assert [p.name for p in published] == ["00000001.jsonl", "00000002.jsonl"]
    [torn] = temp_files(root, RUN)
    assert torn.name.startswith(".00000003.jsonl.tmp-")
    on_disk = record_ids_on_disk(root, RUN)
    assert len(on_disk) > len(CHUNKS[:1]) + 1  # the first chunk and a part of the second
    assert len(on_disk) == len(set(on_disk))
    index = json.loads((root / "runs" / RUN / "index.json").read_bytes())
    assert index["status"] == "open"

    runner = CliRunner()
    found = runner.invoke(dlq_group, ["verify", "--dir", str(root), "--format", "json"])
    assert found.exit_code == 1, found.output
    report = json.loads(found.output)
    assert sorted((f["code"], f["path"]) for f in report["findings"]) == [
        ("DPONE_DLQ_RUN_ABANDONED", f"runs/{RUN}"),
        ("DPONE_DLQ_TORN_SEGMENT", f"runs/{RUN}/segments/{torn.name}"),
    ]
    assert all(f["repairable"] for f in report["findings"])

    fixed = runner.invoke(dlq_group, ["verify", "--dir", str(root), "--repair"])
    assert fixed.exit_code == 0, fixed.output
    assert "repaired DPONE_DLQ_RUN_ABANDONED" in fixed.output

    index = json.loads((root / "runs" / RUN / "index.json").read_bytes())
    assert (index["status"], index["status_reason"]) == ("aborted", "writer_gone")
    assert temp_files(root, RUN) == []
    assert [s["name"] for s in index["segments"]] == ["00000001.jsonl", "00000002.jsonl"]
    indexed = [e["record_id"] for e in index["records"]]
    assert indexed == on_disk  # exactly the records of the published segments
    assert set(reported) <= set(indexed)  # nothing reported durable was lost
    assert [r.record_id for r in store.iter_records(RUN)] == indexed
    for segment in index["segments"]:  # found by id through each segment's first/last ids
        for record_id in (segment["first_record_id"], segment["last_record_id"]):
            assert store.read_record(RUN, record_id).record_id == record_id
    assert verify_store(store) == []
    assert not (root / "runs" / RUN / "writer.lock").exists()
    assert orjson.loads((root / "runs" / RUN / "index.json").read_bytes())["owner"] is None


def test_sigkill_then_recovery_by_the_next_run(root: Path, store: DlqStore) -> None:
    reported = _kill_mid_chunk(root, complete=0)
    assert len(temp_files(root, RUN)) == 1
    assert store.recover_abandoned(pipeline="orders") == [RUN]
    index = store.read_index(RUN)
    assert index.status == "aborted"
    assert index.record_ids == tuple(sorted(reported))
    assert [s.name for s in index.segments] == ["00000001.jsonl"]
    assert temp_files(root, RUN) == []
    assert verify_store(store) == []
